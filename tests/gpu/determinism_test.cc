// Determinism of the reductions (user-pains matrix row 4) on real GPUs, public API only. Floating
// point sums depend on their order, so the inputs span many binades (random signs and exponents
// from 2^-12 to 2^12) and a different order shows as a different hash. For each collective, type
// and size, with the algorithm and protocol the tuner picks (or NCCL_ALGO / NCCL_PROTO forces):
//   repeat     the same call -r times: every rank's output hash is the same each time
//   ranks      all_reduce: every rank holds the same bits (reduce_scatter and reduce: n/a)
//   history    after calls of other sizes, into a fresh allocation at the same alignment: the same
//   graph      the call captured in a CUDA graph and replayed: the same as eager
//   offset     into an allocation 4 bytes further (another alignment): reported, not judged (the
//              vector width may change; the order of the sum per element should not)
//   shape      all_reduce: the same inputs as the first elements of a call 2.5 times longer: how many
//              of them come out different (another size cuts other chunks, so a ring sums them in
//              another order); judged with --shape-independent (e.g. NCCL_ALGO=allreduce:direct,
//              whose every rank sums in rank order whatever the size)
// Each case prints the hash of rank 0's output ("hash"), to compare runs under other settings.
// Two ranks cannot show an order (a + b is b + a): use 3 or more; the test prints how many float32
// elements of its inputs would sum differently in another order of the ranks.
// One process, one thread, -n ranks (rank r on GPU r % GPUs; ranks sharing a GPU need weft's
// NCCL_WEFT_ALLOW_GPU_SHARING=1, which the test sets).
//   weft_gpu_determinism_test [-n ranks (3)] [-r repeats (10)] [--shape-independent] [--observe]
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "one_thread_ranks.h"

