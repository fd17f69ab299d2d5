// What a kernel launch costs before it moves any data: per-launch time of small kernels that each
// add one thing a weft kernel does (a 3.4 KB parameter block, copying items from it to shared
// memory, a stack frame, a host-memory read or write, a system fence, a cross-block arrival
// counter), launched back to back on a stream and as nodes of a CUDA graph. The differences say
// which of them a latency-bound collective pays for. Then the host side: what the runtime calls
// of an enqueue path cost per call (wall clock, calls back to back), and driver launches
// (cuLaunchKernelEx) passing only a prefix of the parameter block. One H200 (session 20): the
// runtime's PDL launch 3.94 us per call, the driver's 3.57-3.75 whatever the prefix (2704, 1024,
// 640 or 128 bytes), GPU time per launch alike; inside weft's enqueue path the driver launch made
// no difference that the machine's noise (+-1 us per call) let through. Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/launch_floor tools/launch_floor.cu -lcuda && /tmp/launch_floor
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

struct Item { unsigned long long w[12]; };  // 96 bytes, as DevWork
struct BigArgs {                               // as DevKernelArgs: 3392 bytes
  int* sink;
  volatile unsigned* host;
  unsigned* arrivals;
  unsigned nBlocks, nItems;
  unsigned long long pad[46];
  Item items[24];
};
static_assert(sizeof(BigArgs) <= 4096, "fits the classic parameter limit");

enum Variant { kEmpty, kBigParams, kCopyItems, kStack, kHostRead, kHostWrite, kFenceSys, kArrive, kAll, kPdl, kPdlCopy,
               kPdlCopyEvent, kNumVariants };
const char* kNames[kNumVariants] = {"empty (small params)", "3.4 KB params, unused", "copy 1 item to smem",
                                    "touch 512 B of stack", "read host memory",   "st.release.sys host",
                                    "__threadfence_system", "block arrival atomic", "all of the above",
                                    "PDL: wait, then run",  "PDL: copy item, wait", "PDL copy + event record"};

__global__ void smallKernel(int* sink) {
  if (threadIdx.x == 1023) sink[0] = 1;  // never true at 512 threads; keeps the kernel alive
}

template <int V>
__global__ void __launch_bounds__(512, 1) bigKernel(const __grid_constant__ BigArgs a, int dynIndex) {
  __shared__ Item smem[24];
  const int tid = threadIdx.x;
  int acc = 0;
  if (V == kCopyItems || V == kAll) {
    for (int i = tid; i < (int)a.nItems * 12; i += blockDim.x) smem[i / 12].w[i % 12] = a.items[i / 12].w[i % 12];
    __syncthreads();
    acc += (int)smem[0].w[tid % 12];
  }
  if (V == kStack || V == kAll) {
    volatile int frame[128];  // indexed at run time: lives in local memory
    frame[(tid + dynIndex) & 127] = tid;
    acc += frame[(tid * 7 + dynIndex) & 127];
  }
  if ((V == kHostRead || V == kAll) && tid == 0) acc += (int)*a.host;
  if ((V == kHostWrite || V == kAll) && tid == 0) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(a.host + 1), "r"(1u) : "memory");
  }
  if ((V == kFenceSys || V == kAll) && tid == 0) __threadfence_system();
  if ((V == kArrive || V == kAll) && tid == 0) {
    if (atomicAdd(a.arrivals, 1u) == a.nBlocks - 1) atomicExch(a.arrivals, 0u);
  }
  if (acc == 0x7fffffff) a.sink[0] = acc;
}

// Programmatic dependent launch: the next kernel of the stream may start once every block of this
// one has signalled (or exited); it waits for this one's completion (and memory) at its wait.
template <bool CopyFirst>
__global__ void __launch_bounds__(512, 1) pdlKernel(const __grid_constant__ BigArgs a) {
  __shared__ Item smem[24];
  const int tid = threadIdx.x;
  if (CopyFirst) {
    for (int i = tid; i < (int)a.nItems * 12; i += blockDim.x) smem[i / 12].w[i % 12] = a.items[i / 12].w[i % 12];
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  __syncthreads();
  if ((int)smem[0].w[tid % 12] == 0x7fffffff) a.sink[tid] = 1;
}

using Launch = void (*)(cudaStream_t, int blocks, const BigArgs&);
template <int V>
void launchBig(cudaStream_t s, int blocks, const BigArgs& a) { bigKernel<V><<<blocks, 512, 0, s>>>(a, blocks); }
void launchSmall(cudaStream_t s, int blocks, const BigArgs& a) { smallKernel<<<blocks, 512, 0, s>>>(a.sink); }
template <bool CopyFirst>
void launchPdl(cudaStream_t s, int blocks, const BigArgs& a) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(512);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, pdlKernel<CopyFirst>, a));
}

// The same PDL launch through the driver with the parameters as one buffer of `bytes` (the kernel
// reads only that prefix): does a launch of a small prefix of the 3.4 KB cost less?
size_t gParamBytes = sizeof(BigArgs);
void launchPdlPrefix(cudaStream_t s, int blocks, const BigArgs& a) {
  static CUfunction fn = [] {
    cudaFunction_t f = nullptr;
    CHECK(cudaGetFuncBySymbol(&f, (const void*)pdlKernel<true>));
    return (CUfunction)f;
  }();
  CUlaunchAttribute attr[1] = {};
  attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr[0].value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = (unsigned)blocks;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 512;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = (CUstream)s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  size_t bytes = gParamBytes;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void*)&a, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
  CUresult r = cuLaunchKernelEx(&cfg, fn, nullptr, extra);
  if (r != CUDA_SUCCESS) {
    const char* text = nullptr;
    cuGetErrorString(r, &text);
    static size_t reported = 0;
    if (reported != bytes) std::printf("cuLaunchKernelEx with %zu parameter bytes: %s\n", bytes, text ? text : "?");
    reported = bytes;
  }
}

