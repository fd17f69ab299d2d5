#include "graph/detect.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "graph/detect_sysfs.h"
#include "graph/topo_xml.h"
#include "runtime/nvml.h"

namespace weft::graph {

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
  return buf;
}

// Builds the <system> description the way NCCL's detection lays it out: one <cpu> per NUMA domain,
// under it one <pci> per PCIe switch (its upstream port), the device's own <pci> with <gpu> or
// <nic>/<net> inside.
class Detector {
 public:
  explicit Detector(const DetectInputs& in) : in_(in) {
    sys_.setAttr("version", "1");
    std::string cpuinfo;
    std::ifstream f(in.cpuInfoPath);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      cpuinfo = ss.str();
    }
    cpuId_ = parseCpuInfo(cpuinfo);
    std::string machine = in.machine;
    if (machine.empty()) {
      struct utsname u;
      if (uname(&u) == 0) machine = u.machine;
    }
    arch_ = archName(machine);
  }

  XmlNode run() {
    for (const DetectGpu& g : in_.gpus) addGpu(g);
    for (const DetectNet& n : in_.nets) addNet(n);
    return std::move(sys_);
  }

 private:
  const DetectInputs& in_;
  XmlNode sys_{"system"};
  CpuId cpuId_;
  std::string arch_;

  XmlNode* cpuFor(int numa) {
    for (XmlNode& c : sys_.children) {
      if (c.name == "cpu" && c.intAttr("numaid", -2) == numa) return &c;
    }
    XmlNode& c = sys_.addChild("cpu");
    c.setAttr("host_hash", hex(in_.hostHash));
    c.setAttr("numaid", std::to_string(numa));
    std::string map = numaCpuMap(in_.sysfsRoot, numa);
    if (!map.empty()) c.setAttr("affinity", map);
    else WEFT_INFO(log::kGraph, "topology detection: no cpumap for NUMA node %d; CPU affinity unknown", numa);
    c.setAttr("arch", arch_);
    if (arch_ == "x86_64") {
      c.setAttr("vendor", cpuId_.vendor);
      c.setAttr("familyid", std::to_string(cpuId_.family));
      c.setAttr("modelid", std::to_string(cpuId_.model));
    }
    return &c;
  }

  static XmlNode* findPci(XmlNode* parent, const std::string& busId) {
    for (XmlNode& c : parent->children) {
      if (c.name == "pci" && canonicalBusId(c.attrOr("busid", "")) == busId) return &c;
    }
    return nullptr;
  }

  // The <pci> element of a device under `parent`, created from its sysfs attributes.
  static XmlNode* pciElement(XmlNode* parent, const std::string& busId, const PciAttrs& a, const char* defaultClass) {
    if (XmlNode* e = findPci(parent, busId)) return e;
    XmlNode& e = parent->addChild("pci");
    e.setAttr("busid", busId);
    e.setAttr("class", a.cls.empty() ? defaultClass : a.cls);
    if (!a.vendor.empty()) e.setAttr("vendor", a.vendor);
    if (!a.device.empty()) e.setAttr("device", a.device);
    if (!a.subsystemVendor.empty()) e.setAttr("subsystem_vendor", a.subsystemVendor);
    if (!a.subsystemDevice.empty()) e.setAttr("subsystem_device", a.subsystemDevice);
    e.setAttr("link_speed", a.linkSpeed);
    e.setAttr("link_width", a.linkWidth.empty() ? "0" : a.linkWidth);
    if (!a.linkKnown)
      WEFT_INFO(log::kGraph, "topology detection: no PCIe link speed/width for %s (virtual machine?); "
                "PCIe Gen3 x16 is assumed", busId.c_str());
    return &e;
  }

  // Places the device at `path` (busId `busId`): NUMA domain, PCIe switches above it, its element.
  XmlNode* place(const std::string& busId, const std::string& path, const char* defaultClass) {
    if (path.empty()) {
      WEFT_INFO(log::kGraph, "topology detection: %s not found in %s; placing it under an unknown NUMA node",
                busId.c_str(), in_.sysfsRoot.c_str());
      return pciElement(cpuFor(-1), busId, PciAttrs{}, defaultClass);
    }
    PciAttrs attrs = readPciAttrs(path);
    if (attrs.numaNode < 0)
      WEFT_INFO(log::kGraph, "topology detection: NUMA node of %s unknown (numa_node %d)", busId.c_str(),
                attrs.numaNode);
    XmlNode* parent = cpuFor(attrs.numaNode);
    std::vector<std::string> chain = pciChain(path);
    // Walking up two levels at a time skips each switch's downstream port; the first element is the
    // root port, which NCCL leaves out as part of the CPU.
    std::vector<int> switches;
    for (int i = (int)chain.size() - 3; i >= 1; i -= 2) switches.insert(switches.begin(), i);
    for (int i : switches) {
      std::string sw = canonicalBusId(chain[i]);
      size_t at = path.find("/" + chain[i]);
      std::string swPath = path.substr(0, at + 1 + chain[i].size());
      parent = pciElement(parent, sw, readPciAttrs(swPath), "0x060400");
    }
    return pciElement(parent, busId, attrs, defaultClass);
  }

  void addGpu(const DetectGpu& g) {
    std::string busId = canonicalBusId(g.busId);
    XmlNode* pci = place(busId, sysfsPciDevicePath(in_.sysfsRoot, busId), "0x030200");
    XmlNode* gpu = pci->child("gpu");
    if (!gpu) gpu = &pci->addChild("gpu");
    gpu->setAttr("dev", std::to_string(g.dev));
    gpu->setAttr("sm", std::to_string(g.sm));
    if (g.rank >= 0) gpu->setAttr("rank", std::to_string(g.rank));
    gpu->setAttr("gdr", g.gdr ? "1" : "0");
    for (const DetectGpuLinks& l : in_.links) {
      if (canonicalBusId(l.busId) != busId) continue;
      for (const DetectNvLink& n : l.nvlinks) {
        XmlNode& x = gpu->addChild("nvlink");
        x.setAttr("target", canonicalBusId(n.targetBusId));
        x.setAttr("count", std::to_string(n.count));
        x.setAttr("tclass", n.targetClass);
      }
      if (l.c2cCount > 0) {
        XmlNode& c = gpu->addChild("c2c");
        c.setAttr("bw", std::to_string(l.c2cBw));
        c.setAttr("count", std::to_string(l.c2cCount));
      }
    }
  }

  void addNet(const DetectNet& n) {
    std::string trailing;
    std::vector<std::string> chain = pciChain(n.pciPath, &trailing);
    XmlNode* nic = nullptr;
    if (n.pciPath.empty() || chain.empty() || !trailing.empty()) {
      // virtio and other non-PCI devices: NCCL hangs them off the first CPU.
      WEFT_INFO(log::kGraph, "topology detection: network device %s (%s) is not a PCI device; attaching it to the "
                "first CPU", n.name.c_str(), n.pciPath.empty() ? "no path" : n.pciPath.c_str());
      XmlNode* cpu = nullptr;
      for (XmlNode& c : sys_.children) {
        if (c.name == "cpu") {
          cpu = &c;
          break;
        }
      }
      if (!cpu) cpu = cpuFor(-1);
      nic = &cpu->addChild("nic");
    } else {
      // Ports of one card share a <pci> (function 0) and a <nic>.
      std::string busId = canonicalBusId(chain.back());
      busId.back() = '0';
      XmlNode* pci = place(busId, n.pciPath, "0x020000");
      nic = pci->child("nic");
      if (!nic) nic = &pci->addChild("nic");
    }
    XmlNode& net = nic->addChild("net");
    net.setAttr("name", n.name);
    net.setAttr("dev", std::to_string(n.dev));
    net.setAttr("speed", std::to_string(n.speedMbps));
    net.setAttr("port", std::to_string(n.port));
    char lat[32];
    snprintf(lat, sizeof(lat), "%f", n.latency);
    net.setAttr("latency", lat);
    net.setAttr("guid", hex(n.guid));
    net.setAttr("maxconn", std::to_string(n.maxConn));
    net.setAttr("gdr", n.gdr ? "1" : "0");
    if (n.coll) net.setAttr("coll", "1");
  }
};

}  // namespace