namespace {

enum class Coll { kAllReduce, kReduceScatter, kReduce };

struct Case {
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;  // elements per rank's output (all_reduce, reduce) or per rank's block (reduce_scatter)
};

const char* collName(Coll c) {
  return c == Coll::kAllReduce ? "all_reduce" : c == Coll::kReduceScatter ? "reduce_scatter" : "reduce";
}
const char* typeName(ncclDataType_t t) {
  return t == ncclFloat32 ? "float32" : t == ncclBfloat16 ? "bfloat16" : t == ncclFloat16 ? "float16" : "float64";
}
size_t typeBytes(ncclDataType_t t) { return t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 2; }

bool gObserve = false;
bool gShapeIndependent = false;
int gFailed = 0;

struct Buffers {
  std::vector<char*> send, recv;  // per rank; recv == the output
};

uint64_t fnv(const std::vector<char>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (char c : bytes) h = (h ^ (uint8_t)c) * 1099511628211ull;
  return h;
}

// Random values of many binades, built bit by bit so that every type holds them exactly.
std::vector<char> inputBytes(const Case& c, size_t elements, int rank) {
  std::mt19937_64 rng(1234567 + 7919 * (uint64_t)rank);  // a longer input starts with a shorter one
  std::vector<char> out(elements * typeBytes(c.type));
  for (size_t i = 0; i < elements; ++i) {
    const uint64_t bits = rng();
    const int exponent = (int)(bits % 25) - 12;  // 2^-12 .. 2^12
    const uint64_t sign = (bits >> 8) & 1, mantissa = bits >> 16;
    if (c.type == ncclFloat64 || c.type == ncclFloat32) {
      const double v = std::ldexp(1.0 + (double)(mantissa & 0x7fffff) / (1 << 23), exponent) * (sign ? -1 : 1);
      const float f = (float)v;  // exact: 23 bits of mantissa
      memcpy(&out[i * typeBytes(c.type)], c.type == ncclFloat64 ? (const void*)&v : (const void*)&f, typeBytes(c.type));
    } else {
      const uint16_t h = c.type == ncclBfloat16
                             ? (uint16_t)(sign << 15 | (uint64_t)(exponent + 127) << 7 | (mantissa & 0x7f))
                             : (uint16_t)(sign << 15 | (uint64_t)(exponent + 15) << 10 | (mantissa & 0x3ff));
      memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

size_t inputElements(const Case& c, int n) { return c.coll == Coll::kReduceScatter ? c.count * n : c.count; }

// Rank r's call of the case, on its stream.
ncclResult_t callOf(const Case& c, const Rank& rank, Buffers& b, size_t r) {
  if (c.coll == Coll::kAllReduce) {
    return ncclAllReduce(b.send[r], b.recv[r], c.count, c.type, c.op, rank.comm, rank.stream);
  }
  if (c.coll == Coll::kReduceScatter) {
    return ncclReduceScatter(b.send[r], b.recv[r], c.count, c.type, c.op, rank.comm, rank.stream);
  }
  return ncclReduce(b.send[r], b.recv[r], c.count, c.type, c.op, 0, rank.comm, rank.stream);
}

ncclResult_t issue(const Case& c, std::vector<Rank>& ranks, Buffers& b) {
  ncclResult_t first = ncclGroupStart();
  for (size_t r = 0; r < ranks.size() && first == ncclSuccess; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    first = callOf(c, ranks[r], b, r);
  }
  ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

// Buffers for the case, `offset` bytes into fresh allocations, inputs written, outputs poisoned.
Buffers makeBuffers(const Case& c, std::vector<Rank>& ranks, size_t offset, std::vector<void*>* owned) {
  const int n = (int)ranks.size();
  Buffers b;
  const size_t inBytes = inputElements(c, n) * typeBytes(c.type), outBytes = c.count * typeBytes(c.type);
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    void* s = nullptr;
    void* d = nullptr;
    CUDA_OK(cudaMalloc(&s, inBytes + offset));
    CUDA_OK(cudaMalloc(&d, outBytes + offset));
    owned->push_back(s);
    owned->push_back(d);
    b.send.push_back((char*)s + offset);
    b.recv.push_back((char*)d + offset);
    std::vector<char> in = inputBytes(c, inputElements(c, n), r);
    CUDA_OK(cudaMemcpy(b.send[r], in.data(), inBytes, cudaMemcpyHostToDevice));
  }
  return b;
}

// Runs the case once (poisoning the outputs first); each rank's output hash (0 where it has none).
std::vector<uint64_t> runOnce(const Case& c, std::vector<Rank>& ranks, Buffers& b, bool* ok) {
  const size_t outBytes = c.count * typeBytes(c.type);
  for (size_t r = 0; r < ranks.size(); ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaMemset(b.recv[r], 0xa5, outBytes));
  }
  *ok = issue(c, ranks, b) == ncclSuccess;
  std::vector<uint64_t> hashes(ranks.size(), 0);
  std::vector<char> host(outBytes);
  for (size_t r = 0; r < ranks.size(); ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaStreamSynchronize(ranks[r].stream));
    if (c.coll == Coll::kReduce && r != 0) continue;
    CUDA_OK(cudaMemcpy(host.data(), b.recv[r], outBytes, cudaMemcpyDeviceToHost));
    hashes[r] = fnv(host);
  }
  return hashes;
}

// The case captured in a CUDA graph, each rank's by a thread of its own (as one thread per GPU
// would), then every graph replayed: each rank's output hash.
std::vector<uint64_t> runInGraph(const Case& c, std::vector<Rank>& ranks, Buffers& b, bool* ok) {
  const size_t outBytes = c.count * typeBytes(c.type);
  const int n = (int)ranks.size();
  std::vector<cudaGraphExec_t> execs(n);
  std::vector<ncclResult_t> results(n, ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CUDA_OK(cudaSetDevice(ranks[r].device));
      CUDA_OK(cudaMemset(b.recv[r], 0xa5, outBytes));
      cudaStream_t s = ranks[r].stream;
      cudaGraph_t graph;
      CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      results[r] = callOf(c, ranks[r], b, (size_t)r);
      CUDA_OK(cudaStreamEndCapture(s, &graph));
      CUDA_OK(cudaGraphInstantiate(&execs[r], graph, 0));
      CUDA_OK(cudaGraphDestroy(graph));
    });
  }
  for (std::thread& t : threads) t.join();
  *ok = true;
  for (ncclResult_t e : results) *ok = *ok && e == ncclSuccess;
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaGraphLaunch(execs[r], ranks[r].stream));
  }
  std::vector<uint64_t> hashes(n, 0);
  std::vector<char> host(outBytes);
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    CUDA_OK(cudaStreamSynchronize(ranks[r].stream));
    if (!(c.coll == Coll::kReduce && r != 0)) {
      CUDA_OK(cudaMemcpy(host.data(), b.recv[r], outBytes, cudaMemcpyDeviceToHost));
      hashes[r] = fnv(host);
    }
    CUDA_OK(cudaGraphExecDestroy(execs[r]));
  }
  return hashes;
}

