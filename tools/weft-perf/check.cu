#include "check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <type_traits>
#include <vector>

namespace weft::perf {
namespace {

// Exact integer range and comparison bound per type (the bound is used only where results are
// not exact, i.e. avg of floating types).
struct TypeTraits {
  int64_t exactLimit;  // every integer in [-exactLimit, exactLimit] is representable
  double tolerance;    // relative bound for inexact results
};

TypeTraits traitsOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return {127, 0};
    case ncclUint8: return {255, 0};
    case ncclInt32: return {(int64_t)1 << 30, 0};
    case ncclUint32: return {(int64_t)1 << 31, 0};
    case ncclInt64:
    case ncclUint64: return {(int64_t)1 << 40, 0};
    case ncclFloat16: return {exactIntegerLimit(10), 1e-2};
    case ncclFloat32: return {exactIntegerLimit(23), 1e-5};
    case ncclFloat64: return {(int64_t)1 << 40, 1e-12};
    case ncclBfloat16: return {exactIntegerLimit(7), 3e-2};
    case ncclFloat8e4m3: return {exactIntegerLimit(3), 0.25};
    case ncclFloat8e5m2: return {exactIntegerLimit(2), 0.5};
    default: return {0, 0};
  }
}

// Wraps an exact integer result to what the type holds (integer arithmetic on the GPU wraps).
double wrapToType(int64_t v, ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return (double)(int8_t)v;
    case ncclUint8: return (double)(uint8_t)v;
    case ncclInt32: return (double)(int32_t)v;
    case ncclUint32: return (double)(uint32_t)v;
    case ncclUint64: return (double)(uint64_t)v;
    default: return (double)v;
  }
}

template <typename T>
__host__ __device__ T fromValue(int64_t v) {
  if constexpr (std::is_integral<T>::value) return (T)v;
  else if constexpr (std::is_same<T, double>::value) return (double)v;
  else return T((float)v);
}

template <typename T>
double toDouble(T x) {
  if constexpr (std::is_integral<T>::value || std::is_floating_point<T>::value) return (double)x;
  else if constexpr (std::is_same<T, __half>::value) return (double)__half2float(x);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return (double)__bfloat162float(x);
  else return (double)(float)x;  // the fp8 types
}

template <typename T>
__global__ void fillKernel(T* dst, size_t elems, InputParams params, int rank) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < elems; i += stride) {
    dst[i] = fromValue<T>(inputValue(params, rank, i));
  }
}

template <typename T>
cudaError_t launchFill(void* dst, size_t elems, const InputParams& params, int rank, cudaStream_t stream) {
  if (elems == 0) return cudaSuccess;
  const int threads = 256;
  const size_t blocks = std::min<size_t>((elems + threads - 1) / threads, 4096);
  fillKernel<T><<<(unsigned)blocks, threads, 0, stream>>>(static_cast<T*>(dst), elems, params, rank);
  return cudaGetLastError();
}

template <typename T>
int64_t countWrongTyped(const CheckSpec& spec, int rank, const void* host, size_t elems) {
  const T* got = static_cast<const T*>(host);
  const bool exact = resultIsExact(spec);
  const double tol = traitsOf(spec.type).tolerance;
  std::atomic<int64_t> wrong{0};
  auto checkRange = [&](size_t begin, size_t end) {
    int64_t local = 0;
    for (size_t i = begin; i < end; ++i) {
      double expected;
      if (!expectedValue(spec, rank, i, &expected)) continue;
      const double value = toDouble(got[i]);
      const bool ok = exact ? value == expected
                            : std::fabs(value - expected) <= tol * std::max(1.0, std::fabs(expected));
      local += ok ? 0 : 1;
    }
    wrong += local;
  };
  // Large outputs are checked by several host threads: a 8 GiB buffer is 2^31 floats.
  const size_t kPerThread = 1 << 22;
  const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const size_t nThreads = std::min<size_t>(hw, (elems + kPerThread - 1) / kPerThread);
  if (nThreads <= 1) {
    checkRange(0, elems);
  } else {
    std::vector<std::thread> pool;
    const size_t chunk = (elems + nThreads - 1) / nThreads;
    for (size_t t = 0; t < nThreads; ++t) {
      const size_t begin = t * chunk, end = std::min(elems, begin + chunk);
      if (begin < end) pool.emplace_back(checkRange, begin, end);
    }
    for (std::thread& th : pool) th.join();
  }
  return wrong.load();
}

// Calls f.template operator()<T>() for the C++ type of an NCCL datatype.
template <typename F>
auto dispatch(ncclDataType_t t, F&& f) {
  switch (t) {
    case ncclInt8: return f((int8_t*)nullptr);
    case ncclUint8: return f((uint8_t*)nullptr);
    case ncclInt32: return f((int32_t*)nullptr);
    case ncclUint32: return f((uint32_t*)nullptr);
    case ncclInt64: return f((int64_t*)nullptr);
    case ncclUint64: return f((uint64_t*)nullptr);
    case ncclFloat16: return f((__half*)nullptr);
    case ncclFloat64: return f((double*)nullptr);
    case ncclBfloat16: return f((__nv_bfloat16*)nullptr);
    case ncclFloat8e4m3: return f((__nv_fp8_e4m3*)nullptr);
    case ncclFloat8e5m2: return f((__nv_fp8_e5m2*)nullptr);
    case ncclFloat32:
    default: return f((float*)nullptr);
  }
}

}  // namespace

