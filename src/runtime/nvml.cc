#include "runtime/nvml.h"

#include <dlfcn.h>

#include <cctype>
#include <mutex>

#include "core/log.h"

namespace weft::runtime {

namespace {

// The few NVML types we need, with NVML's layouts and values (nvml.h is not needed to build).
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;        // NVML_NVLINK_MAX_LINKS
constexpr int kNvlinkCapP2pSupported = 0;     // NVML_NVLINK_CAP_P2P_SUPPORTED
constexpr int kNvmlFeatureEnabled = 1;        // NVML_FEATURE_ENABLED
constexpr int kRemoteGpu = 0, kRemoteIbmNpu = 1, kRemoteSwitch = 2;  // nvmlIntNvLinkDeviceType_t

struct nvmlPciInfo_t {  // nvmlPciInfo_st, v3 layout
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct Api {
  void* lib = nullptr;
  bool ok = false;
  nvmlReturn_t (*init)() = nullptr;
  const char* (*errorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*getCount)(unsigned*) = nullptr;
  nvmlReturn_t (*byIndex)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*byBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*cudaCc)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*linkCap)(nvmlDevice_t, unsigned, int, unsigned*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*) = nullptr;
};

template <typename F>
void bind(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
}

Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    a.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a.lib) {
      WEFT_INFO(log::kGraph, "NVML not available (%s); NVLinks will not be detected", dlerror());
      return;
    }
    bind(a.lib, "nvmlInit_v2", &a.init);
    bind(a.lib, "nvmlErrorString", &a.errorString);
    bind(a.lib, "nvmlDeviceGetCount_v2", &a.getCount);
    bind(a.lib, "nvmlDeviceGetHandleByIndex_v2", &a.byIndex);
    bind(a.lib, "nvmlDeviceGetHandleByPciBusId_v2", &a.byBusId);
    bind(a.lib, "nvmlDeviceGetPciInfo_v3", &a.pciInfo);
    bind(a.lib, "nvmlDeviceGetCudaComputeCapability", &a.cudaCc);
    bind(a.lib, "nvmlDeviceGetNvLinkState", &a.linkState);
    bind(a.lib, "nvmlDeviceGetNvLinkCapability", &a.linkCap);
    bind(a.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &a.remotePci);
    if (!a.remotePci) bind(a.lib, "nvmlDeviceGetNvLinkRemotePciInfo", &a.remotePci);  // older drivers
    bind(a.lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &a.remoteType);
    if (!a.init || !a.getCount || !a.byIndex || !a.byBusId || !a.pciInfo) {
      WEFT_INFO(log::kGraph, "NVML lacks basic functions; NVLinks will not be detected");
      return;
    }
    nvmlReturn_t rc = a.init();
    if (rc != kNvmlSuccess) {
      WEFT_INFO(log::kGraph, "nvmlInit failed: %s; NVLinks will not be detected",
                a.errorString ? a.errorString(rc) : "unknown error");
      return;
    }
    a.ok = true;
  });
  return a;
}

Status fail(const char* what, nvmlReturn_t rc) {
  Api& a = api();
  WEFT_INFO(log::kGraph, "%s failed: %s", what, a.errorString ? a.errorString(rc) : "unknown error");
  return ncclSystemError;
}

std::string lower(const char* s) {
  std::string out(s);
  for (char& c : out) c = (char)tolower((unsigned char)c);
  return out;
}

Status describe(nvmlDevice_t dev, int index, NvmlGpu* out) {
  Api& a = api();
  NvmlGpu g;
  g.index = index;
  nvmlPciInfo_t pci{};
  nvmlReturn_t rc = a.pciInfo(dev, &pci);
  if (rc != kNvmlSuccess) return fail("nvmlDeviceGetPciInfo", rc);
  g.busId = lower(pci.busId);
  if (a.cudaCc) a.cudaCc(dev, &g.ccMajor, &g.ccMinor);
  if (a.linkState && a.remotePci) {
    for (unsigned l = 0; l < kNvmlMaxLinks; l++) {
      int active = 0;
      if (a.linkState(dev, l, &active) != kNvmlSuccess || active != kNvmlFeatureEnabled) continue;
      unsigned p2p = 1;
      if (a.linkCap && a.linkCap(dev, l, kNvlinkCapP2pSupported, &p2p) == kNvmlSuccess && !p2p) continue;
      nvmlPciInfo_t remote{};
      if (a.remotePci(dev, l, &remote) != kNvmlSuccess) continue;
      NvLinkRemote kind = NvLinkRemote::Unknown;
      int type = -1;
      if (a.remoteType && a.remoteType(dev, l, &type) == kNvmlSuccess) {
        if (type == kRemoteGpu) kind = NvLinkRemote::Gpu;
        else if (type == kRemoteSwitch) kind = NvLinkRemote::NvSwitch;
        else if (type == kRemoteIbmNpu) kind = NvLinkRemote::Cpu;
      }
      std::string rid = lower(remote.busId);
      bool merged = false;
      for (NvmlLink& x : g.links) {
        if (x.remoteBusId == rid && x.remote == kind) {
          x.count++;
          merged = true;
        }
      }
      if (!merged) g.links.push_back(NvmlLink{rid, kind, 1});
    }
  }
  *out = std::move(g);
  return ncclSuccess;
}

}  // namespace

bool nvmlAvailable() { return api().ok; }

Status nvmlGpuCount(int* count) {
  Api& a = api();
  if (!a.ok) return ncclSystemError;
  unsigned n = 0;
  nvmlReturn_t rc = a.getCount(&n);
  if (rc != kNvmlSuccess) return fail("nvmlDeviceGetCount", rc);
  *count = (int)n;
  return ncclSuccess;
}

Status nvmlGpuByIndex(int index, NvmlGpu* out) {
  Api& a = api();
  if (!a.ok) return ncclSystemError;
  nvmlDevice_t dev = nullptr;
  nvmlReturn_t rc = a.byIndex((unsigned)index, &dev);
  if (rc != kNvmlSuccess) return fail("nvmlDeviceGetHandleByIndex", rc);
  return describe(dev, index, out);
}

Status nvmlGpuByBusId(const std::string& busId, NvmlGpu* out) {
  Api& a = api();
  if (!a.ok) return ncclSystemError;
  nvmlDevice_t dev = nullptr;
  nvmlReturn_t rc = a.byBusId(busId.c_str(), &dev);
  if (rc != kNvmlSuccess) return fail("nvmlDeviceGetHandleByPciBusId", rc);
  return describe(dev, -1, out);
}

}  // namespace weft::runtime
