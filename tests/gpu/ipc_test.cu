// GPU test of weft's runtime layer and the P2P memory-sharing plumbing. Two processes (forked
// before any CUDA call), rank 0 on GPU 0 and rank 1 on GPU 1 (both on GPU 0 with one GPU):
//   1. IPC: for cuMem (POSIX fd over SCM_RIGHTS) and legacy cudaIpc memory, each rank in turn
//      owns a buffer, the other imports it, checks what the owner wrote, writes a new pattern with
//      a kernel; the owner checks that pattern in its own memory.
//   2. ncclMemAlloc / ncclMemFree through the public API (kind, rounding, peer access, device
//      restore, double free, leak check).
//   3. The facade: device properties, streams, events, host functions, capture status, kernel
//      launch with large dynamic shared memory, mapped pinned memory.
// Prints one PASS / FAIL / SKIP line per check, a summary, and exits non-zero on any failure.
// Run NCCL_CUMEM_ENABLE=0 too: ncclMemAlloc then falls back to cudaMalloc.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/param.h"
#include "nccl.h"
#include "runtime/gpu.h"
#include "runtime/ipc_mem.h"
#include "runtime/mem_alloc.h"
#include "runtime/shareable_alloc.h"
#include "transport/p2p/fd_passing.h"

namespace rt = weft::runtime;
using weft::transport::p2p::Clock;
using weft::transport::p2p::FdEndpoint;

namespace {

constexpr int kTimeoutSeconds = 240;  // whole program; a hang becomes a failure (SIGALRM)

int gRank = -1;
int gPass = 0, gFail = 0, gSkip = 0;

void report(const char* verdict, const char* name, const char* fmt = nullptr, ...) {
  char detail[512] = "";
  if (fmt != nullptr) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof(detail), fmt, args);
    va_end(args);
  }
  printf("[rank %d] %s %s%s%s\n", gRank, verdict, name, detail[0] ? ": " : "", detail);
  fflush(stdout);
  if (!strcmp(verdict, "PASS")) gPass++;
  else if (!strcmp(verdict, "FAIL")) gFail++;
  else gSkip++;
}

// `ok` → PASS, else FAIL with the library's last error text for context.
bool check(bool ok, const char* name, const char* what = "") {
  if (ok) report("PASS", name);
  else report("FAIL", name, "%s%slast error: %s", what, what[0] ? "; " : "", ncclGetLastError(nullptr));
  return ok;
}

// ---- The control channel between the two processes (a socketpair made before fork) ------------

int gCtrl = -1;

bool sendBytes(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = send(gCtrl, p, bytes, MSG_NOSIGNAL);
    if (n <= 0) return false;
    p += n;
    bytes -= (size_t)n;
  }
  return true;
}

bool recvBytes(void* data, size_t bytes, int timeoutMs = 60000) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd pfd{gCtrl, POLLIN, 0};
    if (poll(&pfd, 1, timeoutMs) != 1) {
      printf("[rank %d] control channel: peer silent for %d ms\n", gRank, timeoutMs);
      return false;
    }
    ssize_t n = recv(gCtrl, p, bytes, 0);
    if (n <= 0) {
      printf("[rank %d] control channel: peer process closed it (exited or crashed)\n", gRank);
      return false;
    }
    p += n;
    bytes -= (size_t)n;
  }
  return true;
}

bool barrier() {
  char c = 'b';
  return sendBytes(&c, 1) && recvBytes(&c, 1);
}

// ---- Kernels -----------------------------------------------------------------------------------

__host__ __device__ inline uint32_t pattern(uint32_t seed, size_t i) { return (uint32_t)(i * 2654435761u) ^ seed; }

__global__ void fillPattern(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
    p[i] = pattern(seed, i);
  }
}

__global__ void useSharedMemory(uint32_t* out, int words) {
  extern __shared__ uint32_t smem[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) smem[i] = (uint32_t)i * 3u;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = smem[words - 1];
}

weft::Status fill(void* p, size_t words, uint32_t seed, rt::Stream stream = nullptr) {
  uint32_t* ptr = static_cast<uint32_t*>(p);
  void* args[] = {&ptr, &words, &seed};
  return rt::launchKernel((const void*)fillPattern, dim3(132), dim3(256), args, 0, stream);
}

