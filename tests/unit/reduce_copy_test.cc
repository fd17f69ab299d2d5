// The device data mover (reduce/reduce_copy.cuh) and the reduction functors on the CPU, through
// the arch layer's host emulation: every thread of a group is run in turn. Checks that the
// vectorized paths (16-byte packs, common-misalignment heads and tails, word copies, element and
// byte-assembled slow paths) write every element exactly once with the same bits as the scalar
// functor, for every alignment case, and never touch the bytes around the output.
#define WEFT_ARCH_HOST_EMULATION 1
#include "device/reduce/reduce_copy.cuh"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace weft::dev {
namespace {

constexpr uint8_t kPoison = 0xA5;
constexpr size_t kPad = 64;

struct Buf {
  explicit Buf(size_t bytes) : data(bytes + 2 * kPad + 64) {}
  uint8_t* at(size_t off) {
    uintptr_t base = (reinterpret_cast<uintptr_t>(data.data()) + 63) & ~uintptr_t(63);
    return reinterpret_cast<uint8_t*>(base) + kPad + off;
  }
  std::vector<uint8_t> data;
};

template <typename T>
void fill(uint8_t* p, int64_t n, std::mt19937& rng) {
  for (int64_t i = 0; i < n; i++) {
    T v;
    if constexpr (std::is_integral<T>::value) {
      v = (T)rng();
    } else {
      float f = (float)((int)(rng() % 17) - 8) / 4.0f;
      if constexpr (std::is_same<T, __nv_fp8_e4m3>::value) v.__x = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
      else if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) v.__x = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2);
      else if constexpr (std::is_same<T, __half>::value) v = __float2half(f);
      else if constexpr (std::is_same<T, __nv_bfloat16>::value) v = __float2bfloat16(f);
      else v = (T)f;
    }
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
  }
}

// Runs one variant with the given byte offsets (relative to 64-byte aligned bases) and compares
// with the scalar functor. In place: the output aliases the own input (the last source).
template <typename Fn, int NSrcs, int NDsts, bool Pre, bool Post>
std::string check(const Fn& fn, int64_t n, const size_t off[4], bool inPlace, int nThreads, std::mt19937& rng) {
  using T = typename Fn::Elem;
  constexpr size_t S = sizeof(T);
  const size_t bytes = n * S + 32;
  Buf s0(bytes), s1(bytes), d0(bytes), d1(bytes);
  fill<T>(s0.at(off[0]), n, rng);
  fill<T>(s1.at(off[1]), n, rng);
  std::fill(d0.data.begin(), d0.data.end(), kPoison);
  std::fill(d1.data.begin(), d1.data.end(), kPoison);
  uint8_t* own = NSrcs == 2 ? s1.at(off[1]) : s0.at(off[0]);
  std::vector<uint8_t> ownCopy(own, own + n * S), otherCopy(s0.at(off[0]), s0.at(off[0]) + n * S);
  uint8_t* out0 = d0.at(off[2]);
  uint8_t* out1 = NDsts == 2 ? d1.at(off[3]) : nullptr;
  if (inPlace) {
    if (NDsts == 2) out1 = own;
    else out0 = own;
  }
  std::vector<uint8_t> want(n * S);
  for (int64_t i = 0; i < n; i++) {
    T a, b;
    std::memcpy(&a, (NSrcs == 2 ? otherCopy.data() : ownCopy.data()) + i * S, S);
    std::memcpy(&b, ownCopy.data() + i * S, S);
    T v;
    if constexpr (NSrcs == 2) v = Pre ? fn.reducePre(a, b) : fn.reduce(a, b);
    else v = Pre ? fn.preOp(a) : a;
    if constexpr (Post) v = fn.postOp(v);
    std::memcpy(&want[i * S], &v, S);
  }
  const void* src0 = NSrcs == 2 ? static_cast<const void*>(s0.at(off[0])) : static_cast<const void*>(own);
  const void* src1 = NSrcs == 2 ? static_cast<const void*>(own) : nullptr;
  for (int tid = 0; tid < nThreads; tid++)
    reduceCopy<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, nThreads, src0, src1, out0, out1, n);
  auto verify = [&](uint8_t* out, Buf* buf, const char* which) -> std::string {
    if (n > 0 && std::memcmp(out, want.data(), n * S) != 0) {  // want.data() is null when n == 0
      for (int64_t i = 0; i < n * (int64_t)S; i++)
        if (out[i] != want[i]) return std::string(which) + ": wrong byte " + std::to_string(i);
    }
    if (buf == nullptr) return "";
    for (size_t i = 0; i < buf->data.size(); i++) {
      const uint8_t* p = buf->data.data() + i;
      if (p >= out && p < out + n * S) continue;
      if (*p != kPoison) return std::string(which) + ": wrote outside the output";
    }
    return "";
  };
  std::string e = verify(out0, inPlace && NDsts == 1 ? nullptr : &d0, "dst0");
  if (e.empty() && NDsts == 2) e = verify(out1, inPlace ? nullptr : &d1, "dst1");
  return e;
}

