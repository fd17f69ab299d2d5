// CPU checks of the HIP build's own bfloat16 and fp8 conversions (device/arch/hip_types.h), which
// stand in for NVIDIA's on AMD: every fp8 code decodes to the value its format defines and encodes
// back to itself, halfway cases round to even, out-of-range values saturate, NaN stays NaN; bfloat16
// rounds to nearest even. Exits non-zero and names the first failures.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "device/arch/hip_types.h"

namespace {

int failures = 0;

void expect(bool ok, const char* what, double a, double b) {
  if (ok) return;
  if (++failures <= 20) std::printf("FAIL: %s (%.9g vs %.9g)\n", what, a, b);
}

using weft::dev::hipcompat::bf16ToFloat;
using weft::dev::hipcompat::floatToBf16;
using weft::dev::hipcompat::floatToFp8;
using weft::dev::hipcompat::fp8ToFloat;

// The value of fp8 code c from the format's definition, computed independently of hip_types.h.
double reference(int c, bool e4m3) {
  int mant = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, ebits = 7 - mant;
  int e = (c >> mant) & ((1 << ebits) - 1), m = c & ((1 << mant) - 1);
  double v = e == 0 ? std::ldexp((double)m, 1 - bias - mant) : std::ldexp(1.0 + m / (double)(1 << mant), e - bias);
  return (c & 0x80) ? -v : v;
}

bool isNanCode(int c, bool e4m3) {
  return e4m3 ? (c & 0x7f) == 0x7f : ((c >> 2) & 31) == 31 && (c & 3) != 0;
}

void fp8Format(bool e4m3) {
  const char* name = e4m3 ? "e4m3" : "e5m2";
  for (int c = 0; c < 256; c++) {
    float f = fp8ToFloat((uint8_t)c, e4m3);
    if (isNanCode(c, e4m3)) {
      expect(std::isnan(f), name, c, f);
      expect(std::isnan(fp8ToFloat(floatToFp8(f, e4m3), e4m3)), "NaN stays NaN", c, f);
      continue;
    }
    if (!e4m3 && ((c >> 2) & 31) == 31) {  // e5m2 infinities saturate to the largest finite value
      expect(std::isinf(f), "e5m2 infinity decodes", c, f);
      expect(floatToFp8(f, e4m3) == ((c & 0x80) | 0x7b), "e5m2 infinity saturates", c, floatToFp8(f, e4m3));
      continue;
    }
    expect(f == reference(c, e4m3), "decode matches the format", f, reference(c, e4m3));
    if (c != 0x80) expect(floatToFp8(f, e4m3) == c, "encode(decode(c)) == c", c, floatToFp8(f, e4m3));
  }
  // Halfway between neighbours rounds to the even code; a hair above rounds up.
  for (int c = 1; c < (e4m3 ? 0x7d : 0x7a); c++) {
    double lo = reference(c, e4m3), hi = reference(c + 1, e4m3), mid = (lo + hi) / 2;
    int even = (c % 2 == 0) ? c : c + 1;
    expect(floatToFp8((float)mid, e4m3) == even, "halfway rounds to even", mid, floatToFp8((float)mid, e4m3));
    expect(floatToFp8(std::nextafter((float)mid, 1e9f), e4m3) == c + 1, "above halfway rounds up", mid, c + 1);
    expect(floatToFp8(std::nextafter((float)mid, 0.f), e4m3) == c, "below halfway rounds down", mid, c);
  }
  float big = e4m3 ? 448.f : 57344.f;
  int maxCode = e4m3 ? 0x7e : 0x7b;
  expect(floatToFp8(1e30f, e4m3) == maxCode, "saturates large values", 1e30, floatToFp8(1e30f, e4m3));
  expect(floatToFp8(-1e30f, e4m3) == (0x80 | maxCode), "saturates large negative values", -1e30, 0);
  expect(floatToFp8(big * 1.07f, e4m3) == maxCode, "rounding past the largest value saturates", big, 0);
  expect(floatToFp8(1e-30f, e4m3) == 0, "underflows to zero", 1e-30, floatToFp8(1e-30f, e4m3));
  expect(__nv_cvt_float_to_fp8(1.0f, __NV_SATFINITE, e4m3 ? __NV_E4M3 : __NV_E5M2) == (e4m3 ? 0x38 : 0x3c),
         "1.0 encodes as the format defines", 1, 0);
}

void bf16() {
  expect(floatToBf16(1.0f) == 0x3f80, "bf16 1.0", floatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: rounds to even (1.0); 1 + 3 * 2^-8 rounds up.
  expect(floatToBf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80, "bf16 halfway to even", 0, 0);
  expect(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82, "bf16 halfway to even (odd)", 0, 0);
  expect(floatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81, "bf16 above halfway", 0, 0);
  expect(std::isnan(bf16ToFloat(floatToBf16(NAN))), "bf16 NaN", 0, 0);
  for (uint32_t b = 0; b < 0x10000; b++) {
    float f = bf16ToFloat((uint16_t)b);
    if (!std::isnan(f)) expect(floatToBf16(f) == b, "bf16 round trip", b, floatToBf16(f));
  }
  expect((float)__float2bfloat16(3.0f) == 3.0f, "__float2bfloat16", 3, 0);
}

}  // namespace

int main() {
  fp8Format(true);
  fp8Format(false);
  bf16();
  std::printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