// weft's enqueue records an event after every launch (the communicator's last kernel, for launches
// from other streams): does a stream operation between two kernels cost their overlap?
cudaEvent_t gAfterLaunch = nullptr;
void launchPdlThenRecord(cudaStream_t s, int blocks, const BigArgs& a) {
  launchPdl<true>(s, blocks, a);
  CHECK(cudaEventRecord(gAfterLaunch, s));
}

const Launch kLaunch[kNumVariants] = {launchSmall, launchBig<kBigParams>, launchBig<kCopyItems>,
                                      launchBig<kStack>, launchBig<kHostRead>, launchBig<kHostWrite>,
                                      launchBig<kFenceSys>, launchBig<kArrive>, launchBig<kAll>,
                                      launchPdl<false>, launchPdl<true>, launchPdlThenRecord};

// Microseconds per launch: `reps` launches back to back on a stream, or a graph of `perGraph`
// launches replayed reps / perGraph times.
double timeIt(Launch launch, int blocks, const BigArgs& a, bool graph, cudaStream_t s) {
  const int reps = 2000, perGraph = 20;
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < perGraph; i++) launch(s, blocks, a);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphDestroy(g));
  }
  auto run = [&](int n) {
    if (graph) {
      for (int i = 0; i < n / perGraph; i++) CHECK(cudaGraphLaunch(exec, s));
    } else {
      for (int i = 0; i < n; i++) launch(s, blocks, a);
    }
  };
  run(200);  // warm up
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaEventRecord(t0, s));
  run(reps);
  CHECK(cudaEventRecord(t1, s));
  CHECK(cudaEventSynchronize(t1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, t0, t1));
  CHECK(cudaGetLastError());
  if (exec) CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaEventDestroy(t0));
  CHECK(cudaEventDestroy(t1));
  return 1000.0 * ms / reps;
}

int main() {
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  BigArgs a{};
  CHECK(cudaMalloc(&a.sink, 64));
  unsigned* host = nullptr;
  CHECK(cudaHostAlloc(&host, 64, cudaHostAllocMapped));
  host[0] = 0;
  CHECK(cudaHostGetDevicePointer((void**)&a.host, host, 0));
  CHECK(cudaMalloc(&a.arrivals, 64));
  CHECK(cudaMemset(a.arrivals, 0, 64));
  a.nItems = 1;
  CHECK(cudaEventCreateWithFlags(&gAfterLaunch, cudaEventDisableTiming));
  std::printf("%-24s %10s %10s %10s %10s   (us per launch, 512 threads a block)\n", "variant", "stream x1",
              "stream x32", "graph x1", "graph x32");
  for (int v = 0; v < kNumVariants; v++) {
    std::printf("%-24s", kNames[v]);
    for (bool graph : {false, true}) {
      for (int blocks : {1, 32}) {
        a.nBlocks = (unsigned)blocks;
        std::printf(" %10.2f", timeIt(kLaunch[v], blocks, a, graph, s));
      }
    }
    std::printf("\n");
  }
  // Host: per-call cost of the runtime calls an enqueue path makes.
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  auto perCall = [&](const char* what, auto&& call) {
    const int n = 5000;
    for (int i = 0; i < 200; i++) call();
    CHECK(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) call();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    CHECK(cudaStreamSynchronize(s));
    std::printf("host %-44s %8.2f us per call\n", what, us);
  };
  a.nBlocks = 1;
  perCall("launch, small params", [&] { smallKernel<<<1, 512, 0, s>>>(a.sink); });
  perCall("launch, 3.4 KB params", [&] { bigKernel<kBigParams><<<1, 512, 0, s>>>(a, 1); });
  perCall("launch 3.4 KB + cudaEventRecord", [&] {
    bigKernel<kBigParams><<<1, 512, 0, s>>>(a, 1);
    CHECK(cudaEventRecord(ev, s));
  });
  perCall("PDL launch, 1 block", [&] { launchPdl<true>(s, 1, a); });
  perCall("PDL launch, 32 blocks", [&] { launchPdl<true>(s, 32, a); });
  perCall("PDL launch, 32 blocks + cudaEventRecord", [&] { launchPdlThenRecord(s, 32, a); });
  for (size_t bytes : {sizeof(BigArgs), (size_t)1024, (size_t)640, (size_t)128}) {
    gParamBytes = bytes;
    char what[64];
    std::snprintf(what, sizeof what, "driver PDL launch, 1 block, %zu B params", bytes);
    perCall(what, [&] { launchPdlPrefix(s, 1, a); });
    std::snprintf(what, sizeof what, "driver PDL launch, 32 blocks, %zu B params", bytes);
    perCall(what, [&] { launchPdlPrefix(s, 32, a); });
    std::printf("%-24s %10.2f %10.2f (GPU us per launch, stream x1 / x32)\n", "  the same", timeIt(launchPdlPrefix, 1, a, false, s),
                timeIt(launchPdlPrefix, 32, a, false, s));
  }
  gParamBytes = sizeof(BigArgs);
  perCall("cudaEventRecord alone", [&] { CHECK(cudaEventRecord(ev, s)); });
  perCall("cudaStreamGetCaptureInfo", [&] {
    cudaStreamCaptureStatus st;
    CHECK(cudaStreamGetCaptureInfo(s, &st));
  });
  perCall("cudaGetDevice + cudaSetDevice", [&] {
    int d = 0;
    CHECK(cudaGetDevice(&d));
    CHECK(cudaSetDevice(d));
  });
  perCall("cudaStreamWaitEvent", [&] { CHECK(cudaStreamWaitEvent(s, ev, 0)); });
  return 0;
}
