// Buffers a collective must refuse, and buffers it must take (user-pains matrix row 22), on real
// GPUs. Each scenario runs in a child process of its own (a library that lets a bad pointer reach
// a kernel kills the CUDA context) on a communicator of -n ranks made by one thread (ncclCommInitRank
// in a group; rank r on GPU r % GPUs; ranks sharing a GPU need weft's NCCL_WEFT_ALLOW_GPU_SHARING=1,
// which the test sets; NCCL refuses them).
//   refused: rank 0 passes the bad buffer, the others good ones, all in one group. The call
//   returns ncclInvalidArgument with a last error that names the cause, nothing is launched, and
//   the communicator still works (a checked all_reduce follows):
//     host-send       sendbuff from malloc          host-recv     recvbuff from malloc
//     freed-send      sendbuff cudaFree'd before the call
//     short-recv      recvbuff one float shorter than count floats
//     past-end        broadcast from a pointer 100 floats before the end of its allocation
//     overlap         all_reduce with recvbuff = sendbuff + 16 floats in one allocation
//     overlap-a2a     all_to_all with overlapping buffers
//     huge-count      all_gather with a count no allocation can hold
//     capture-broken  every rank's stream is being captured into a CUDA graph, and an operation not
//                     allowed while capturing (cudaMalloc in global mode) has invalidated the
//                     capture: the call returns ncclInvalidUsage saying so (NCCL: a CUDA error)
//   taken: every rank passes such memory; the call succeeds and the result is right:
//     in-place        all_gather with sendbuff == recvbuff + rank * count
//     pinned-host     cudaHostAlloc buffers        managed      cudaMallocManaged buffers
//     pool            cudaMallocAsync buffers
//     vmm-span        a buffer across two cuMem chunks mapped back to back (PyTorch's expandable
//                     segments do this)
//     graph-alloc     inside a CUDA graph capture, an all_reduce on memory cudaMallocAsync'd in
//                     the same capture (the driver does not know it until the graph runs)
//   weft_gpu_misuse_test [-n ranks (1)] [--observe] [--only scenario]
// --observe prints what the library does without judging: with another libnccl.so.2 first on
// LD_LIBRARY_PATH it shows what NCCL does with the same calls (give it one GPU per rank).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "nccl.h"
#include "one_thread_ranks.h"

namespace {

constexpr size_t kCount = 1 << 16;  // floats per buffer
constexpr size_t kSlack = 64;       // floats past what a call needs in the refused scenarios' buffers
constexpr int kChildAlarmSeconds = 60;

struct Outcome {
  ncclResult_t call = ncclSuccess;
  cudaError_t sync = cudaSuccess;
  int dataOk = -1;  // -1: nothing to check
};

float value(size_t i, float shift) { return (float)(i % 97) + shift; }

void fill(float* host, size_t n, float shift) {
  for (size_t i = 0; i < n; ++i) host[i] = value(i, shift);
}

bool same(const float* got, size_t n, float shift, float scale = 1) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != scale * value(i, shift)) {
      fprintf(stderr, "element %zu: %g, expected %g\n", i, got[i], scale * value(i, shift));
      return false;
    }
  }
  return true;
}