// Copies `words` from device memory and compares with pattern(seed). Describes the first mismatch.
bool verify(const void* p, size_t words, uint32_t seed, std::string* why) {
  std::vector<uint32_t> host(words);
  if (rt::deviceMemcpy(host.data(), p, words * 4) != ncclSuccess) {
    *why = "copy to host failed";
    return false;
  }
  for (size_t i = 0; i < words; ++i) {
    if (host[i] != pattern(seed, i)) {
      char buf[160];
      snprintf(buf, sizeof(buf), "word %zu of %zu is 0x%08x, expected 0x%08x", i, words, host[i], pattern(seed, i));
      *why = buf;
      return false;
    }
  }
  return true;
}

// ---- 1. IPC between the two processes ----------------------------------------------------------

struct Offer {  // owner → importer
  rt::IpcMemDesc desc;
  int32_t skip;  // the owner could not allocate: both sides skip
  char reason[200];
};
struct Result {  // importer → owner, and owner's verdict back
  int32_t ok;
  char detail[300];
};

constexpr size_t kAllocBytes = (8u << 20) + 12345;  // odd on purpose: cuMem rounds it up
constexpr size_t kRegionOffset = 64 * 1024;           // the exported region starts inside the allocation
constexpr size_t kRegionWords = (1u << 20) / 4 * 3;   // 3 MiB