Status detectSystemXml(const DetectInputs& in, XmlNode* system) {
  XmlNode detected = Detector(in).run();
  if (in.topoFile.empty()) {
    *system = std::move(detected);
    return ncclSuccess;
  }
  // The file is the base: its elements and attributes win, detection adds what it lacks.
  Topology fromFile;
  WEFT_TRY(loadTopologyXml(in.topoFile, &fromFile));
  XmlNode base = fromFile.system;
  fuseSystemXml(&base, detected);
  WEFT_INFO(log::kGraph, "topology: started from %s", in.topoFile.c_str());
  *system = std::move(base);
  return ncclSuccess;
}

Status detectTopology(const DetectInputs& in, Topology* out) {
  XmlNode system;
  WEFT_TRY(detectSystemXml(in, &system));
  return buildTopology(std::move(system), out);
}

Status collectNvmlFacts(DetectInputs* in) {
  if (!runtime::nvmlAvailable()) {
    WEFT_INFO(log::kGraph, "topology detection: NVML unavailable; GPUs are joined by PCIe only");
    return ncclSuccess;
  }
  for (DetectGpu& g : in->gpus) {
    runtime::NvmlGpu info;
    if (isError(runtime::nvmlGpuByBusId(g.busId, &info))) {
      WEFT_INFO(log::kGraph, "topology detection: NVML does not know GPU %s; no NVLinks for it", g.busId.c_str());
      continue;
    }
    if (g.sm == 0) g.sm = info.ccMajor * 10 + info.ccMinor;
    DetectGpuLinks links;
    links.busId = g.busId;
    for (const runtime::NvmlLink& l : info.links) {
      DetectNvLink n;
      n.targetBusId = l.remoteBusId;
      n.count = l.count;
      switch (l.remote) {
        case runtime::NvLinkRemote::NvSwitch: n.targetClass = "0x068000"; break;
        case runtime::NvLinkRemote::Cpu: n.targetClass = "0x068001"; break;
        default: {
          std::string cls;
          std::string path = sysfsPciDevicePath(in->sysfsRoot, canonicalBusId(l.remoteBusId));
          if (!path.empty() && readSysfsFile(path + "/class", &cls) && !cls.empty()) {
            n.targetClass = cls;
          } else if (l.remote == runtime::NvLinkRemote::Gpu) {
            n.targetClass = "0x030200";
          } else {
            // A remote NVML cannot name and sysfs does not show: in VMs that is the NVSwitch fabric.
            n.targetClass = "0x068000";
            WEFT_INFO(log::kGraph, "topology detection: NVLink peer %s of GPU %s unknown; assuming NVSwitch",
                      l.remoteBusId.c_str(), g.busId.c_str());
          }
        }
      }
      links.nvlinks.push_back(n);
    }
    in->links.push_back(std::move(links));
  }
  return ncclSuccess;
}

