#include "harness_data.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstring>

namespace weft::harness {

using namespace weft::dev;

const char* typeName(int t) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                "half", "float", "double", "bf16", "e4m3", "e5m2"};
  return t >= 0 && t < kNumDataTypes ? names[t] : "?";
}
const char* opName(int op) {
  static const char* names[] = {"sum", "prod", "max", "min", "premulsum", "sumpostdiv"};
  return op >= 0 && op < kNumRedOps ? names[op] : "?";
}
const char* funcName(int f) {
  static const char* names[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv"};
  return f >= 0 && f < kNumFuncs ? names[f] : "?";
}
bool isFloatType(int t) { return t >= kFloat16; }

namespace {

double unitRoundoff(int t) {
  switch (t) {
    case kFloat16: return std::ldexp(1.0, -11);
    case kBfloat16: return std::ldexp(1.0, -8);
    case kFloat32: return std::ldexp(1.0, -24);
    case kFloat64: return std::ldexp(1.0, -53);
    case kFloat8e4m3: return std::ldexp(1.0, -4);
    default: return std::ldexp(1.0, -3);
  }
}

double toDouble(int t, const uint8_t* p) {
  switch (t) {
    case kFloat16: {
      __half_raw r;
      std::memcpy(&r.x, p, 2);
      return __half2float(__half(r));
    }
    case kBfloat16: {
      __nv_bfloat16_raw r;
      std::memcpy(&r.x, p, 2);
      return __bfloat162float(__nv_bfloat16(r));
    }
    case kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case kFloat8e4m3: return __half2float(__half(__nv_cvt_fp8_to_halfraw(*p, __NV_E4M3)));
    default: return __half2float(__half(__nv_cvt_fp8_to_halfraw(*p, __NV_E5M2)));
  }
}

void fromDouble(int t, double v, uint8_t* p) {
  switch (t) {
    case kFloat16: {
      __half_raw r = __half_raw(__float2half_rn((float)v));
      std::memcpy(p, &r.x, 2);
      break;
    }
    case kBfloat16: {
      __nv_bfloat16_raw r = __nv_bfloat16_raw(__float2bfloat16_rn((float)v));
      std::memcpy(p, &r.x, 2);
      break;
    }
    case kFloat32: {
      float f = (float)v;
      std::memcpy(p, &f, 4);
      break;
    }
    case kFloat64: std::memcpy(p, &v, 8); break;
    case kFloat8e4m3: *p = __nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E4M3); break;
    default: *p = __nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E5M2); break;
  }
}

uint64_t loadInt(int t, const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, dataTypeBytes(t));
  return v;
}

bool isSigned(int t) { return t == kInt8 || t == kInt32 || t == kInt64; }

int64_t signExtend(int t, uint64_t v) {
  int bits = 8 * dataTypeBytes(t);
  if (bits == 64) return (int64_t)v;
  uint64_t m = 1ull << (bits - 1);
  v &= (1ull << bits) - 1;
  return (int64_t)((v ^ m) - m);
}

}  // namespace

std::vector<uint8_t> makeInput(int type, uint64_t count, int rank, uint64_t seed, bool prodFriendly) {
  const int es = dataTypeBytes(type);
  std::vector<uint8_t> out(count * es);
  std::mt19937_64 rng(seed * 1000003ull + (uint64_t)rank * 7919ull + 17);
  static const double kProd[] = {-2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2};
  for (uint64_t i = 0; i < count; i++) {
    uint64_t r = rng();
    if (isFloatType(type)) {
      double v = prodFriendly ? kProd[r % 8] : (double)((int)(r % 17) - 8) / 4.0;
      fromDouble(type, v, &out[i * es]);
    } else {
      std::memcpy(&out[i * es], &r, es);
    }
  }
  return out;
}

uint64_t scalarBits(int type, int nRanks) {
  uint64_t bits = 0;
  if (isFloatType(type)) {
    uint8_t buf[8] = {};
    fromDouble(type, 1.0 / nRanks, buf);
    std::memcpy(&bits, buf, dataTypeBytes(type));
  } else {
    bits = 3;
  }
  return bits;
}

