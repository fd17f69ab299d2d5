// Fill and check kernels of the collective sweep. The expected value of every output element is
// recomputed on the GPU from the same generator that made the inputs, so nothing large crosses PCIe:
// the host reads back one small CheckResult per case.
//
// Exactness: inputs of reductions are integers (or half-integers after a PreMulSum by 0.5) bounded so
// that every partial sum, in any order, is exactly representable in the type; products are of +-1 and
// +-2 with at most two factors of 2 per element for up to 8 ranks. Only avg (with a rank count that
// is not a power of two) and PreMulSum on floating types may round; they get the tolerance of
// toleranceFactor().
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "sweep_common.h"

namespace sweep {
namespace {

template <typename T> struct Traits;
#define SWEEP_TRAITS(T, isF, isS, sm90, E, p) \
  template <> struct Traits<T> {                  \
    static constexpr bool kFloat = isF;           \
    static constexpr bool kSigned = isS;          \
    static constexpr bool kSm90 = sm90;           \
    static constexpr uint64_t kExact = E;         \
    static constexpr int kPrecision = p;          \
  };
SWEEP_TRAITS(int8_t, false, true, false, 127ull, 7)
SWEEP_TRAITS(uint8_t, false, false, false, 255ull, 8)
SWEEP_TRAITS(int32_t, false, true, false, 0x7fffffffull, 31)
SWEEP_TRAITS(uint32_t, false, false, false, 0xffffffffull, 32)
SWEEP_TRAITS(int64_t, false, true, false, 0x7fffffffffffffffull, 63)
SWEEP_TRAITS(uint64_t, false, false, false, 0xffffffffffffffffull, 64)
SWEEP_TRAITS(__half, true, true, false, 2048ull, 11)
SWEEP_TRAITS(float, true, true, false, 1ull << 24, 24)
SWEEP_TRAITS(double, true, true, false, 1ull << 53, 53)
SWEEP_TRAITS(__nv_bfloat16, true, true, false, 256ull, 8)
SWEEP_TRAITS(__nv_fp8_e4m3, true, true, true, 16ull, 4)
SWEEP_TRAITS(__nv_fp8_e5m2, true, true, true, 8ull, 3)
#undef SWEEP_TRAITS

// Calls f(T{}) with the C++ type of an ncclDataType_t.
template <typename F>
cudaError_t dispatchType(int type, F&& f) {
  switch (type) {
    case ncclInt8: return f(int8_t{});
    case ncclUint8: return f(uint8_t{});
    case ncclInt32: return f(int32_t{});
    case ncclUint32: return f(uint32_t{});
    case ncclInt64: return f(int64_t{});
    case ncclUint64: return f(uint64_t{});
    case ncclFloat16: return f(__half{});
    case ncclFloat32: return f(float{});
    case ncclFloat64: return f(double{});
    case ncclBfloat16: return f(__nv_bfloat16{});
    case ncclFloat8e4m3: return f(__nv_fp8_e4m3{});
    case ncclFloat8e5m2: return f(__nv_fp8_e5m2{});
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
__host__ __device__ double toDouble(T x) {
  if constexpr (std::is_same_v<T, double>) return x;
  else if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else if constexpr (Traits<T>::kFloat) return static_cast<float>(x);  // fp8
  else return static_cast<double>(x);
}

// Only called with values that are exact in float (or double for T = double).
template <typename T>
__device__ __host__ T fromDouble(double d) {
  if constexpr (std::is_same_v<T, double>) return d;
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(d);
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(d));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(d));
  else if constexpr (Traits<T>::kFloat) return T(static_cast<float>(d));  // fp8, round to nearest
  else return static_cast<T>(d);
}

template <typename T>
__host__ __device__ uint64_t bitsOf(T x) {
  uint64_t b = 0;
  memcpy(&b, &x, sizeof(T));
  return b;
}

template <typename T>
__host__ __device__ T fromBits(uint64_t b) {
  T x;
  memcpy(static_cast<void*>(&x), &b, sizeof(T));
  return x;
}

// splitmix64 finaliser: a cheap, well-mixed 64-bit hash.
__device__ __host__ inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__host__ __device__ inline uint64_t hashRank(uint64_t seed, int rank, uint64_t k) {
  return mix64(seed ^ mix64(k ^ (static_cast<uint64_t>(rank + 1) << 48)));
}
// Rank-independent hash: the avg generator shares its mean across ranks.
__host__ __device__ inline uint64_t hashElem(uint64_t seed, uint64_t k) { return mix64(~seed ^ mix64(k * 3 + 1)); }

// Integer inputs in [-E/n, E/n] (signed) or [0, E/n] (unsigned) and friends; see the file comment.
__host__ __device__ int64_t genSigned(const CaseParams& p, uint64_t E, int rank, uint64_t k, bool isInt) {
  const uint64_t n = static_cast<uint64_t>(p.nranks);
  const uint64_t h = hashRank(p.seed, rank, k);
  switch (p.gen) {
    case kGenProd: {
      int64_t mag = ((k * 5 + static_cast<uint64_t>(rank)) % 4 == 0) ? 2 : 1;
      return (h & 1) ? -mag : mag;
    }
    case kGenAvg: {
      const uint64_t hk = hashElem(p.seed, k);
      const uint64_t A = E / (2 * n);
      const uint64_t B = n > 1 ? E / (2 * n * (n - 1)) : 0;
      const int64_t a = static_cast<int64_t>(hk % (2 * A + 1) - A);  // wraps into [-A, A]
      const int64_t b = static_cast<int64_t>(mix64(hk) % (B + 1));
      return rank == 0 ? a - static_cast<int64_t>(n - 1) * b : a + b;
    }
    default: {  // kGenSum (also min/max) and kGenPreMul
      uint64_t L = E / n;
      if (p.gen == kGenPreMul && isInt) L /= 3;
      return static_cast<int64_t>(h % (2 * L + 1) - L);  // unsigned difference, read as signed: [-L, L]
    }
  }
}

__host__ __device__ uint64_t genUnsigned(const CaseParams& p, uint64_t E, int rank, uint64_t k) {
  const uint64_t n = static_cast<uint64_t>(p.nranks);
  const uint64_t h = hashRank(p.seed, rank, k);
  switch (p.gen) {
    case kGenProd: return ((k * 5 + static_cast<uint64_t>(rank)) % 4 == 0) ? 2 : 1;
    case kGenAvg: {
      const uint64_t hk = hashElem(p.seed, k);
      const uint64_t A = E / (2 * n);
      const uint64_t B = n > 1 ? E / (2 * n * (n - 1)) : 0;
      const uint64_t a = (n - 1) * B + hk % (A + 1);
      const uint64_t b = mix64(hk) % (B + 1);
      return rank == 0 ? a - (n - 1) * b : a + b;
    }
    default: {
      uint64_t L = E / n;
      if (p.gen == kGenPreMul) L /= 3;
      return L == ~0ull ? h : h % (L + 1);
    }
  }
}

// The input element k of `rank`, as the datatype.
template <typename T>
__host__ __device__ T valueFor(const CaseParams& p, int rank, uint64_t k) {
  if (p.gen == kGenBits) return fromBits<T>(hashRank(p.seed, rank, k));
  if constexpr (Traits<T>::kFloat) {
    return fromDouble<T>(static_cast<double>(genSigned(p, Traits<T>::kExact, rank, k, false)));
  } else if constexpr (Traits<T>::kSigned) {
    return static_cast<T>(genSigned(p, Traits<T>::kExact, rank, k, true));
  } else {
    return static_cast<T>(genUnsigned(p, Traits<T>::kExact, rank, k));
  }
}

// Reduction over all ranks of element idx, in a wide type: double for floats (exact for our inputs),
// int64/uint64 for integers (exact, wrapping only for the ordering chain).
template <typename T>
__host__ __device__ void expectReduce(const CaseParams& p, uint64_t idx, uint64_t* expBits, double* expVal, double* tol) {
  const int n = p.nranks;
  if constexpr (Traits<T>::kFloat) {
    double acc = 0, sumAbs = 0;
    for (int j = 0; j < n; ++j) {
      const double v = static_cast<double>(genSigned(p, Traits<T>::kExact, j, idx, false));
      double term = v;
      switch (p.op) {
        case kProd: acc = j == 0 ? v : acc * v; break;
        case kMin: acc = j == 0 ? v : (v < acc ? v : acc); break;
        case kMax: acc = j == 0 ? v : (v > acc ? v : acc); break;
        case kAvg: term = v / n; acc += v; break;
        case kPreMulHost:
        case kPreMulDev: term = p.scalar * v; acc += term; break;
        default: acc += v; break;
      }
      sumAbs += term < 0 ? -term : term;
    }
    if (p.op == kAvg) acc /= n;
    *expVal = acc;
    *tol = p.tolFactor * sumAbs;
    *expBits = bitsOf(fromDouble<T>(acc));
  } else {
    using W = std::conditional_t<Traits<T>::kSigned, int64_t, uint64_t>;
    W acc = 0;
    for (int j = 0; j < n; ++j) {
      W v;
      if constexpr (Traits<T>::kSigned) v = genSigned(p, Traits<T>::kExact, j, idx, true);
      else v = genUnsigned(p, Traits<T>::kExact, j, idx);
      switch (p.op) {
        case kProd: acc = j == 0 ? v : acc * v; break;
        case kMin: acc = j == 0 ? v : (v < acc ? v : acc); break;
        case kMax: acc = j == 0 ? v : (v > acc ? v : acc); break;
        case kPreMulHost:
        case kPreMulDev: acc += static_cast<W>(p.scalar) * v; break;
        default: acc += v; break;  // sum, avg
      }
    }
    if (p.op == kAvg) acc /= static_cast<W>(n);  // exact: the avg generator makes the sum a multiple of n
    if (p.coll == kChainAllReduce) acc = static_cast<W>(static_cast<uint64_t>(acc) * p.mulFactor);
    *expVal = static_cast<double>(acc);
    *tol = 0;
    *expBits = bitsOf(static_cast<T>(acc));
  }
}

enum Expect { kExpValue, kExpReduce, kExpPoison, kExpSkip };

// What output element k of rank p.rank must hold after collective p.coll.
__device__ Expect expectation(const CaseParams& p, uint64_t k, int* srcRank, uint64_t* srcIdx) {
  const uint64_t c = p.count;
  const int r = p.rank, n = p.nranks;
  *srcIdx = k;
  *srcRank = r;
  switch (p.coll) {
    case kAllReduce:
    case kChainAllReduce: return kExpReduce;
    case kReduce: return r == p.root ? kExpReduce : (p.inplace ? kExpSkip : kExpPoison);
    case kReduceScatter: *srcIdx = static_cast<uint64_t>(r) * c + k; return kExpReduce;
    case kBroadcast:
    case kBcast: *srcRank = p.root; return kExpValue;
    case kAllGather: *srcRank = static_cast<int>(k / c); *srcIdx = k % c; return kExpValue;
    case kGather:
      *srcRank = static_cast<int>(k / c);
      *srcIdx = k % c;
      if (r == p.root) return kExpValue;
      return (p.inplace && *srcRank == r) ? kExpValue : kExpPoison;
    case kScatter: *srcRank = p.root; *srcIdx = static_cast<uint64_t>(r) * c + k; return kExpValue;
    case kAlltoAll:
      *srcRank = static_cast<int>(k / c);
      *srcIdx = static_cast<uint64_t>(r) * c + k % c;
      return kExpValue;
    case kSendRecvRing: *srcRank = (r - 1 + n) % n; return kExpValue;
    case kSendRecvSelf: return kExpValue;
    case kSendRecvMany: {
      const uint64_t m = k / (static_cast<uint64_t>(n) * c);
      *srcRank = static_cast<int>((k / c) % n);
      *srcIdx = (m * n + r) * c + k % c;
      return kExpValue;
    }
    default: return kExpSkip;
  }
}

__device__ void record(CheckResult* res, int kind, uint64_t index, uint64_t expBits, uint64_t gotBits, double expVal,
                       double gotVal, int isFloat) {
  atomicAdd(&res->errors[kind], 1ull);
  if (kind != kBadGuard) atomicMax(&res->lowestBadNeg, ~static_cast<unsigned long long>(index));
  const unsigned slot = atomicAdd(&res->nRecorded, 1u);
  if (slot < kMaxRecorded) {
    Mismatch& m = res->rec[slot];
    m.index = index;
    m.expBits = expBits;
    m.gotBits = gotBits;
    m.expVal = expVal;
    m.gotVal = gotVal;
    m.kind = kind;
    m.isFloat = isFloat;
  }
}

template <typename T>
__global__ void fillKernel(T* dst, uint64_t n, CaseParams p) {
  for (uint64_t k = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    dst[k] = valueFor<T>(p, p.rank, k);
  }
}

template <typename T>
__global__ void checkOutputKernel(const T* out, uint64_t n, CaseParams p, CheckResult* res) {
  constexpr int kIsFloat = Traits<T>::kFloat ? 1 : 0;
  uint64_t poisonBits = 0;
  for (int b = 0; b < static_cast<int>(sizeof(T)); ++b) poisonBits |= static_cast<uint64_t>(kPoison) << (8 * b);
  for (uint64_t k = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const T got = out[k];
    const uint64_t gotBits = bitsOf(got);
    int srcRank;
    uint64_t srcIdx;
    const Expect e = expectation(p, k, &srcRank, &srcIdx);
    if (e == kExpSkip) continue;
    if (e == kExpPoison) {
      if (gotBits != poisonBits) record(res, kBadValue, k, poisonBits, gotBits, 0, toDouble(got), kIsFloat);
      continue;
    }
    if (e == kExpValue) {
      const T exp = valueFor<T>(p, srcRank, srcIdx);
      const uint64_t expBits = bitsOf(exp);
      if (gotBits != expBits) record(res, kBadValue, k, expBits, gotBits, toDouble(exp), toDouble(got), kIsFloat);
      continue;
    }
    uint64_t expBits;
    double expVal, tol;
    expectReduce<T>(p, srcIdx, &expBits, &expVal, &tol);
    bool ok;
    if constexpr (Traits<T>::kFloat) {
      const double g = toDouble(got);
      const double d = g - expVal;
      ok = (g == g) && (d <= tol) && (-d <= tol);  // NaN fails
    } else {
      ok = gotBits == expBits;
    }
    if (!ok) record(res, kBadValue, k, expBits, gotBits, expVal, toDouble(got), kIsFloat);
  }
}

template <typename T>
__global__ void checkInputKernel(const T* send, uint64_t n, CaseParams p, CheckResult* res) {
  for (uint64_t k = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const T exp = valueFor<T>(p, p.rank, k);
    const uint64_t expBits = bitsOf(exp), gotBits = bitsOf(send[k]);
    if (gotBits != expBits) {
      record(res, kInputChanged, k, expBits, gotBits, toDouble(exp), toDouble(send[k]), Traits<T>::kFloat ? 1 : 0);
    }
  }
}

__global__ void checkGuardKernel(const unsigned char* p, uint64_t n, unsigned char pattern, uint64_t base,
                                 CheckResult* res) {
  for (uint64_t k = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    if (p[k] != pattern) record(res, kBadGuard, base + k, pattern, p[k], 0, 0, 0);
  }
}

template <typename T>
__global__ void writeScalarKernel(T* dst, double value) {
  if constexpr (Traits<T>::kFloat) *dst = fromDouble<T>(value);
  else *dst = static_cast<T>(value);
}

template <typename T>
__global__ void corruptKernel(T* buf, uint64_t index) {
  buf[index] = fromBits<T>(bitsOf(buf[index]) ^ 1ull);
}

constexpr int kThreads = 256;
unsigned gridFor(uint64_t n) {
  uint64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 4096) blocks = 4096;
  return blocks == 0 ? 1 : static_cast<unsigned>(blocks);
}

template <typename T>
TypeInfo infoFor(const char* name) {
  return TypeInfo{name,
                  static_cast<int>(sizeof(T)),
                  Traits<T>::kFloat,
                  Traits<T>::kSigned,
                  Traits<T>::kSm90,
                  Traits<T>::kExact,
                  Traits<T>::kPrecision};
}

// --- CPU check of the exactness claims (runs without a GPU) -----------------------------------------

// Rounds a value to the datatype through the CUDA conversion routines.
template <typename T>
double roundTo(double v) {
  return toDouble(fromDouble<T>(v));
}

// A reduction as a library might do it: every intermediate rounded to T, in a given order
// (0 forward, 1 backward, 2 pairwise tree); PreMulSum/avg multiply first by the scalar rounded to T.
template <typename T>
double simulate(const CaseParams& p, const T* vals, int n, int order) {
  std::vector<double> t(n);
  for (int j = 0; j < n; ++j) {
    const double v = toDouble(vals[order == 1 ? n - 1 - j : j]);
    if (p.op == kPreMulHost || p.op == kPreMulDev) t[j] = roundTo<T>(v * roundTo<T>(p.scalar));
    else if (p.op == kAvg) t[j] = roundTo<T>(v * roundTo<T>(1.0 / n));
    else t[j] = v;
  }
  auto combine = [&](double a, double b) {
    switch (p.op) {
      case kProd: return roundTo<T>(a * b);
      case kMin: return a < b ? a : b;
      case kMax: return a > b ? a : b;
      default: return roundTo<T>(a + b);
    }
  };
  if (order == 2) {
    while (t.size() > 1) {
      std::vector<double> next;
      for (size_t i = 0; i + 1 < t.size(); i += 2) next.push_back(combine(t[i], t[i + 1]));
      if (t.size() % 2) next.push_back(t.back());
      t.swap(next);
    }
    return t[0];
  }
  double acc = t[0];
  for (int j = 1; j < n; ++j) acc = combine(acc, t[j]);
  return acc;
}

template <typename T>
void hostCheckType(int type, std::string* report, int* checked) {
  static const int kRanks[] = {1, 2, 3, 4, 5, 8};
  for (int n : kRanks) {
    for (int op : {kSum, kProd, kMin, kMax, kAvg, kPreMulHost}) {
      CaseParams p;
      p.coll = kAllReduce;
      p.type = type;
      p.op = op;
      p.gen = genFor(kAllReduce, op);
      p.nranks = n;
      p.seed = 0xabcdef + 977 * n + op;
      p.scalar = preMulScalar(type);
      p.tolFactor = toleranceFactor(type, op, n);
      for (uint64_t k = 0; k < 3000; ++k) {
        T vals[8];
        for (int j = 0; j < n; ++j) {
          vals[j] = valueFor<T>(p, j, k);
          if constexpr (Traits<T>::kFloat) {  // every input must be exact in the type
            const double want = static_cast<double>(genSigned(p, Traits<T>::kExact, j, k, false));
            if (toDouble(vals[j]) != want && report->size() < 2000) {
              *report += std::string(" ") + typeInfo(type).name + " input " + std::to_string(want) + " not exact;";
            }
          }
        }
        uint64_t expBits;
        double expVal, tol;
        expectReduce<T>(p, k, &expBits, &expVal, &tol);
        ++*checked;
        if constexpr (Traits<T>::kFloat) {  // (integer arithmetic is exact by construction)
          for (int order = 0; order < 3; ++order) {
            const double got = simulate<T>(p, vals, n, order);
            const bool ok = tol == 0 ? bitsOf(fromDouble<T>(got)) == expBits && got == expVal
                                     : (got - expVal <= tol && expVal - got <= tol);
            if (!ok && report->size() < 2000) {
              *report += std::string(" ") + typeInfo(type).name + "/" + opName(op) + " n=" + std::to_string(n) +
                         " k=" + std::to_string(k) + " order " + std::to_string(order) + ": got " +
                         std::to_string(got) + " expected " + std::to_string(expVal) + " tol " +
                         std::to_string(tol) + ";";
            }
          }
        }
      }
    }
  }
}

}  // namespace

