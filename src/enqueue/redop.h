// Reduction operations as the device sees them: built-in ops map directly, ncclAvg becomes a
// pre-multiplication by 1/n (floating types) or a division by n at the end (integers), and
// ncclRedOpCreatePreMulSum ops live in a per-communicator table.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "device/abi.h"
#include "enqueue/task.h"

struct ncclComm;

namespace weft::enqueue {

struct UserRedOp {
  bool inUse = false;
  ncclDataType_t dataType = ncclFloat32;
  bool onDevice = false;
  uint64_t scalar = 0;  // bits of the scalar (host immediate) or its device address
};

using RedOpTable = std::vector<UserRedOp>;

// Fills task->redOp / redOpArg / scalarOnDevice for `op` on `type`, or explains what is wrong.
// Operations come as integers, read from the callers' ncclRedOp_t arguments (api/export.h
// enumArg), since an invalid one is not a valid enum value; `type` is already checked.
[[nodiscard]] Status resolveRedOp(ncclComm* comm, int op, ncclDataType_t type, const char* fn, Task* task);

// The bits of `value` in the representation of `type` (zero-extended), for host-side scalars.
uint64_t scalarBits(double value, ncclDataType_t type);

// `type` and `residence` are the callers' enum arguments as integers, checked here.
[[nodiscard]] Status createPreMulSum(ncclComm* comm, ncclRedOp_t* op, void* scalar, int type, int residence);
[[nodiscard]] Status destroyRedOp(ncclComm* comm, int op);

bool isFloatType(ncclDataType_t type);

}  // namespace weft::enqueue
