// ncclCommRegister / ncclCommDeregister on real GPU memory, through the public API only. One
// process, one thread, -n ranks made by ncclCommInitRank in a group (rank r on GPU r % GPUs; ranks
// sharing a GPU need weft's NCCL_WEFT_ALLOW_GPU_SHARING=1, which the test sets). Checks:
//   device-handle     a cudaMalloc buffer gets a handle; a part of it the same handle (one more
//                     reference); another allocation another handle
//   collective        an all_reduce on registered buffers (cudaMalloc and ncclMemAlloc) is right
//   refcount          two deregistrations of a twice-registered buffer pass, a third is refused
//                     (ncclInvalidUsage) naming the handle
//   foreign-handle    a handle of rank 0's communicator is refused by rank 1's (-n 2 and more)
//   null-handle       deregistering NULL passes (what host memory is given)
//   pinned-host       cudaHostAlloc memory: a handle (as NCCL 2.28.9 gives), released
//   host-malloc       pageable host memory: ncclInvalidArgument (NCCL: a CUDA error)
//   past-end          a size beyond the allocation: ncclInvalidArgument, "leaves room for"
//   bad-arguments     NULL handle pointer, NULL buffer: ncclInvalidArgument naming the argument
//   destroy-with-held destroying communicators that still hold registrations succeeds
//   weft_gpu_register_test [-n ranks (1)] [--observe]
// --observe prints what the library does without judging (another libnccl.so.2 first on
// LD_LIBRARY_PATH: what NCCL does; give it one GPU per rank).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"
#include "one_thread_ranks.h"

namespace {

constexpr size_t kCount = 1 << 18;  // floats per buffer

bool gObserve = false;
int gFailed = 0;

void report(const char* check, bool pass, const std::string& detail) {
  printf("%-18s %s | %s\n", check, gObserve ? "" : (pass ? "PASS" : "FAIL"), detail.c_str());
  fflush(stdout);
  if (!pass && !gObserve) ++gFailed;
}

std::string said(ncclResult_t r, ncclComm_t comm) {
  return std::string(ncclGetErrorString(r)) + (r == ncclSuccess ? "" : std::string(": ") + ncclGetLastError(comm));
}

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

// An all_reduce (sum) of rank-dependent floats over the given buffers, checked on every rank.
bool allReduceRight(std::vector<Rank>& ranks, std::vector<float*>& send, std::vector<float*>& recv) {
  const int n = (int)ranks.size();
  std::vector<float> host(kCount);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < kCount; ++i) host[i] = (float)((i % 251) + r);
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaMemcpy(send[r], host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(recv[r], 0xff, kCount * sizeof(float)));
  }
  ncclResult_t s = ncclGroupStart();
  for (int r = 0; r < n && s == ncclSuccess; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    s = ncclAllReduce(send[r], recv[r], kCount, ncclFloat, ncclSum, ranks[r].comm, ranks[r].stream);
  }
  ncclResult_t e = ncclGroupEnd();
  if (s != ncclSuccess || e != ncclSuccess) return false;
  const float rankSum = (float)(n * (n - 1) / 2);
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaStreamSynchronize(ranks[r].stream));
    CUDA_OK(cudaMemcpy(host.data(), recv[r], kCount * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kCount; ++i)
      if (host[i] != (float)((i % 251) * n) + rankSum) return false;
  }
  return true;
}