bool hostCheckGenerators(std::string* report, int* checked) {
  *checked = 0;
  for (int type = 0; type < kNumTypes; ++type) {
    dispatchType(type, [&](auto tag) {
      hostCheckType<decltype(tag)>(type, report, checked);
      return cudaSuccess;
    });
  }
  return report->empty();
}

const TypeInfo& typeInfo(int type) {
  static const TypeInfo table[kNumTypes] = {
      infoFor<int8_t>("int8"),        infoFor<uint8_t>("uint8"),
      infoFor<int32_t>("int32"),      infoFor<uint32_t>("uint32"),
      infoFor<int64_t>("int64"),      infoFor<uint64_t>("uint64"),
      infoFor<__half>("half"),        infoFor<float>("float"),
      infoFor<double>("double"),      infoFor<__nv_bfloat16>("bfloat16"),
      infoFor<__nv_fp8_e4m3>("fp8e4m3"), infoFor<__nv_fp8_e5m2>("fp8e5m2"),
  };
  return table[type];
}

cudaError_t launchFill(void* dst, uint64_t n, const CaseParams& p, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatchType(p.type, [&](auto tag) {
    using T = decltype(tag);
    fillKernel<T><<<gridFor(n), kThreads, 0, stream>>>(static_cast<T*>(dst), n, p);
    return cudaGetLastError();
  });
}