float* deviceFilled(const Rank& r, size_t n, float shift) {
  std::vector<float> host(n);
  fill(host.data(), n, shift);
  CUDA_OK(cudaSetDevice(r.device));
  float* d = nullptr;
  CUDA_OK(cudaMalloc(&d, n * sizeof(float)));
  CUDA_OK(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

bool deviceHolds(const Rank& r, const float* d, size_t n, float shift, float scale = 1) {
  std::vector<float> host(n);
  CUDA_OK(cudaSetDevice(r.device));
  CUDA_OK(cudaMemcpy(host.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return same(host.data(), n, shift, scale);
}

// One call per rank in one group; the first error of a call, else the group's result.
ncclResult_t grouped(std::vector<Rank>& ranks, const std::function<ncclResult_t(int)>& call) {
  ncclResult_t first = ncclGroupStart();
  for (int r = 0; r < (int)ranks.size(); ++r) {
    ncclResult_t e = call(r);
    if (first == ncclSuccess) first = e;
  }
  ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

cudaError_t syncAll(std::vector<Rank>& ranks) {
  cudaError_t first = cudaSuccess;
  for (Rank& r : ranks) {
    cudaSetDevice(r.device);
    cudaError_t e = cudaStreamSynchronize(r.stream);
    if (first == cudaSuccess) first = e;
  }
  return first;
}

// Calls that must be refused: rank 0 passes the bad buffer.
Outcome refusedCall(const std::string& name, std::vector<Rank>& ranks) {
  const int n = (int)ranks.size();
  std::vector<float*> send(n), recv(n);
  const size_t floats = kCount * n + kSlack;  // every call below fits, unless rank 0's buffer is changed
  std::vector<float> hostBuf(floats);
  for (int r = 0; r < n; ++r) {
    send[r] = deviceFilled(ranks[r], floats, 0);
    recv[r] = deviceFilled(ranks[r], floats, 0);
  }
  Outcome o;
  auto allReduce = [&](int r) {
    return ncclAllReduce(send[r], recv[r], kCount, ncclFloat, ncclSum, ranks[r].comm, ranks[r].stream);
  };
  if (name == "host-send") {
    send[0] = hostBuf.data();
    o.call = grouped(ranks, allReduce);
  } else if (name == "host-recv") {
    recv[0] = hostBuf.data();
    o.call = grouped(ranks, allReduce);
  } else if (name == "freed-send") {
    CUDA_OK(cudaSetDevice(ranks[0].device));
    CUDA_OK(cudaFree(send[0]));  // nothing is allocated after it: the address stays unmapped
    o.call = grouped(ranks, allReduce);
  } else if (name == "short-recv") {
    CUDA_OK(cudaSetDevice(ranks[0].device));
    CUDA_OK(cudaMalloc(&recv[0], (kCount - 1) * sizeof(float)));
    o.call = grouped(ranks, allReduce);
  } else if (name == "past-end") {
    send[0] += floats - 100;
    o.call = grouped(ranks, [&](int r) {
      return ncclBroadcast(send[r], recv[r], kCount, ncclFloat, 0, ranks[r].comm, ranks[r].stream);
    });
  } else if (name == "overlap") {
    recv[0] = send[0] + 16;
    o.call = grouped(ranks, allReduce);
  } else if (name == "overlap-a2a") {
    recv[0] = send[0] + 16;
    o.call = grouped(ranks, [&](int r) {
      return ncclAlltoAll(send[r], recv[r], kCount / n, ncclFloat, ranks[r].comm, ranks[r].stream);
    });
  } else if (name == "capture-broken") {
    for (Rank& r : ranks) {
      CUDA_OK(cudaSetDevice(r.device));
      CUDA_OK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeGlobal));
      void* p = nullptr;
      if (cudaMalloc(&p, 1024) == cudaSuccess) cudaFree(p);  // refused while capturing: the capture ends invalid
    }
    cudaGetLastError();
    o.call = grouped(ranks, allReduce);
    for (Rank& r : ranks) {
      cudaGraph_t graph = nullptr;
      CUDA_OK(cudaSetDevice(r.device));
      if (cudaStreamEndCapture(r.stream, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    }
    cudaGetLastError();
  } else if (name == "huge-count") {
    o.call = grouped(ranks, [&](int r) {
      return ncclAllGather(send[r], recv[r], SIZE_MAX / 64 / n, ncclFloat, ranks[r].comm, ranks[r].stream);
    });
  }
  o.sync = syncAll(ranks);
  return o;
}

// A buffer across two separately created cuMem chunks of `device` mapped back to back.
float* twoChunkBuffer(int device, size_t* granularity) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t gran = 0;
  if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) exit(3);
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle chunk[2];
  if (cuMemAddressReserve(&va, 2 * gran, 0, 0, 0) != CUDA_SUCCESS) exit(3);
  for (int i = 0; i < 2; ++i) {
    if (cuMemCreate(&chunk[i], gran, &prop, 0) != CUDA_SUCCESS) exit(3);
    if (cuMemMap(va + i * gran, gran, 0, chunk[i], 0) != CUDA_SUCCESS) exit(3);
  }
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (cuMemSetAccess(va, 2 * gran, &access, 1) != CUDA_SUCCESS) exit(3);
  *granularity = gran;
  return (float*)va;
}

// Calls that must be taken and give the right result (all_reduce sums: n times the input).
Outcome takenCall(const std::string& name, std::vector<Rank>& ranks) {
  const int n = (int)ranks.size();
  std::vector<float*> send(n), recv(n);
  std::vector<float> host(kCount);
  Outcome o;
  auto allReduce = [&](int r) {
    return ncclAllReduce(send[r], recv[r], kCount, ncclFloat, ncclSum, ranks[r].comm, ranks[r].stream);
  };
  if (name == "in-place") {
    for (int r = 0; r < n; ++r) {
      recv[r] = deviceFilled(ranks[r], kCount * n, 0);
      CUDA_OK(cudaMemset(recv[r], 0, kCount * n * sizeof(float)));
      fill(host.data(), kCount, (float)r);
      send[r] = recv[r] + r * kCount;
      CUDA_OK(cudaMemcpy(send[r], host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
    }
    o.call = grouped(ranks, [&](int r) {
      return ncclAllGather(send[r], recv[r], kCount, ncclFloat, ranks[r].comm, ranks[r].stream);
    });
    o.sync = syncAll(ranks);
    o.dataOk = 1;
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < n; ++j) o.dataOk &= deviceHolds(ranks[r], recv[r] + j * kCount, kCount, (float)j);
    return o;
  }
  if (name == "pinned-host" || name == "managed") {
    for (int r = 0; r < n; ++r) {
      CUDA_OK(cudaSetDevice(ranks[r].device));
      if (name == "managed") {
        CUDA_OK(cudaMallocManaged(&send[r], kCount * sizeof(float)));
        CUDA_OK(cudaMallocManaged(&recv[r], kCount * sizeof(float)));
      } else {
        CUDA_OK(cudaHostAlloc(&send[r], kCount * sizeof(float), cudaHostAllocMapped | cudaHostAllocPortable));
        CUDA_OK(cudaHostAlloc(&recv[r], kCount * sizeof(float), cudaHostAllocMapped | cudaHostAllocPortable));
      }
      fill(send[r], kCount, 2);
      memset(recv[r], 0, kCount * sizeof(float));
    }
    o.call = grouped(ranks, allReduce);
    o.sync = syncAll(ranks);
    o.dataOk = 1;
    for (int r = 0; r < n; ++r) o.dataOk &= same(recv[r], kCount, 2, (float)n);
    return o;
  }
  if (name == "pool" || name == "vmm-span") {
    fill(host.data(), kCount, 3);
    for (int r = 0; r < n; ++r) {
      CUDA_OK(cudaSetDevice(ranks[r].device));
      if (name == "pool") {
        CUDA_OK(cudaMallocAsync(&send[r], kCount * sizeof(float), ranks[r].stream));
        CUDA_OK(cudaMallocAsync(&recv[r], kCount * sizeof(float), ranks[r].stream));
        CUDA_OK(cudaStreamSynchronize(ranks[r].stream));
      } else {
        size_t gran = 0;
        send[r] = twoChunkBuffer(ranks[r].device, &gran) + gran / sizeof(float) - kCount / 2;  // half in each
        recv[r] = deviceFilled(ranks[r], kCount, 0);
      }
      CUDA_OK(cudaMemcpy(send[r], host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
    }
    o.call = grouped(ranks, allReduce);
    o.sync = syncAll(ranks);
    o.dataOk = 1;
    for (int r = 0; r < n; ++r) o.dataOk &= deviceHolds(ranks[r], recv[r], kCount, 3, (float)n);
    return o;
  }
  // graph-alloc: every rank captures its stream; the all_reduce reads a graph allocation.
  std::vector<float*> src(n);
  std::vector<cudaGraph_t> graphs(n);
  for (int r = 0; r < n; ++r) {  // no cudaMalloc once a global-mode capture has begun
    src[r] = deviceFilled(ranks[r], kCount, 5);
    recv[r] = deviceFilled(ranks[r], kCount, 0);
  }
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaStreamBeginCapture(ranks[r].stream, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMallocAsync(&send[r], kCount * sizeof(float), ranks[r].stream));
    CUDA_OK(cudaMemcpyAsync(send[r], src[r], kCount * sizeof(float), cudaMemcpyDeviceToDevice, ranks[r].stream));
  }
  o.call = grouped(ranks, allReduce);
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaFreeAsync(send[r], ranks[r].stream));
    CUDA_OK(cudaStreamEndCapture(ranks[r].stream, &graphs[r]));
  }
  if (o.call != ncclSuccess) return o;
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graphs[r], 0));
    CUDA_OK(cudaGraphLaunch(exec, ranks[r].stream));
  }
  o.sync = syncAll(ranks);
  o.dataOk = 1;
  for (int r = 0; r < n; ++r) o.dataOk &= deviceHolds(ranks[r], recv[r], kCount, 5, (float)n);
  return o;
}