void ipcCase(FdEndpoint& ep, rt::KindRequest kind, int owner) {
  const int importer = 1 - owner;
  const bool cuMem = kind == rt::KindRequest::kCuMem;
  char name[128];
  snprintf(name, sizeof(name), "ipc %s, owner rank %d -> importer rank %d", cuMem ? "cuMem-fd" : "legacy-cudaIpc",
           owner, importer);
  const uint32_t ownerSeed = 0xA0000000u + (uint32_t)owner, importerSeed = 0x0B000000u + (uint32_t)importer;
  const auto deadline = Clock::now() + std::chrono::seconds(30);

  if (gRank == owner) {
    Offer offer{};
    rt::ShareableAlloc alloc;
    rt::ShareableOptions options;
    options.kind = kind;
    if (rt::allocShareable(kAllocBytes, &alloc, options) != ncclSuccess) {
      offer.skip = 1;
      snprintf(offer.reason, sizeof(offer.reason), "owner could not allocate: %s", ncclGetLastError(nullptr));
      sendBytes(&offer, sizeof(offer));
      report("FAIL", name, "%s", offer.reason);
      return;
    }
    uint32_t* region = reinterpret_cast<uint32_t*>(static_cast<char*>(alloc.ptr()) + kRegionOffset);
    bool ok = fill(region, kRegionWords, ownerSeed) == ncclSuccess && rt::deviceSynchronize() == ncclSuccess &&
              rt::exportMem(alloc, kRegionOffset, kRegionWords * 4, &offer.desc) == ncclSuccess;
    if (!ok) {
      offer.skip = 1;
      snprintf(offer.reason, sizeof(offer.reason), "owner could not fill or export its buffer");
    }
    if (!sendBytes(&offer, sizeof(offer))) return (void)report("FAIL", name, "control channel broken");
    if (!ok) return (void)report("FAIL", name, "%s: %s", offer.reason, ncclGetLastError(nullptr));
    if (cuMem) {
      weft::util::UniqueFd fd;
      if (alloc.exportFd(&fd) != ncclSuccess ||
          ep.sendFd(importer, fd.get(), offer.desc.localId, deadline, nullptr) != ncclSuccess) {
        report("FAIL", name, "exporting or passing the fd failed: %s", ncclGetLastError(nullptr));
        // The importer times out on its recvFd and reports; keep the channel in step.
      }
    }
    Result imported{};
    if (!recvBytes(&imported, sizeof(imported))) return (void)report("FAIL", name, "no answer from the importer");
    std::string why;
    bool written = imported.ok && verify(region, kRegionWords, importerSeed, &why);
    Result verdict{};
    verdict.ok = written;
    snprintf(verdict.detail, sizeof(verdict.detail), "%s", imported.ok ? why.c_str() : imported.detail);
    sendBytes(&verdict, sizeof(verdict));
    // Legacy IPC memory must not be freed while another process has it open: wait for its close.
    char closed = 0;
    if (!recvBytes(&closed, 1)) return (void)report("FAIL", name, "importer did not confirm its unmap");
    if (written) {
      report("PASS", name, "%s, %zu bytes allocated, importer read and wrote %zu bytes at offset %zu",
             rt::memKindName(alloc.kind()), alloc.bytes(), kRegionWords * 4, kRegionOffset);
    } else {
      report("FAIL", name, "%s", verdict.detail);
    }
    return;
  }

  // Importer.
  Offer offer{};
  if (!recvBytes(&offer, sizeof(offer))) return (void)report("FAIL", name, "no offer from the owner");
  if (offer.skip) return;  // the owner reports the failure
  Result r{};
  weft::util::UniqueFd fd;
  rt::ImportedMem mem;
  char from[32];
  snprintf(from, sizeof(from), "rank %d", owner);
  if (cuMem && ep.recvFd(owner, offer.desc.localId, deadline, nullptr, &fd) != ncclSuccess) {
    snprintf(r.detail, sizeof(r.detail), "importer did not receive the fd: %s", ncclGetLastError(nullptr));
  } else if (rt::importMem(offer.desc, fd.get(), &mem, from) != ncclSuccess) {
    snprintf(r.detail, sizeof(r.detail), "importMem failed: %s", ncclGetLastError(nullptr));
  } else {
    fd.reset();  // the mapping holds the memory; the fd is no longer needed
    std::string why;
    if (mem.bytes() != kRegionWords * 4) {
      snprintf(r.detail, sizeof(r.detail), "imported %zu bytes, expected %zu", mem.bytes(), kRegionWords * 4);
    } else if (!verify(mem.ptr(), kRegionWords, ownerSeed, &why)) {
      snprintf(r.detail, sizeof(r.detail), "importer read wrong data: %s", why.c_str());
    } else if (fill(mem.ptr(), kRegionWords, importerSeed) != ncclSuccess || rt::deviceSynchronize() != ncclSuccess) {
      snprintf(r.detail, sizeof(r.detail), "importer's kernel write failed: %s", ncclGetLastError(nullptr));
    } else {
      r.ok = 1;
    }
  }
  sendBytes(&r, sizeof(r));
  Result verdict{};
  if (!recvBytes(&verdict, sizeof(verdict))) return (void)report("FAIL", name, "no verdict from the owner");
  const char* kindName = rt::memKindName(mem.kind());
  mem.reset();  // unmap only after the owner has checked, and before it frees
  char closed = 1;
  sendBytes(&closed, 1);
  if (r.ok && verdict.ok) report("PASS", name, "imported %s, read the owner's data, wrote with a kernel", kindName);
  else report("FAIL", name, "%s", r.ok ? verdict.detail : r.detail);
}

// ---- 2. ncclMemAlloc / ncclMemFree -------------------------------------------------------------

// No leak: 256 MiB in 16 buffers comes back. Each rank on its own GPU (else the ranks' numbers mix).
void memAllocLeakCheck(int nDevices) {
  if (nDevices < 2) {
    report("SKIP", "ncclMemAlloc/ncclMemFree leak check", "both ranks share one GPU");
    return;
  }
  char what[200];
  size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
  (void)rt::deviceSynchronize();
  (void)rt::memGetInfo(&free0, &total);
  std::vector<void*> bufs(16, nullptr);
  bool allOk = true;
  for (void*& b : bufs) allOk = allOk && ncclMemAlloc(&b, 16u << 20) == ncclSuccess;
  (void)rt::memGetInfo(&free1, &total);
  for (void* b : bufs) allOk = allOk && ncclMemFree(b) == ncclSuccess;
  (void)rt::memGetInfo(&free2, &total);
  snprintf(what, sizeof(what), "free MiB before %zu, with 256 MiB allocated %zu, after free %zu", free0 >> 20,
           free1 >> 20, free2 >> 20);
  check(allOk && free1 + (200u << 20) <= free0 && free2 + (16u << 20) >= free0, "ncclMemAlloc/ncclMemFree leak check",
        what);
}