cudaError_t launchCheckOutput(const void* out, uint64_t n, const CaseParams& p, CheckResult* res,
                              cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatchType(p.type, [&](auto tag) {
    using T = decltype(tag);
    checkOutputKernel<T><<<gridFor(n), kThreads, 0, stream>>>(static_cast<const T*>(out), n, p, res);
    return cudaGetLastError();
  });
}

cudaError_t launchCheckInput(const void* send, uint64_t n, const CaseParams& p, CheckResult* res,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatchType(p.type, [&](auto tag) {
    using T = decltype(tag);
    checkInputKernel<T><<<gridFor(n), kThreads, 0, stream>>>(static_cast<const T*>(send), n, p, res);
    return cudaGetLastError();
  });
}

cudaError_t launchCheckGuard(const void* ptr, uint64_t nbytes, unsigned char pattern, uint64_t indexBase,
                             CheckResult* res, cudaStream_t stream) {
  if (nbytes == 0) return cudaSuccess;
  checkGuardKernel<<<gridFor(nbytes), kThreads, 0, stream>>>(static_cast<const unsigned char*>(ptr), nbytes, pattern,
                                                               indexBase, res);
  return cudaGetLastError();
}

cudaError_t launchWriteScalar(void* dst, int type, double value, cudaStream_t stream) {
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    writeScalarKernel<T><<<1, 1, 0, stream>>>(static_cast<T*>(dst), value);
    return cudaGetLastError();
  });
}

