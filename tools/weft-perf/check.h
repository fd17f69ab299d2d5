// Check mode: fill each rank's send operand with known values on the device, then compare every
// element of the receive operand (copied to the host) with a host reference.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "check_values.h"
#include "collective.h"

namespace weft::perf {

struct CheckSpec {
  Coll coll = Coll::AllReduce;
  ncclDataType_t type = ncclFloat;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  int nranks = 1;
  size_t count = 0;  // the CaseShape count
};

// The input family used for this case (exposed for the unit tests).
InputParams inputParams(const CheckSpec& spec);

// True when every result of this case is exactly representable, so it must match bit for bit.
bool resultIsExact(const CheckSpec& spec);

// The reference for element `index` of `rank`'s receive operand, as a double (all values are
// integers or, for avg, fractions well inside double precision). False when the rank has no
// defined output (non-root ranks of reduce and gather).
bool expectedValue(const CheckSpec& spec, int rank, size_t index, double* out);

// Starts filling `elems` elements at `dst` (on the current device) with `rank`'s input.
cudaError_t fillInput(const CheckSpec& spec, int rank, void* dst, size_t elems, cudaStream_t stream);

// Number of wrong elements among the `elems` elements at `host` (the receive operand of `rank`).
int64_t countWrong(const CheckSpec& spec, int rank, const void* host, size_t elems);

}  // namespace weft::perf
