// What the CPU tests of the dispatched device code share (flag_proto_test.cc,
// direct_emu_test.cc): emu_launch.h's ring communicator launching protocol P's kernel body with
// the real per-type dispatch (kernel_dispatch.cuh), and host-side element values of every type.
// Include it after defining WEFT_ARCH_HOST_EMULATION.
#pragma once

#include "device/coll/run_special.cuh"
#include "device/kernel_dispatch.cuh"
#include "emu_launch.h"
#include "enqueue/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace weft::dev::emutest {

template <typename P>
constexpr int threadsOf() {
  if constexpr (P::kId == kProtoLL) return kLLThreads;
  else if constexpr (P::kId == kProtoLL128) return kLL128Threads;
  else return kSimpleThreads;
}

// EmuRingComm whose items (any type and reduction) run through kernel_dispatch.cuh.
class DispatchComm : public EmuRingComm {
 public:
  using EmuRingComm::EmuRingComm;

  // Runs every rank's items (works[rank][channel]) as one launch of protocol P's kernel body, one
  // emulated block per channel with items. False if it did not finish in `seconds` (the abort
  // flag is then raised and every block must leave).
  template <typename P>
  bool launch(Works works, double seconds) {
    for (auto& perRank : works)
      for (auto& list : perRank)
        for (DevWork& w : list) w.proto = (uint8_t)P::kId;
    return EmuRingComm::launch<threadsOf<P>(), typename P::Shared>(
        works, seconds, [](const DevWork* w, const WorkEnvT<typename P::Shared>& env) { dispatch::runWork<P>(w, env); });
  }

  // Runs the items as one launch of the specialized kernel Kind (special_kernels.h) of protocol P,
  // after checking that the host would pick that kernel for every rank's launch
  // (specialKernelOfLaunch). *picked says whether it would; false if the launch did not finish.
  template <int Kind, typename P>
  bool launchSpecial(Works works, double seconds, bool* picked) {
    *picked = true;
    for (auto& perRank : works) {
      enqueue::PlannedLaunch launch;
      launch.proto = P::kId;
      for (auto& list : perRank) {
        for (DevWork& w : list) w.proto = (uint8_t)P::kId;
        launch.works.push_back(list);
      }
      if (enqueue::specialKernelOfLaunch(launch) != Kind) *picked = false;
    }
    return EmuRingComm::launch<threadsOf<P>(), typename P::Shared>(
        works, seconds, [](const DevWork* w, const WorkEnvT<typename P::Shared>& env) { runSpecialWork<Kind>(w, env); });
  }
};

// ---- element values of every type (DevDataType) on the host ----

inline bool isFloat(int t) { return t >= kFloat16; }
inline bool isUnsigned(int t) { return t == kUint8 || t == kUint32 || t == kUint64; }

inline void putValue(int t, double v, char* p) {
  switch (t) {
    case kInt8: case kUint8: { int8_t x = (int8_t)(int64_t)v; std::memcpy(p, &x, 1); break; }
    case kInt32: case kUint32: { int32_t x = (int32_t)(int64_t)v; std::memcpy(p, &x, 4); break; }
    case kInt64: case kUint64: { int64_t x = (int64_t)v; std::memcpy(p, &x, 8); break; }
    case kFloat16: { __half h = __float2half((float)v); std::memcpy(p, &h, 2); break; }
    case kBfloat16: { __nv_bfloat16 h = __float2bfloat16((float)v); std::memcpy(p, &h, 2); break; }
    case kFloat32: { float f = (float)v; std::memcpy(p, &f, 4); break; }
    case kFloat64: std::memcpy(p, &v, 8); break;
    case kFloat8e4m3: *p = (char)__nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E4M3); break;
    default: *p = (char)__nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E5M2); break;
  }
}

inline double getValue(int t, const char* p) {
  switch (t) {
    case kInt8: { int8_t x; std::memcpy(&x, p, 1); return x; }
    case kUint8: { uint8_t x; std::memcpy(&x, p, 1); return x; }
    case kInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case kUint32: { uint32_t x; std::memcpy(&x, p, 4); return x; }
    case kInt64: { int64_t x; std::memcpy(&x, p, 8); return (double)x; }
    case kUint64: { uint64_t x; std::memcpy(&x, p, 8); return (double)x; }
    case kFloat16: { __half h; std::memcpy(&h, p, 2); return __half2float(h); }
    case kBfloat16: { __nv_bfloat16 h; std::memcpy(&h, p, 2); return __bfloat162float(h); }
    case kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
    case kFloat64: { double d; std::memcpy(&d, p, 8); return d; }
    case kFloat8e4m3: return __half2float(__half(__nv_cvt_fp8_to_halfraw((uint8_t)*p, __NV_E4M3)));
    default: return __half2float(__half(__nv_cvt_fp8_to_halfraw((uint8_t)*p, __NV_E5M2)));
  }
}

// The PreMulSum scalar the tests use: exact in every type.
inline double scalarOf(int type) { return isFloat(type) ? 0.5 : 3.0; }

// DevWork.redOpArg for reduction op on type with nRanks ranks: PreMulSum's scalar, SumPostDiv's divisor.
inline uint64_t redOpArgOf(int op, int type, int nRanks) {
  uint64_t arg = 0;
  if (op == kRedPreMulSum) {
    char bits[8] = {};
    putValue(type, scalarOf(type), bits);
    std::memcpy(&arg, bits, 8);
  }
  if (op == kRedSumPostDiv) arg = (uint64_t)nRanks;
  return arg;
}

// The host reference of element j reduced over every rank's inputs (inputs[rank][j]), in rank order.
inline double reduceRef(int op, int type, const std::vector<std::vector<double>>& inputs, uint64_t j) {
  const int n = (int)inputs.size();
  double want = 0;
  for (int q = 0; q < n; q++) {
    double x = inputs[q][j];
    if (op == kRedPreMulSum) x *= scalarOf(type);
    if (q == 0) want = x;
    else if (op == kRedProd) want *= x;
    else if (op == kRedMax) want = std::max(want, x);
    else if (op == kRedMin) want = std::min(want, x);
    else want += x;
  }
  if (op == kRedSumPostDiv) want = std::trunc(want / n);
  return want;
}

}  // namespace weft::dev::emutest