cudaError_t launchCorrupt(void* buf, int type, uint64_t index, cudaStream_t stream) {
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    corruptKernel<T><<<1, 1, 0, stream>>>(static_cast<T*>(buf), index);
    return cudaGetLastError();
  });
}

cudaError_t loadSweepKernels() {
  size_t stack = 0;
  auto load = [&stack](const void* fn) {
    cudaFuncAttributes a{};
    const cudaError_t r = cudaFuncGetAttributes(&a, fn);
    stack = std::max(stack, a.localSizeBytes);
    return r;
  };
  cudaError_t e = load((const void*)checkGuardKernel);
  for (int type = 0; type < kNumTypes && e == cudaSuccess; ++type) {
    e = dispatchType(type, [&](auto tag) {
      using T = decltype(tag);
      for (const void* fn : {(const void*)fillKernel<T>, (const void*)checkOutputKernel<T>,
                             (const void*)checkInputKernel<T>, (const void*)writeScalarKernel<T>,
                             (const void*)corruptKernel<T>}) {
        const cudaError_t r = load(fn);
        if (r != cudaSuccess) return r;
      }
      return cudaSuccess;
    });
  }
  size_t current = 0;
  if (e == cudaSuccess) e = cudaDeviceGetLimit(&current, cudaLimitStackSize);
  if (e == cudaSuccess && stack > current) e = cudaDeviceSetLimit(cudaLimitStackSize, stack);
  return e;
}

}  // namespace sweep