const std::vector<std::string> kRefused = {"host-send", "host-recv",   "freed-send", "short-recv",    "past-end",
                                           "overlap",   "overlap-a2a", "huge-count", "capture-broken"};
const std::vector<std::string> kTaken = {"in-place", "pinned-host", "managed", "pool", "vmm-span", "graph-alloc"};

// What rank 0's last error must say for each refusal.
const char* expectedText(const std::string& name) {
  if (name == "host-send" || name == "host-recv" || name == "freed-send") return "not memory the GPU can reach";
  if (name == "short-recv" || name == "past-end" || name == "huge-count") return "leaves room for";
  if (name == "capture-broken") return "capture of stream";
  return "overlap";
}

bool isRefusal(const std::string& name) {
  for (const std::string& n : kRefused)
    if (n == name) return true;
  return false;
}

// One scenario, in a child process: prints its row; exit 0 when it passed (observe: when it ran).
int runScenario(const std::string& name, int nranks, int gpus, bool observe) {
  alarm(kChildAlarmSeconds);
  std::vector<Rank> ranks(nranks);
  if (!makeOneThreadRanks(ranks, gpus)) return 3;
  const bool refusal = isRefusal(name);
  Outcome o = refusal ? refusedCall(name, ranks) : takenCall(name, ranks);
  const std::string last = ncclGetLastError(ranks[0].comm);
  // The communicator must still work.
  std::vector<float*> a(nranks), b(nranks);
  for (int r = 0; r < nranks; ++r) {
    a[r] = deviceFilled(ranks[r], kCount, 7);
    b[r] = deviceFilled(ranks[r], kCount, 0);
  }
  ncclResult_t afterCall = grouped(ranks, [&](int r) {
    return ncclAllReduce(a[r], b[r], kCount, ncclFloat, ncclSum, ranks[r].comm, ranks[r].stream);
  });
  bool afterOk = afterCall == ncclSuccess && syncAll(ranks) == cudaSuccess;
  for (int r = 0; afterOk && r < nranks; ++r) afterOk = deviceHolds(ranks[r], b[r], kCount, 7, (float)nranks);
  bool pass;
  if (refusal) {
    const ncclResult_t want = name == "capture-broken" ? ncclInvalidUsage : ncclInvalidArgument;
    pass = o.call == want && o.sync == cudaSuccess && last.find(expectedText(name)) != std::string::npos;
  } else {
    pass = o.call == ncclSuccess && o.sync == cudaSuccess && o.dataOk == 1;
  }
  pass = pass && afterOk;
  printf("%-12s %-7s call=%-22s sync=%-28s data=%-5s after=%-6s %s | %s\n", name.c_str(),
         refusal ? "refuse" : "take", ncclGetErrorString(o.call), cudaGetErrorName(o.sync),
         o.dataOk < 0 ? "-" : (o.dataOk ? "ok" : "WRONG"), afterOk ? "ok" : "FAILED",
         observe ? "" : (pass ? "PASS" : "FAIL"), last.c_str());
  fflush(stdout);
  if (afterOk)
    for (Rank& r : ranks) ncclCommDestroy(r.comm);
  return observe || pass ? 0 : 1;
}

