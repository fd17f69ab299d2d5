// The input values of check mode. Every element is a small integer chosen from (rank, index), with
// ranges picked per datatype and operation so that every result NCCL computes is exactly
// representable: sums of at most 4*nranks, products of +-1 and 2, copies within the type's exact
// integer range. A host reference can then demand exact equality; only avg is compared with a bound.
// Shared by the fill kernel (device), the checker (host) and the unit tests.
#pragma once

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define WEFT_PERF_HD __host__ __device__
#else
#define WEFT_PERF_HD
#endif

namespace weft::perf {

enum class Pattern : int {
  Copy,    // collectives that move data: distinct values over a wide range
  Sum,     // sum: values in [-4, 4] ([0, 8] unsigned, [-1, 1] for fp8)
  Prod,    // prod: values in {1, -1, 2} ({1, 2} unsigned)
  Avg,     // avg: base(index) plus a rank term that cancels over all ranks, so the mean is exact
};

struct InputParams {
  Pattern pattern = Pattern::Copy;
  int nranks = 1;
  int64_t copyModulus = 127;  // Copy values are in [0, copyModulus)
  bool isUnsigned = false;
  bool fp8 = false;           // tiny exact-integer range: Sum and Avg use +-1 steps
};

WEFT_PERF_HD inline int64_t positiveMod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// The value of element `index` of `rank`'s input.
WEFT_PERF_HD inline int64_t inputValue(const InputParams& p, int rank, size_t index) {
  const int64_t i = (int64_t)(index & 0x3fffffffffffULL);  // keeps the arithmetic below in range
  const int64_t r = rank;
  switch (p.pattern) {
    case Pattern::Copy:
      return positiveMod(r * 131 + i * 7919 + (i >> 8) * 3, p.copyModulus);
    case Pattern::Sum: {
      if (p.fp8) return positiveMod(r * 7 + i * 13 + (i >> 5), 3) - 1;
      int64_t v = positiveMod(r * 7 + i * 13 + (i >> 5), 9);
      return p.isUnsigned ? v : v - 4;
    }
    case Pattern::Prod:
      if (positiveMod(r + i, 5) == 0) return 2;
      if (!p.isUnsigned && positiveMod(r * 3 + i, 3) == 0) return -1;
      return 1;
    case Pattern::Avg: {
      int64_t base = p.fp8 ? positiveMod(i * 13 + (i >> 5), 3) - 1 : positiveMod(i * 13 + (i >> 5), 7) - 3;
      if (p.isUnsigned) base += 4;  // [1, 7]: base + rank term stays >= 0
      // +1/-1 alternating; the last rank of an odd count adds 0, so the terms sum to zero.
      int64_t delta = (p.nranks % 2 == 1 && rank == p.nranks - 1) ? 0 : (rank % 2 == 0 ? 1 : -1);
      return base + delta;
    }
  }
  return 0;
}

// Largest integer N such that every integer in [-N, N] is exact in a type with `mantissaBits`
// explicit fraction bits.
constexpr int64_t exactIntegerLimit(int mantissaBits) { return (int64_t)1 << (mantissaBits + 1); }

}  // namespace weft::perf