ReduceRef reduceRef(int type, int op, int n, const std::vector<const uint8_t*>& in, uint64_t count) {
  const int es = dataTypeBytes(type);
  ReduceRef ref;
  if (!isFloatType(type)) {
    ref.bytes.resize(count * es);
    const uint64_t mask = es == 8 ? ~0ull : ((1ull << (8 * es)) - 1);
    const uint64_t s = scalarBits(type, n);
    for (uint64_t i = 0; i < count; i++) {
      uint64_t acc = 0;
      for (int r = 0; r < n; r++) {
        uint64_t x = loadInt(type, in[r] + i * es);
        if (r == 0) {
          acc = op == kRedPreMulSum ? x * s : x;
          continue;
        }
        switch (op) {
          case kRedProd: acc = acc * x; break;
          case kRedMax:
          case kRedMin: {
            bool less = isSigned(type) ? signExtend(type, x) < signExtend(type, acc) : (x & mask) < (acc & mask);
            if ((op == kRedMin) == less) acc = x;
            break;
          }
          case kRedPreMulSum: acc = acc + x * s; break;
          default: acc = acc + x; break;
        }
      }
      acc &= mask;
      if (op == kRedSumPostDiv) {
        acc = isSigned(type) ? (uint64_t)(signExtend(type, acc) / (int64_t)n) : acc / (uint64_t)n;
        acc &= mask;
      }
      std::memcpy(&ref.bytes[i * es], &acc, es);
    }
    return ref;
  }
  const double u = unitRoundoff(type);
  uint8_t sbuf[8] = {};
  const uint64_t sb = scalarBits(type, n);
  std::memcpy(sbuf, &sb, 8);
  const double scalar = toDouble(type, sbuf);
  ref.value.resize(count);
  ref.tol.resize(count);
  for (uint64_t i = 0; i < count; i++) {
    double acc = 0, mag = 0;
    for (int r = 0; r < n; r++) {
      double x = toDouble(type, in[r] + i * es);
      if (op == kRedPreMulSum) x *= scalar;
      if (r == 0) acc = x;
      else if (op == kRedProd) acc *= x;
      else if (op == kRedMax) acc = std::fmax(acc, x);
      else if (op == kRedMin) acc = std::fmin(acc, x);
      else acc += x;
      mag += std::fabs(x);
    }
    ref.value[i] = acc;
    if (op == kRedMax || op == kRedMin) ref.tol[i] = 0;
    else if (op == kRedProd) ref.tol[i] = (n + 2) * u * std::fabs(acc);
    else ref.tol[i] = (n + 2) * u * mag;
  }
  return ref;
}

std::string checkReduce(int type, int op, const uint8_t* got, const ReduceRef& ref, uint64_t count) {
  const int es = dataTypeBytes(type);
  if (!isFloatType(type)) return checkBytes(got, ref.bytes.data(), count * es, "reduction");
  for (uint64_t i = 0; i < count; i++) {
    double g = toDouble(type, got + i * es);
    if (!(std::fabs(g - ref.value[i]) <= ref.tol[i])) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "element %llu: got %.9g want %.9g (bound %.3g)", (unsigned long long)i, g,
                    ref.value[i], ref.tol[i]);
      return buf;
    }
  }
  (void)op;
  return "";
}

std::string checkBytes(const uint8_t* got, const uint8_t* want, uint64_t nBytes, const char* what) {
  if (std::memcmp(got, want, nBytes) == 0) return "";
  for (uint64_t i = 0; i < nBytes; i++)
    if (got[i] != want[i]) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s: byte %llu of %llu: got 0x%02x want 0x%02x", what, (unsigned long long)i,
                    (unsigned long long)nBytes, got[i], want[i]);
      return buf;
    }
  return "";
}

std::string checkPoison(const uint8_t* buf, uint64_t from, uint64_t to, const char* what) {
  for (uint64_t i = from; i < to; i++)
    if (buf[i] != kPoison) {
      char msg[256];
      std::snprintf(msg, sizeof msg, "%s: byte %llu overwritten (0x%02x)", what, (unsigned long long)i, buf[i]);
      return msg;
    }
  return "";
}

}  // namespace weft::harness