int gpuCount() {
  // In a child: the parent stays without a CUDA context, so that its children may fork cleanly.
  int fds[2];
  if (pipe(fds) != 0) return 0;
  pid_t child = fork();
  if (child == 0) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    if (write(fds[1], &count, sizeof(count)) != (ssize_t)sizeof(count)) _exit(1);
    _exit(0);
  }
  int count = 0;
  if (read(fds[0], &count, sizeof(count)) != (ssize_t)sizeof(count)) count = 0;
  waitpid(child, nullptr, 0);
  close(fds[0]);
  close(fds[1]);
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  bool observe = false;
  int nranks = 1;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--observe")) observe = true;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) nranks = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-n ranks] [--observe] [--only scenario]\n", argv[0]);
      return 2;
    }
  }
  const int gpus = gpuCount();
  if (gpus == 0 || nranks < 1) {
    fprintf(stderr, "misuse test: %s\n", gpus == 0 ? "no GPU visible" : "-n must be at least 1");
    return 2;
  }
  if (nranks > gpus) setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 1);
  int version = 0;
  ncclGetVersion(&version);
  printf("misuse test, library version %d, %d ranks on %d GPUs%s\n", version, nranks, gpus,
         observe ? " (observe: not judged)" : "");
  std::vector<std::string> all = kRefused;
  all.insert(all.end(), kTaken.begin(), kTaken.end());
  int failed = 0, ran = 0;
  for (const std::string& name : all) {
    if (!only.empty() && only != name) continue;
    ++ran;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) _exit(runScenario(name, nranks, gpus, observe));
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) {
      printf("%-12s died of signal %d (%s)%s\n", name.c_str(), WTERMSIG(status),
             WTERMSIG(status) == SIGALRM ? "hang" : strsignal(WTERMSIG(status)), observe ? "" : " FAIL");
    } else if (WEXITSTATUS(status) == 3) {
      printf("%-12s setup failed (exit 3)%s\n", name.c_str(), observe ? "" : " FAIL");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (ran == 0) {
    fprintf(stderr, "no scenario named '%s'\n", only.c_str());
    return 2;
  }
  printf("%d of %d scenarios %s\n", ran - failed, ran, observe ? "ran to the end" : "passed");
  return failed == 0 ? 0 : 1;
}