void run(std::vector<Rank>& ranks) {
  const int n = (int)ranks.size();
  Rank& r0 = ranks[0];
  const size_t bytes = kCount * sizeof(float);
  CUDA_OK(cudaSetDevice(r0.device));
  float* a = nullptr;
  float* b = nullptr;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));

  // device-handle
  void* ha = nullptr;
  void* hPart = nullptr;
  void* hb = nullptr;
  ncclResult_t s1 = ncclCommRegister(r0.comm, a, bytes, &ha);
  ncclResult_t s2 = ncclCommRegister(r0.comm, a + 1024, 4096, &hPart);
  ncclResult_t s3 = ncclCommRegister(r0.comm, b, bytes, &hb);
  char text[256];
  snprintf(text, sizeof(text), "a -> %p, a part -> %p, b -> %p (%s, %s, %s)", ha, hPart, hb, ncclGetErrorString(s1),
           ncclGetErrorString(s2), ncclGetErrorString(s3));
  report("device-handle",
         s1 == ncclSuccess && s2 == ncclSuccess && s3 == ncclSuccess && ha != nullptr && hPart == ha && hb != ha &&
             hb != nullptr,
         text);

  // collective: every rank registers its buffers (NCCL asks that all ranks do, or none); rank 0 uses
  // a and b, the others ncclMemAlloc memory.
  std::vector<float*> send(n), recv(n);
  std::vector<void*> handles;
  send[0] = a;
  recv[0] = b;
  bool registered = true;
  for (int r = 1; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    registered = registered && ncclMemAlloc((void**)&send[r], bytes) == ncclSuccess &&
                 ncclMemAlloc((void**)&recv[r], bytes) == ncclSuccess;
    for (float* p : {send[r], recv[r]}) {
      void* h = nullptr;
      registered = registered && ncclCommRegister(ranks[r].comm, p, bytes, &h) == ncclSuccess && h != nullptr;
      handles.push_back(h);
    }
  }
  const bool right = registered && allReduceRight(ranks, send, recv);
  report("collective", right,
         registered ? (right ? "all_reduce on registered buffers right" : "WRONG or failed") : "registration failed");

  // refcount: a was registered twice (whole, then a part of it).
  ncclResult_t d1 = ncclCommDeregister(r0.comm, ha);
  ncclResult_t d2 = ncclCommDeregister(r0.comm, ha);
  ncclResult_t d3 = ncclCommDeregister(r0.comm, ha);
  const std::string third = said(d3, r0.comm);
  report("refcount",
         d1 == ncclSuccess && d2 == ncclSuccess && d3 == ncclInvalidUsage && has(third, "not a registration"),
         std::string(ncclGetErrorString(d1)) + ", " + ncclGetErrorString(d2) + ", third: " + third);

  // foreign-handle
  if (n > 1) {
    ncclResult_t f = ncclCommDeregister(ranks[1].comm, hb);
    const std::string why = said(f, ranks[1].comm);
    report("foreign-handle", f == ncclInvalidUsage && has(why, "not a registration"), why);
  }

  // null-handle
  ncclResult_t dn = ncclCommDeregister(r0.comm, nullptr);
  report("null-handle", dn == ncclSuccess, said(dn, r0.comm));

  // pinned-host
  void* pinned = nullptr;
  CUDA_OK(cudaHostAlloc(&pinned, bytes, cudaHostAllocMapped));
  void* hp = (void*)0x1;
  ncclResult_t sp = ncclCommRegister(r0.comm, pinned, bytes, &hp);
  const bool gotHandle = hp != nullptr;
  ncclResult_t dp = ncclCommDeregister(r0.comm, hp);
  report("pinned-host", sp == ncclSuccess && gotHandle && dp == ncclSuccess,
         said(sp, r0.comm) + (gotHandle ? ", a handle" : ", NULL handle") + ", released: " + ncclGetErrorString(dp));

  // host-malloc
  std::vector<char> pageable(bytes);
  void* hm = nullptr;
  ncclResult_t sm = ncclCommRegister(r0.comm, pageable.data(), bytes, &hm);
  const std::string whyMalloc = said(sm, r0.comm);
  report("host-malloc", sm == ncclInvalidArgument && has(whyMalloc, "not memory the GPU can reach"), whyMalloc);

  // past-end
  void* he = nullptr;
  ncclResult_t se = ncclCommRegister(r0.comm, b, 2 * bytes, &he);
  const std::string whyPast = said(se, r0.comm);
  report("past-end", se == ncclInvalidArgument && has(whyPast, "leaves room for"), whyPast);

  // bad-arguments
  ncclResult_t nh = ncclCommRegister(r0.comm, a, bytes, nullptr);
  const std::string whyHandle = said(nh, r0.comm);
  void* hn = nullptr;
  ncclResult_t nb = ncclCommRegister(r0.comm, nullptr, bytes, &hn);
  const std::string whyBuff = said(nb, r0.comm);
  report("bad-arguments",
         nh == ncclInvalidArgument && has(whyHandle, "'handle'") && nb == ncclInvalidArgument && has(whyBuff, "'buff'"),
         whyHandle + " / " + whyBuff);

  // destroy-with-held: b's handle and the other ranks' handles are still registered.
  ncclResult_t destroyed = ncclSuccess;
  for (Rank& r : ranks) {
    CUDA_OK(cudaSetDevice(r.device));
    ncclResult_t d = ncclCommDestroy(r.comm);
    if (destroyed == ncclSuccess) destroyed = d;
  }
  report("destroy-with-held", destroyed == ncclSuccess, ncclGetErrorString(destroyed));
  CUDA_OK(cudaFreeHost(pinned));
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 1;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--observe"))
      gObserve = true;
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      nranks = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-n ranks] [--observe]\n", argv[0]);
      return 2;
    }
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0 || nranks < 1) {
    fprintf(stderr, "register test: %s\n", nranks < 1 ? "-n must be at least 1" : "no GPU visible");
    return 2;
  }
  if (nranks > gpus) setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 1);
  int version = 0;
  ncclGetVersion(&version);
  printf("register test, library version %d, %d ranks on %d GPUs%s\n", version, nranks, gpus,
         gObserve ? " (observe: not judged)" : "");
  std::vector<Rank> ranks(nranks);
  if (!makeOneThreadRanks(ranks, gpus)) return 3;
  run(ranks);
  printf("register test: %s\n", gObserve ? "ran to the end" : (gFailed == 0 ? "all passed" : "FAILED"));
  return gFailed == 0 ? 0 : 1;
}