void memAllocChecks(int device, int nDevices) {
  void* p = reinterpret_cast<void*>(0x1);
  check(ncclMemAlloc(&p, 0) == ncclSuccess && p == nullptr, "ncclMemAlloc size 0 gives NULL");
  check(ncclMemAlloc(nullptr, 64) == ncclInvalidArgument, "ncclMemAlloc NULL ptr is ncclInvalidArgument");
  check(ncclMemFree(nullptr) == ncclSuccess, "ncclMemFree(NULL) is a no-op");

  bool cuMemExpected = false;
  (void)rt::cuMemUsable(device, &cuMemExpected);
  p = nullptr;
  if (!check(ncclMemAlloc(&p, 1000) == ncclSuccess && p != nullptr, "ncclMemAlloc 1000 bytes")) return;
  rt::MemAllocInfo info;
  bool found = rt::memAllocFind(p, &info);
  char what[200];
  snprintf(what, sizeof(what), "kind %s, %zu bytes, device %d; expected %s (NCCL_CUMEM_ENABLE=%s)",
           found ? rt::memKindName(info.kind) : "?", found ? info.bytes : 0, found ? info.device : -1,
           cuMemExpected ? "cuMem" : "cudaMalloc", getenv("NCCL_CUMEM_ENABLE") ? getenv("NCCL_CUMEM_ENABLE") : "unset");
  bool kindOk = found && info.device == device && info.bytes >= 1000 &&
                info.kind == (cuMemExpected ? rt::MemKind::kCuMemFd : rt::MemKind::kLegacyCudaIpc) &&
                (!cuMemExpected || info.bytes % 65536 == 0);
  check(kindOk, "ncclMemAlloc registry: kind, device, size rounded to granularity", what);
  printf("[rank %d]   ncclMemAlloc(1000): %s\n", gRank, what);

  std::string why;
  check(fill(p, 250, 0x1234) == ncclSuccess && rt::deviceSynchronize() == ncclSuccess && verify(p, 250, 0x1234, &why),
        "ncclMemAlloc memory is usable", why.c_str());

  // cuMem memory is mapped for every P2P-capable device, without cudaDeviceEnablePeerAccess.
  int other = (device + 1) % nDevices;
  bool can = false;
  if (nDevices < 2 || !cuMemExpected || rt::canAccessPeer(other, device, &can) != ncclSuccess || !can) {
    report("SKIP", "ncclMemAlloc memory written by a peer GPU", "needs 2 P2P-capable GPUs and cuMem");
  } else {
    bool ok = rt::setDevice(other) == ncclSuccess && fill(p, 250, 0x5678) == ncclSuccess &&
              rt::deviceSynchronize() == ncclSuccess && rt::setDevice(device) == ncclSuccess &&
              verify(p, 250, 0x5678, &why);
    check(ok, "ncclMemAlloc memory written by a peer GPU", why.c_str());
  }

  check(ncclMemFree(static_cast<char*>(p) + 8) == ncclInvalidArgument, "ncclMemFree of an interior pointer refused");
  // Free from another current device: freed on its own device, caller's device restored.
  int before = -1, after = -1;
  (void)rt::setDevice(other);
  (void)rt::getDevice(&before);
  bool freed = ncclMemFree(p) == ncclSuccess;
  (void)rt::getDevice(&after);
  (void)rt::setDevice(device);
  check(freed && after == before, "ncclMemFree from another device restores the current device");
  check(ncclMemFree(p) == ncclInvalidArgument, "ncclMemFree twice is ncclInvalidArgument");

}

// ---- 3. The facade -----------------------------------------------------------------------------

void CUDART_CB setFlag(void* arg) { static_cast<std::atomic<int>*>(arg)->store(1); }