InputParams inputParams(const CheckSpec& spec) {
  InputParams p;
  p.nranks = spec.nranks;
  p.isUnsigned = isUnsignedType(spec.type);
  p.fp8 = spec.type == ncclFloat8e4m3 || spec.type == ncclFloat8e5m2;
  p.copyModulus = traitsOf(spec.type).exactLimit + 1;
  if (!info(spec.coll).reduces) {
    p.pattern = Pattern::Copy;
  } else {
    switch (spec.op) {
      case ncclSum: p.pattern = Pattern::Sum; break;
      case ncclProd: p.pattern = Pattern::Prod; break;
      case ncclAvg: p.pattern = Pattern::Avg; break;
      default: p.pattern = Pattern::Copy; break;  // max/min: exact for any representable value
    }
  }
  return p;
}

bool resultIsExact(const CheckSpec& spec) {
  if (!isFloatType(spec.type)) return true;  // integer results are exact modulo 2^bits
  const InputParams p = inputParams(spec);
  const int64_t limit = traitsOf(spec.type).exactLimit;
  switch (p.pattern) {
    case Pattern::Copy: return true;
    case Pattern::Sum: return (int64_t)(p.fp8 ? 1 : 4) * spec.nranks <= limit;
    case Pattern::Prod: {
      // Powers of two stay exact until they overflow the type.
      const int maxExponent = spec.type == ncclFloat16 ? 15 : spec.type == ncclFloat8e4m3 ? 8
                              : spec.type == ncclFloat8e5m2 ? 15 : 100;
      return spec.nranks <= maxExponent;
    }
    case Pattern::Avg: return false;  // avg may pre-multiply by 1/n
  }
  return false;
}

bool expectedValue(const CheckSpec& spec, int rank, size_t index, double* out) {
  const InputParams p = inputParams(spec);
  const size_t n = (size_t)spec.nranks, count = spec.count;
  auto reduceAt = [&](size_t srcIndex) {
    if (spec.op == ncclMax || spec.op == ncclMin) {
      int64_t acc = inputValue(p, 0, srcIndex);
      for (int r = 1; r < spec.nranks; ++r) {
        const int64_t v = inputValue(p, r, srcIndex);
        acc = spec.op == ncclMax ? std::max(acc, v) : std::min(acc, v);
      }
      return (double)acc;
    }
    int64_t acc = spec.op == ncclProd ? 1 : 0;
    for (int r = 0; r < spec.nranks; ++r) {
      const int64_t v = inputValue(p, r, srcIndex);
      acc = spec.op == ncclProd ? acc * v : acc + v;
    }
    if (spec.op == ncclAvg) {
      // Integers: NCCL sums, then divides (exact here by construction); floats: the true mean.
      return isFloatType(spec.type) ? (double)acc / (double)spec.nranks : wrapToType(acc / spec.nranks, spec.type);
    }
    return wrapToType(acc, spec.type);
  };
  switch (spec.coll) {
    case Coll::AllReduce:
      *out = reduceAt(index);
      return true;
    case Coll::Reduce:
      if (rank != spec.root) return false;
      *out = reduceAt(index);
      return true;
    case Coll::ReduceScatter:
      *out = reduceAt((size_t)rank * count + index);
      return true;
    case Coll::Gather:
      if (rank != spec.root) return false;
      [[fallthrough]];
    case Coll::AllGather:
      if (count == 0) return false;
      *out = (double)inputValue(p, (int)(index / count), index % count);
      return true;
    case Coll::Broadcast:
      *out = (double)inputValue(p, spec.root, index);
      return true;
    case Coll::Scatter:
      *out = (double)inputValue(p, spec.root, (size_t)rank * count + index);
      return true;
    case Coll::AlltoAll:
      if (count == 0) return false;
      *out = (double)inputValue(p, (int)(index / count), (size_t)rank * count + index % count);
      return true;
    case Coll::SendRecv:
      *out = (double)inputValue(p, (int)(((size_t)rank + n - 1) % n), index);
      return true;
  }
  return false;
}

cudaError_t fillInput(const CheckSpec& spec, int rank, void* dst, size_t elems, cudaStream_t stream) {
  const InputParams params = inputParams(spec);
  return dispatch(spec.type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    return launchFill<T>(dst, elems, params, rank, stream);
  });
}

int64_t countWrong(const CheckSpec& spec, int rank, const void* host, size_t elems) {
  return dispatch(spec.type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    return countWrongTyped<T>(spec, rank, host, elems);
  });
}

}  // namespace weft::perf