template <typename Fn, int NSrcs, int NDsts, bool Pre, bool Post>
void sweep(const Fn& fn, const char* name) {
  using T = typename Fn::Elem;
  constexpr size_t S = sizeof(T);
  std::mt19937 rng(42);
  const std::vector<size_t> offs = {0, S, 2 * S, 16 - S, 8, 1};
  const int64_t sizes[] = {0, 1, 2, 3, 5, 15, 16, 17, 31, 33, 100, 257, 1000, 4099};
  int cases = 0;
  for (int64_t n : sizes)
    for (int k = 0; k < 24; k++) {
      size_t off[4];
      for (auto& o : off) o = k == 0 ? 0 : offs[rng() % offs.size()];
      if (k == 1) off[0] = off[1] = off[2] = off[3] = S;  // common misalignment: head + packs + tail
      for (bool inPlace : {false, true}) {
        if (inPlace && NSrcs != 2) continue;
        std::string e = check<Fn, NSrcs, NDsts, Pre, Post>(fn, n, off, inPlace, k % 2 ? 64 : 480, rng);
        ASSERT_EQ(e, "") << name << " <" << NSrcs << "," << NDsts << "," << Pre << "," << Post << "> n=" << n
                         << " offsets " << off[0] << "/" << off[1] << "/" << off[2] << "/" << off[3]
                         << (inPlace ? " in place" : "");
        cases++;
      }
    }
  EXPECT_GT(cases, 300);
}

template <typename Fn>
void allVariants(const Fn& fn, const char* name) {
  constexpr bool P = Fn::kPreOp, Q = Fn::kPostOp;
  sweep<Fn, 1, 1, false, false>(fn, name);   // recv / copy
  sweep<Fn, 1, 2, false, false>(fn, name);   // recvCopySend
  sweep<Fn, 1, 1, P, false>(fn, name);       // send of own input
  sweep<Fn, 1, 1, P, Q>(fn, name);           // local copy
  sweep<Fn, 2, 1, P, false>(fn, name);       // recvReduceSend
  sweep<Fn, 2, 1, P, Q>(fn, name);           // recvReduceCopy
  sweep<Fn, 2, 2, P, Q>(fn, name);           // recvReduceCopySend
}

TEST(ReduceCopy, IntegerSum) { allVariants(FnSum<uint8_t>{}, "sum u8"); allVariants(FnSum<uint64_t>{}, "sum u64"); }
TEST(ReduceCopy, IntegerMinMaxProd) {
  allVariants(FnMax<int8_t>{}, "max i8");
  allVariants(FnMin<uint8_t>{}, "min u8");
  allVariants(FnMin<int32_t>{}, "min i32");
  allVariants(FnProd<uint32_t>{}, "prod u32");
}
TEST(ReduceCopy, FloatTypes) {
  allVariants(FnSum<float>{}, "sum f32");
  allVariants(FnMin<double>{}, "min f64");
  allVariants(FnSum<__half>{}, "sum f16");
  allVariants(FnMax<__nv_bfloat16>{}, "max bf16");
  allVariants(FnSum<__nv_fp8_e4m3>{}, "sum e4m3");
  allVariants(FnMax<__nv_fp8_e5m2>{}, "max e5m2");
}
TEST(ReduceCopy, PreMulSumAndSumPostDiv) {
  FnPreMulSum<float> f;
  f.scalar = 0.5f;
  allVariants(f, "premulsum f32");
  FnPreMulSum<__nv_bfloat16> b;
  b.scalar = __float2bfloat16(0.25f);
  allVariants(b, "premulsum bf16");
  FnPreMulSum<__half> h;
  h.scalar = __float2half(1.5f);
  allVariants(h, "premulsum f16");
  FnPreMulSum<uint8_t> u;
  u.scalar = 3;
  allVariants(u, "premulsum u8");
  FnSumPostDiv<int8_t> d;
  d.divisor = 3;
  allVariants(d, "sumpostdiv i8");
  FnSumPostDiv<uint64_t> d64;
  d64.divisor = 7;
  allVariants(d64, "sumpostdiv u64");
}

// Pack functors against element functors on the same inputs (bit-identical by construction).
TEST(ReduceCopy, PackMathMatchesElements) {
  std::mt19937 rng(3);
  uint8_t a[16], b[16];
  for (int rep = 0; rep < 200; rep++) {
    for (int i = 0; i < 16; i++) a[i] = (uint8_t)rng(), b[i] = (uint8_t)rng();
    Pack16 pa, pb;
    std::memcpy(&pa, a, 16);
    std::memcpy(&pb, b, 16);
    Pack16 r = FnMax<int8_t>{}.reduce(pa, pb);
    for (int i = 0; i < 16; i++) ASSERT_EQ(((int8_t*)&r)[i], std::max((int8_t)a[i], (int8_t)b[i]));
    r = FnSum<uint8_t>{}.reduce(pa, pb);
    for (int i = 0; i < 16; i++) ASSERT_EQ(((uint8_t*)&r)[i], (uint8_t)(a[i] + b[i]));
  }
}

}  // namespace
}  // namespace weft::dev