void facadeChecks(int device, int nDevices) {
  rt::DeviceProps props;
  if (check(rt::deviceProps(device, &props) == ncclSuccess, "deviceProps")) {
    unsigned dom, bus, dev;
    char tail[8] = "";
    bool shape = sscanf(props.busId, "%4x:%2x:%2x.%1s", &dom, &bus, &dev, tail) == 4 && strlen(props.busId) == 12;
    for (const char* c = props.busId; *c; ++c) shape = shape && !(*c >= 'A' && *c <= 'F');
    char what[400];
    snprintf(what, sizeof(what), "busId '%s', %s, %d SMs, sm_%d%d", props.busId, props.name, props.smCount,
             props.ccMajor, props.ccMinor);
    check(shape && props.smCount > 0 && props.ccMajor >= 7, "device properties look right", what);
    printf("[rank %d]   %s\n", gRank, what);
  }
  if (nDevices >= 2) {
    int other = (device + 1) % nDevices;
    bool can = false;
    if (rt::canAccessPeer(device, other, &can) == ncclSuccess && can) {
      check(rt::enablePeerAccess(other) == ncclSuccess && rt::enablePeerAccess(other) == ncclSuccess,
            "enablePeerAccess twice (already enabled is success)");
    } else {
      report("SKIP", "enablePeerAccess", "GPUs %d and %d have no P2P access", device, other);
    }
  }

  int least = 0, greatest = 0;
  rt::OwnedStream s1, s2;
  rt::OwnedEvent ev;
  bool ok = rt::streamPriorityRange(&least, &greatest) == ncclSuccess &&
            rt::streamCreate(s1.out(), greatest) == ncclSuccess && rt::streamCreate(s2.out()) == ncclSuccess &&
            rt::eventCreate(ev.out()) == ncclSuccess;
  if (!check(ok, "stream (with priority) and event creation")) return;

  rt::DeviceBuffer buf;
  std::atomic<int> flag{0};
  std::string why;
  ok = rt::deviceMalloc(buf.out(), 1 << 20) == ncclSuccess &&
       rt::deviceMemsetAsync(buf.get(), 0, 1 << 20, s1.get()) == ncclSuccess &&
       fill(buf.get(), 1 << 18, 0x77, s1.get()) == ncclSuccess && rt::eventRecord(ev.get(), s1.get()) == ncclSuccess &&
       rt::streamWaitEvent(s2.get(), ev.get()) == ncclSuccess &&
       rt::launchHostFunc(s2.get(), setFlag, &flag) == ncclSuccess && rt::streamSynchronize(s2.get()) == ncclSuccess;
  bool done1 = false, done2 = false;
  ok = ok && rt::eventSynchronize(ev.get()) == ncclSuccess && rt::eventQuery(ev.get(), &done1) == ncclSuccess &&
       rt::streamQuery(s1.get(), &done2) == ncclSuccess;
  check(ok && flag.load() == 1 && done1 && done2 && verify(buf.get(), 1 << 18, 0x77, &why),
        "streams, events, stream-wait-event, host function", why.c_str());

  rt::CaptureInfo info;
  ok = rt::streamCaptureInfo(s1.get(), &info) == ncclSuccess && info.status == rt::CaptureStatus::kNone;
  cudaGraph_t graph = nullptr;
  rt::CaptureInfo during;
  ok = ok && cudaStreamBeginCapture(s1.get(), cudaStreamCaptureModeRelaxed) == cudaSuccess &&
       rt::streamCaptureInfo(s1.get(), &during) == ncclSuccess &&
       fill(buf.get(), 16, 0x99, s1.get()) == ncclSuccess &&
       cudaStreamEndCapture(s1.get(), &graph) == cudaSuccess;
  if (graph != nullptr) cudaGraphDestroy(graph);
  check(ok && during.status == rt::CaptureStatus::kActive && during.graphId != 0, "stream capture status");

  constexpr int kSmemBytes = 150 * 1024;  // beyond the 48 KiB default; H100/H200 allow 227 KiB
  uint32_t* out = static_cast<uint32_t*>(buf.get());
  int words = kSmemBytes / 4;
  void* args[] = {&out, &words};
  uint32_t value = 0;
  ok = rt::funcSetMaxDynamicSmem((const void*)useSharedMemory, kSmemBytes) == ncclSuccess &&
       rt::launchKernel((const void*)useSharedMemory, dim3(1), dim3(256), args, kSmemBytes, s1.get()) == ncclSuccess &&
       rt::streamSynchronize(s1.get()) == ncclSuccess && rt::deviceMemcpy(&value, out, 4) == ncclSuccess;
  check(ok && value == (uint32_t)(words - 1) * 3u, "kernel launch with 150 KiB dynamic shared memory");

  rt::PinnedBuffer host;
  void* devView = nullptr;
  ok = rt::hostAllocMapped(host.out(), 4096) == ncclSuccess && rt::hostDevicePointer(host.get(), &devView) == ncclSuccess &&
       fill(devView, 1024, 0x42) == ncclSuccess && rt::deviceSynchronize() == ncclSuccess;
  bool hostOk = ok;
  for (size_t i = 0; hostOk && i < 1024; ++i) hostOk = static_cast<uint32_t*>(host.get())[i] == pattern(0x42, i);
  check(hostOk, "kernel writes mapped pinned host memory");

  int owner = -1;
  int onStack = 0;
  check(rt::pointerDevice(buf.get(), &owner) == ncclSuccess && owner == device &&
            rt::pointerDevice(&onStack, &owner) == ncclInvalidArgument,
        "pointerDevice");
}