// How many float32 elements of the inputs sum differently in two orders of the ranks (0, 1, 2, ...
// against 0, 2, 1, ...): what makes the hashes able to see an order change (none with 2 ranks: a + b
// is b + a).
double orderSensitivePercent(const Case& c, int n) {
  if (c.type != ncclFloat32 || n < 3) return 0;
  const size_t elements = inputElements(c, n);
  std::vector<std::vector<char>> in;
  for (int r = 0; r < n; ++r) in.push_back(inputBytes(c, elements, r));
  auto at = [&](int r, size_t i) {
    float f;
    memcpy(&f, &in[r][i * 4], 4);
    return f;
  };
  size_t differ = 0;
  for (size_t i = 0; i < elements; ++i) {
    float forward = 0, swapped = at(0, i) + at(2, i) + at(1, i);
    for (int r = 0; r < n; ++r) forward += at(r, i);
    for (int r = 3; r < n; ++r) swapped += at(r, i);
    differ += forward != swapped;
  }
  return 100.0 * (double)differ / (double)elements;
}

void freeAll(std::vector<void*>& owned) {
  for (void* p : owned) cudaFree(p);
  owned.clear();
}

void check(const char* what, const std::string& name, bool pass, const std::string& detail) {
  printf("%-36s %-8s %s %s\n", name.c_str(), what, gObserve ? "" : (pass ? "PASS" : "FAIL"), detail.c_str());
  fflush(stdout);
  if (!pass && !gObserve) ++gFailed;
}