Status listNvmlGpus(std::vector<DetectGpu>* out) {
  int n = 0;
  WEFT_TRY(runtime::nvmlGpuCount(&n));
  out->clear();
  for (int i = 0; i < n; i++) {
    runtime::NvmlGpu info;
    WEFT_TRY(runtime::nvmlGpuByIndex(i, &info));
    DetectGpu g;
    g.busId = info.busId;
    g.rank = i;
    g.dev = i;
    g.sm = info.ccMajor * 10 + info.ccMinor;
    out->push_back(g);
  }
  return ncclSuccess;
}

std::vector<DetectNet> sysfsNetDevices(const std::string& root) {
  std::vector<DetectNet> out;
  struct stat st;
  // GPU Direct RDMA needs the NVIDIA peer-memory module.
  bool peermem = stat((root + "/module/nvidia_peermem").c_str(), &st) == 0;
  for (const SysfsNet& s : listSysfsNets(root)) {
    DetectNet n;
    n.name = s.name;
    n.pciPath = s.pciPath;
    n.dev = (int)out.size();
    // Unknown speed (virtio reports -1): NCCL's socket transport assumes 10 Gb/s.
    n.speedMbps = s.speedMbps > 0 ? s.speedMbps : 10000;
    n.port = s.port;
    n.guid = s.guid;
    n.gdr = s.infiniband && peermem;
    n.maxConn = s.infiniband ? 131072 : 65536;
    out.push_back(n);
  }
  return out;
}

}  // namespace weft::graph