int runRank(uint64_t jobKey) {
  int n = 0;
  if (rt::deviceCount(&n) != ncclSuccess || n < 1) {
    report("FAIL", "a GPU is visible", "%s", ncclGetLastError(nullptr));
    return 1;
  }
  const int device = gRank % n;
  if (rt::setDevice(device) != ncclSuccess) {
    report("FAIL", "setDevice", "%s", ncclGetLastError(nullptr));
    return 1;
  }
  printf("[rank %d] pid %d on device %d of %d%s\n", gRank, (int)getpid(), device, n,
         n == 1 ? " (one GPU: both ranks share it)" : "");

  std::unique_ptr<FdEndpoint> ep;
  if (FdEndpoint::create(jobKey, gRank, weft::transport::p2p::fdSocketDirFromEnv(), &ep) != ncclSuccess) {
    report("FAIL", "fd endpoint", "%s", ncclGetLastError(nullptr));
    return 1;
  }
  if (!barrier()) {  // after it, both endpoints exist
    report("FAIL", "barrier after endpoint creation");
    return 1;
  }

  for (rt::KindRequest kind : {rt::KindRequest::kCuMem, rt::KindRequest::kLegacy}) {
    for (int owner = 0; owner < 2; ++owner) {
      ipcCase(*ep, kind, owner);
      if (!barrier()) {
        report("FAIL", "barrier between IPC cases");
        return 1;
      }
    }
  }
  // Memory accounting first and in step: later checks create contexts on the other GPU.
  memAllocLeakCheck(n);
  barrier();
  memAllocChecks(device, n);
  facadeChecks(device, n);
  barrier();  // keep the endpoints up until both ranks are done
  return gFail;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  alarm(kTimeoutSeconds);  // a hang becomes SIGALRM; fork clears alarms, so the child sets its own
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    perror("socketpair");
    return 2;
  }
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t jobKey = rng();
  // fork before any CUDA call: a CUDA context does not survive fork.
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 2;
  }
  if (child == 0) {
    alarm(kTimeoutSeconds);
    gRank = 1;
    gCtrl = pair[1];
    close(pair[0]);
    int failures = runRank(jobKey);
    printf("[rank 1] %d passed, %d failed, %d skipped\n", gPass, gFail, gSkip);
    fflush(stdout);
    _exit(failures > 100 ? 100 : failures);
  }
  gRank = 0;
  gCtrl = pair[0];
  close(pair[1]);
  int failures = runRank(jobKey);
  printf("[rank 0] %d passed, %d failed, %d skipped\n", gPass, gFail, gSkip);
  close(gCtrl);  // unblocks a child still waiting on the channel
  int status = 0;
  waitpid(child, &status, 0);
  int childFailures = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!WIFEXITED(status)) {
    printf("FAIL rank 1 died: %s\n", WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "unknown");
  }
  bool pass = failures == 0 && childFailures == 0;
  printf("%s: weft_gpu_ipc_test (rank 0: %d failures, rank 1: %s)\n", pass ? "ALL PASS" : "FAILED", failures,
         childFailures < 0 ? "died" : std::to_string(childFailures).c_str());
  return pass ? 0 : 1;
}
