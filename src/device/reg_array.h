// A small array indexed at run time that stays in registers. A plain array member indexed by a
// run-time value (e.g. slice % depth, or a peer number) is placed in local memory, and a kernel's
// first touches of local memory cost about 1 us per launch on H200 (tools/launch_floor.cu:
// 512 B of stack took a graph-launched kernel from 0.6 to 1.6 us). get/set compare the index
// with every slot, so each access is N selects on registers; meant for N of 2 to 8.
#pragma once

#include "device/abi.h"
#include "device/arch/arch.cuh"

namespace weft::dev {

template <typename T, int N>
struct RegArray {
  T v[N];

  WEFT_DEV T get(int i) const {
    T r = v[0];
WEFT_UNROLL
    for (int k = 1; k < N; k++) r = i == k ? v[k] : r;
    return r;
  }
  WEFT_DEV void set(int i, T x) {
WEFT_UNROLL
    for (int k = 0; k < N; k++) v[k] = i == k ? x : v[k];
  }
};

}  // namespace weft::dev
