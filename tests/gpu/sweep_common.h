// Shared definitions of the collective correctness sweep (coll_sweep): the case description that the
// host and the fill/check kernels agree on, the check result layout, and the kernel launchers.
// Only the public NCCL API and the CUDA runtime are used, so the same binary runs on any libnccl.so.2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

namespace sweep {

// Operations the sweep knows. The first kNumColls are issued as cases; kChainAllReduce only names the
// expected values of the back-to-back ordering test (an allreduce applied `mulFactor` times).
enum Coll : int {
  kAllReduce,
  kBroadcast,
  kBcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecvRing,  // every rank sends to rank+1 and receives from rank-1, in one group
  kSendRecvSelf,  // every rank sends to itself
  kSendRecvMany,  // kManyMsgs messages to every peer (itself included) in one group
  kNumColls,
  kChainAllReduce = 100,
};
constexpr int kManyMsgs = 2;

// Reduction operations. The two PreMulSum variants differ only in where the scalar lives.
enum Op : int { kSum, kProd, kMin, kMax, kAvg, kPreMulHost, kPreMulDev, kNumOps, kNoOp = -1 };

// How input values are generated (see valueFor in sweep_kernels.cu). Reductions get small values whose
// results are exact in the type; copies get random bit patterns (compared bit for bit).
enum Gen : int { kGenBits, kGenSum, kGenProd, kGenAvg, kGenPreMul };

constexpr int kNumTypes = 12;  // ncclInt8 .. ncclFloat8e5m2

// Everything a fill or check kernel needs to know about one case on one rank. Passed by value.
struct CaseParams {
  int coll = kAllReduce;
  int op = kNoOp;
  int gen = kGenBits;
  int type = ncclFloat;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  int inplace = 0;
  uint64_t count = 0;      // the per-rank count argument of the NCCL call
  uint64_t seed = 0;       // makes every case's data different, so stale data never passes
  uint64_t mulFactor = 1;  // kChainAllReduce: expected = (sum over ranks) * mulFactor, wrapping
  double scalar = 1.0;     // PreMulSum scalar (same value as the one given to NCCL)
  double tolFactor = 0.0;  // floats: |got-expected| <= tolFactor * sum|terms|; 0 means exact
};

enum MismatchKind : int { kBadValue = 0, kBadGuard = 1, kInputChanged = 2, kNumMismatchKinds = 3 };

struct Mismatch {
  uint64_t index;    // element index (kBadValue, kInputChanged) or byte offset into the guard (kBadGuard)
  uint64_t expBits;  // raw bits of the expected element (or byte)
  uint64_t gotBits;
  double expVal;     // expected / got as numbers, for floating types
  double gotVal;
  int kind;
  int isFloat;
};

constexpr int kMaxRecorded = 4;

// One per case and rank, in device memory, zeroed before the case's checks.
struct CheckResult {
  unsigned long long errors[kNumMismatchKinds];
  // ~(lowest bad element index) so that a zeroed slot means "none" and atomicMax finds the lowest.
  unsigned long long lowestBadNeg;
  unsigned int nRecorded;
  unsigned int pad;
  Mismatch rec[kMaxRecorded];
};

// Host-side facts about a datatype.
struct TypeInfo {
  const char* name;
  int bytes;
  bool isFloat;
  bool isSigned;
  bool needsSm90;  // fp8
  uint64_t exactLimit;  // every integer in [-E, E] (or [0, E]) is exact in the type
  int precisionBits;    // significand bits p; unit roundoff u = 2^-p
};
const TypeInfo& typeInfo(int type);
const char* collName(int coll);
const char* opName(int op);
bool collIsReduction(int coll);
bool collHasRoot(int coll);
bool collHasInPlace(int coll);

// Tolerance factor 2(n+2)u for the floating-point cases where the library's result may legitimately
// round (avg with a non-power-of-two rank count, PreMulSum); zero for every exact case.
double toleranceFactor(int type, int op, int nranks);
// Value generator used for a reduction op (or kGenBits for copies).
int genFor(int coll, int op);
// The PreMulSum scalar the sweep uses for a type: 0.5 for floating types, 3 for integers.
double preMulScalar(int type);

// Kernel launchers (sweep_kernels.cu). All are asynchronous on `stream`.
// dst[k] = value of rank p.rank, element k, for k < n.
cudaError_t launchFill(void* dst, uint64_t n, const CaseParams& p, cudaStream_t stream);
// Checks out[0..outCount) against the expectation of collective p.coll for rank p.rank.
cudaError_t launchCheckOutput(const void* out, uint64_t outCount, const CaseParams& p, CheckResult* res,
                              cudaStream_t stream);
// Checks that send[0..n) still holds this rank's input (an out-of-place call must not write its input).
cudaError_t launchCheckInput(const void* send, uint64_t n, const CaseParams& p, CheckResult* res,
                             cudaStream_t stream);
// Checks that every byte of [ptr, ptr+nbytes) is `pattern`; reported indices start at indexBase.
cudaError_t launchCheckGuard(const void* ptr, uint64_t nbytes, unsigned char pattern, uint64_t indexBase,
                             CheckResult* res, cudaStream_t stream);
// Writes `value` converted to the datatype into dst (the PreMulSum scalar), on the device.
cudaError_t launchWriteScalar(void* dst, int type, double value, cudaStream_t stream);
// Corrupts element `index` of buf (checker self-test).
cudaError_t launchCorrupt(void* buf, int type, uint64_t index, cudaStream_t stream);
// Loads every kernel above into the current device's context and raises the per-thread stack
// limit to what the largest needs. Otherwise the first launch of a kernel does both, and either
// may wait for the device to go idle: with two ranks on one GPU in one process, rank 0's first
// check would wait for rank 0's collective, which waits for rank 1's, which cannot be launched
// while the context is held.
cudaError_t loadSweepKernels();

constexpr unsigned char kPoison = 0xAB;

// CPU check (no GPU needed) of the generator's exactness claims: for every type, op and n in
// {1,2,3,4,5,8}, the inputs are exact in the type, and reducing them with rounding to the type after
// every step, in three orders, gives the expected value exactly (or within the stated tolerance).
bool hostCheckGenerators(std::string* report, int* checked);

}  // namespace sweep