// The elements of `c`'s output (rank 0) that differ from the same elements of a longer call whose
// inputs begin with `c`'s.
size_t shapeDifferences(const Case& c, std::vector<Rank>& ranks) {
  std::vector<void*> owned;
  Case longer = c;
  longer.count = c.count * 5 / 2 + 3;
  Buffers a = makeBuffers(c, ranks, 0, &owned);
  Buffers b = makeBuffers(longer, ranks, 0, &owned);
  bool ok = true;
  (void)runOnce(c, ranks, a, &ok);
  (void)runOnce(longer, ranks, b, &ok);
  const size_t bytes = typeBytes(c.type);
  std::vector<char> x(c.count * bytes), y(c.count * bytes);
  CUDA_OK(cudaSetDevice(ranks[0].device));
  CUDA_OK(cudaMemcpy(x.data(), a.recv[0], x.size(), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(y.data(), b.recv[0], y.size(), cudaMemcpyDeviceToHost));
  freeAll(owned);
  if (!ok) return SIZE_MAX;
  size_t differ = 0;
  for (size_t i = 0; i < c.count; ++i) differ += memcmp(&x[i * bytes], &y[i * bytes], bytes) != 0;
  return differ;
}

void runCase(const Case& c, std::vector<Rank>& ranks, int repeats) {
  const int n = (int)ranks.size();
  char name[96];
  snprintf(name, sizeof(name), "%s %s %s %zu", collName(c.coll), typeName(c.type), c.op == ncclAvg ? "avg" : "sum",
           c.count);
  if (n >= 3 && c.type == ncclFloat32) {
    printf("%-36s inputs: %.1f%% of the elements sum differently in another order of the ranks\n", name,
           orderSensitivePercent(c, n));
  }
  std::vector<void*> owned;
  Buffers b = makeBuffers(c, ranks, 0, &owned);
  bool ok = true;
  const std::vector<uint64_t> first = runOnce(c, ranks, b, &ok);
  int differing = 0;
  for (int i = 1; i < repeats && ok; ++i) differing += runOnce(c, ranks, b, &ok) != first;
  printf("%-36s %-8s      %016llx\n", name, "hash", (unsigned long long)first[0]);
  check("repeat", name, ok && differing == 0,
        ok ? std::to_string(differing) + " of " + std::to_string(repeats - 1) + " repeats differ" : "a call failed");
  if (c.coll == Coll::kAllReduce) {
    int others = 0;
    for (int r = 1; r < n; ++r) others += first[r] != first[0];
    check("ranks", name, others == 0, std::to_string(others) + " rank(s) differ from rank 0");
  }
  const std::vector<uint64_t> graph = runInGraph(c, ranks, b, &ok);
  check("graph", name, ok && graph == first, ok ? (graph == first ? "same as eager" : "differs from eager") : "failed");
  freeAll(owned);
  // Other sizes in between, then fresh allocations (same alignment), then 4 bytes further.
  Case other = c;
  other.count = c.count / 3 + 1;
  Buffers ob = makeBuffers(other, ranks, 0, &owned);
  (void)runOnce(other, ranks, ob, &ok);
  freeAll(owned);
  Buffers fresh = makeBuffers(c, ranks, 0, &owned);
  const std::vector<uint64_t> again = runOnce(c, ranks, fresh, &ok);
  check("history", name, ok && again == first, again == first ? "same after other sizes" : "DIFFERS");
  freeAll(owned);
  Buffers shifted = makeBuffers(c, ranks, 4, &owned);
  const std::vector<uint64_t> moved = runOnce(c, ranks, shifted, &ok);
  if (c.coll == Coll::kAllReduce) {
    const size_t differ = shapeDifferences(c, ranks);
    char text[128];
    snprintf(text, sizeof(text), "%zu of %zu elements differ from a longer call's (%.1f%%)%s", differ, c.count,
             100.0 * (double)differ / (double)c.count, gShapeIndependent ? "" : " (reported)");
    if (gShapeIndependent)
      check("shape", name, differ == 0, text);
    else
      printf("%-36s %-8s      %s\n", name, "shape", text);
  }
  printf("%-36s %-8s      %s\n", name, "offset",
         moved == first ? "same at another alignment" : "differs at another alignment (reported)");
  freeAll(owned);
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 3, repeats = 10;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--observe"))
      gObserve = true;
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc)
      repeats = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shape-independent"))
      gShapeIndependent = true;
    else {
      fprintf(stderr, "usage: %s [-n ranks] [-r repeats] [--shape-independent] [--observe]\n", argv[0]);
      return 2;
    }
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0 || nranks < 1 || repeats < 2) {
    fprintf(stderr, "determinism test: %s\n", gpus == 0 ? "no GPU visible" : "-n must be >= 1 and -r >= 2");
    return 2;
  }
  if (nranks > gpus) setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 1);
  int version = 0;
  ncclGetVersion(&version);
  printf("determinism test, library version %d, %d ranks on %d GPUs, %d repeats%s\n", version, nranks, gpus, repeats,
         gObserve ? " (observe: not judged)" : "");
  std::vector<Rank> ranks(nranks);
  if (!makeOneThreadRanks(ranks, gpus)) return 3;
  const std::vector<Case> cases = {
      {Coll::kAllReduce, ncclFloat32, ncclSum, 1000},        {Coll::kAllReduce, ncclFloat32, ncclSum, 65537},
      {Coll::kAllReduce, ncclFloat32, ncclSum, 1 << 20},     {Coll::kAllReduce, ncclFloat32, ncclSum, 1 << 24},
      {Coll::kAllReduce, ncclBfloat16, ncclSum, 1 << 20},    {Coll::kAllReduce, ncclFloat16, ncclSum, 300001},
      {Coll::kAllReduce, ncclFloat64, ncclSum, 1 << 18},     {Coll::kAllReduce, ncclFloat32, ncclAvg, 1 << 20},
      {Coll::kReduceScatter, ncclFloat32, ncclSum, 1 << 18}, {Coll::kReduce, ncclFloat32, ncclSum, 1 << 20},
  };
  for (const Case& c : cases) runCase(c, ranks, repeats);
  for (Rank& r : ranks) ncclCommDestroy(r.comm);
  printf("determinism test: %s\n", gObserve ? "ran to the end" : (gFailed == 0 ? "all passed" : "FAILED"));
  return gFailed == 0 ? 0 : 1;
}
