// The runtime facade on a machine without a GPU or driver (CI): every call fails cleanly with a
// message that says why, nothing crashes, and the GPU-free parts (argument checks, descriptor
// validation) still work. On a GPU machine the tests that need "no GPU" skip themselves.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/log.h"
#include "nccl.h"
#include "runtime/gpu.h"
#include "runtime/ipc_mem.h"
#include "runtime/mem_alloc.h"
#include "runtime/shareable_alloc.h"

namespace weft::runtime {
namespace {

bool haveGpu() {
  int n = 0;
  return deviceCount(&n) == ncclSuccess && n > 0;
}

std::string lastError() { return log::lastErrorOfThread(); }

class RuntimeNoGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (haveGpu()) GTEST_SKIP() << "a GPU is present; these tests check behaviour without one";
    log::clearLastError();
  }
};

TEST_F(RuntimeNoGpu, DeviceCountIsAClearError) {
  int n = 12345;
  EXPECT_EQ(deviceCount(&n), ncclUnhandledCudaError);
  EXPECT_EQ(n, 12345) << "outputs are set only on success";
  std::string msg = lastError();
  EXPECT_NE(msg.find("cudaGetDeviceCount"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaError"), std::string::npos) << "names the CUDA error: " << msg;
  // This machine has no driver: the message must say so and suggest a check.
  EXPECT_NE(msg.find("driver"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nvidia-smi"), std::string::npos) << msg;
}

TEST_F(RuntimeNoGpu, ErrorIsNotLeftBehind) {
  int n = 0;
  EXPECT_NE(deviceCount(&n), ncclSuccess);
  // The macro cleared the runtime's last error, so the next plain query sees only its own result.
  int v = -1;
  EXPECT_EQ(runtimeVersion(&v), ncclSuccess);
  EXPECT_GE(v, 12000);
}

TEST_F(RuntimeNoGpu, DeviceCallsFailWithoutCrashing) {
  int d = -1;
  EXPECT_EQ(setDevice(0), ncclUnhandledCudaError);
  EXPECT_NE(lastError().find("cudaSetDevice"), std::string::npos) << lastError();
  EXPECT_EQ(getDevice(&d), ncclUnhandledCudaError);
  DeviceProps props;
  EXPECT_EQ(deviceProps(0, &props), ncclUnhandledCudaError);
  bool can = true;
  EXPECT_EQ(canAccessPeer(0, 1, &can), ncclUnhandledCudaError);
  Stream s = nullptr;
  EXPECT_EQ(streamCreate(&s), ncclUnhandledCudaError);
  Event e = nullptr;
  EXPECT_EQ(eventCreate(&e), ncclUnhandledCudaError);
  void* p = nullptr;
  EXPECT_EQ(deviceMalloc(&p, 1024), ncclUnhandledCudaError);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(hostAllocMapped(&p, 1024), ncclUnhandledCudaError);
  int drv = -1;
  EXPECT_EQ(driverVersion(&drv), ncclSuccess);
  EXPECT_EQ(drv, 0) << "no driver installed";
}

TEST_F(RuntimeNoGpu, ScopedDeviceFailsCleanly) {
  ScopedDevice guard;
  EXPECT_EQ(guard.set(0), ncclUnhandledCudaError);
}  // the destructor must not try to restore anything (and must not crash)

TEST_F(RuntimeNoGpu, ShareableAllocFails) {
  ShareableAlloc a;
  EXPECT_EQ(allocShareable(1 << 20, &a), ncclUnhandledCudaError);
  EXPECT_FALSE(a.valid());
  ShareableOptions cuMemOnly;
  cuMemOnly.kind = KindRequest::kCuMem;
  EXPECT_NE(allocShareable(1 << 20, &a, cuMemOnly), ncclSuccess);
  EXPECT_FALSE(a.valid());
}

TEST_F(RuntimeNoGpu, CuMemUsableExplainsMissingDriverApi) {
  bool usable = true;
  Status s = cuMemUsable(0, &usable);
  EXPECT_EQ(s, ncclUnhandledCudaError);
  EXPECT_FALSE(usable);
  std::string msg = lastError();
  EXPECT_NE(msg.find("driver API is unavailable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaErrorInsufficientDriver"), std::string::npos) << msg;
}

TEST_F(RuntimeNoGpu, MemAllocPublicApi) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(ncclMemAlloc(nullptr, 64), ncclInvalidArgument);
  EXPECT_EQ(ncclMemAlloc(&p, 0), ncclSuccess);
  EXPECT_EQ(p, nullptr) << "size 0 gives NULL";
  p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(ncclMemAlloc(&p, 4096), ncclUnhandledCudaError);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1)) << "ptr untouched on failure";
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
  int local = 0;
  EXPECT_EQ(ncclMemFree(&local), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not a pointer returned by ncclMemAlloc"),
            std::string::npos)
      << ncclGetLastError(nullptr);
  MemAllocInfo info;
  EXPECT_FALSE(memAllocFind(&local, &info));
}

// ---- Descriptor checks: pure, run everywhere ---------------------------------------------------

IpcMemDesc goodDesc() {
  IpcMemDesc d;
  std::memset(&d, 0, sizeof(d));
  d.magic = kIpcMemDescMagic;
  d.kind = (uint32_t)MemKind::kCuMemFd;
  d.allocBytes = 2 << 20;
  d.offset = 4096;
  d.bytes = (2 << 20) - 4096;
  d.ownerPid = 1234;
  d.ownerDevice = 1;
  d.localId = 7;
  return d;
}

TEST(IpcMemDesc, AcceptsAConsistentDescriptor) {
  EXPECT_EQ(checkIpcMemDesc(goodDesc(), "rank 1"), ncclSuccess);
  IpcMemDesc legacy = goodDesc();
  legacy.kind = (uint32_t)MemKind::kLegacyCudaIpc;
  EXPECT_EQ(checkIpcMemDesc(legacy, "rank 1"), ncclSuccess);
}

TEST(IpcMemDesc, RejectsGarbage) {
  struct Case {
    const char* what;
    void (*spoil)(IpcMemDesc*);
  } cases[] = {
      {"magic", [](IpcMemDesc* d) { d->magic ^= 1; }},
      {"kind", [](IpcMemDesc* d) { d->kind = 9; }},
      {"kind none", [](IpcMemDesc* d) { d->kind = 0; }},
      {"empty", [](IpcMemDesc* d) { d->allocBytes = 0; d->offset = 0; d->bytes = 0; }},
      {"huge", [](IpcMemDesc* d) { d->allocBytes = ~0ull; }},
      {"offset", [](IpcMemDesc* d) { d->offset = d->allocBytes + 1; }},
      {"bytes", [](IpcMemDesc* d) { d->bytes = d->allocBytes - d->offset + 1; }},
      {"wrap", [](IpcMemDesc* d) { d->offset = 8; d->bytes = ~0ull - 4; }},
      {"pid", [](IpcMemDesc* d) { d->ownerPid = 0; }},
      {"device", [](IpcMemDesc* d) { d->ownerDevice = -1; }},
  };
  for (const Case& c : cases) {
    IpcMemDesc d = goodDesc();
    c.spoil(&d);
    log::clearLastError();
    EXPECT_EQ(checkIpcMemDesc(d, "rank 5"), ncclInternalError) << c.what;
    EXPECT_NE(lastError().find("rank 5"), std::string::npos) << c.what << ": names the peer: " << lastError();
  }
}

TEST(IpcMemDesc, ImportRejectsBadInputBeforeTouchingTheGpu) {
  ImportedMem m;
  IpcMemDesc d = goodDesc();
  d.magic = 0;
  EXPECT_EQ(importMem(d, -1, &m, "rank 2"), ncclInternalError);
  EXPECT_FALSE(m.valid());
  // cuMem memory cannot be imported without the owner's fd.
  EXPECT_EQ(importMem(goodDesc(), -1, &m, "rank 2"), ncclInvalidArgument);
  EXPECT_NE(lastError().find("file descriptor"), std::string::npos) << lastError();
}

TEST(IpcMemDesc, ExportRequiresAnAllocation) {
  ShareableAlloc empty;
  IpcMemDesc d;
  EXPECT_EQ(exportMem(empty, 0, 0, &d), ncclInvalidArgument);
  util::UniqueFd fd;
  EXPECT_NE(empty.exportFd(&fd), ncclSuccess);
  EXPECT_FALSE(fd.valid());
}

}  // namespace
}  // namespace weft::runtime
