#include "enqueue/redop.h"

#include <cstring>

#include "core/call_check.h"
#include "core/comm_checks.h"
#include "core/communicator.h"
#include "device/arch/elem_types.h"
#include "device/functor_sample.h"

namespace weft::enqueue {

bool isFloatType(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: case ncclFloat32: case ncclFloat64: case ncclBfloat16: case ncclFloat8e4m3:
    case ncclFloat8e5m2: return true;
    default: return false;
  }
}

uint64_t scalarBits(double value, ncclDataType_t type) {
  uint64_t bits = 0;
  auto put = [&bits](const auto& v) { memcpy(&bits, &v, sizeof(v)); };
  switch (type) {
    case ncclInt8: put((int8_t)value); break;
    case ncclUint8: put((uint8_t)value); break;
    case ncclInt32: put((int32_t)value); break;
    case ncclUint32: put((uint32_t)value); break;
    case ncclInt64: put((int64_t)value); break;
    case ncclUint64: put((uint64_t)value); break;
    case ncclFloat16: put(__float2half((float)value)); break;
    case ncclFloat32: put((float)value); break;
    case ncclFloat64: put(value); break;
    case ncclBfloat16: put(__float2bfloat16((float)value)); break;
    case ncclFloat8e4m3: put(__nv_fp8_e4m3((float)value)); break;
    case ncclFloat8e5m2: put(__nv_fp8_e5m2((float)value)); break;
    default: break;
  }
  return bits;
}

namespace {

Status mapRedOp(ncclComm* comm, int op, ncclDataType_t type, const char* fn, Task* task) {
  switch (op) {
    case ncclSum: task->redOp = dev::kRedSum; return ncclSuccess;
    case ncclProd: task->redOp = dev::kRedProd; return ncclSuccess;
    case ncclMax: task->redOp = dev::kRedMax; return ncclSuccess;
    case ncclMin: task->redOp = dev::kRedMin; return ncclSuccess;
    case ncclAvg:
      if (isFloatType(type)) {
        task->redOp = dev::kRedPreMulSum;
        task->redOpArg = scalarBits(1.0 / comm->nRanks, type);
      } else {
        task->redOp = dev::kRedSumPostDiv;
        task->redOpArg = (uint64_t)comm->nRanks;
      }
      return ncclSuccess;
    default: break;
  }
  size_t index = (size_t)op - (size_t)ncclNumOps;
  bool known = op >= (int)ncclNumOps && index < comm->redOps.size() && comm->redOps[index].inUse;
  WEFT_CHECK_ARG(known, "%s: op %d is neither a built-in reduction nor an operation created on this communicator "
                 "by ncclRedOpCreatePreMulSum (or it was destroyed)", fn, op);
  const UserRedOp& u = comm->redOps[index];
  WEFT_CHECK_ARG(u.dataType == type, "%s: op %d was created for datatype %d but is used with datatype %d", fn, op,
                 (int)u.dataType, (int)type);
  task->redOp = dev::kRedPreMulSum;
  task->redOpArg = u.scalar;
  task->scalarOnDevice = u.onDevice;
  return ncclSuccess;
}

}  // namespace

Status resolveRedOp(ncclComm* comm, int op, ncclDataType_t type, const char* fn, Task* task) {
  WEFT_TRY(mapRedOp(comm, op, type, fn, task));
  task->callRedOp = op < (int)ncclNumOps ? (uint8_t)op : core::kUserRedOp;
  if (!dev::functorInKernels(task->redOp, task->dataType)) {
    WEFT_WARN("%s: this library is a compile-check build (WEFT_DEVICE_FUNCTOR_SAMPLE=ON): its kernels lack op %d "
              "on datatype %d; rebuild weft without that option", fn, op, (int)type);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

Status createPreMulSum(ncclComm* comm, ncclRedOp_t* op, void* scalar, int type, int residence) {
  WEFT_CHECK_ARG(op != nullptr, "ncclRedOpCreatePreMulSum: argument 'op' is NULL");
  WEFT_CHECK_ARG(scalar != nullptr, "ncclRedOpCreatePreMulSum: argument 'scalar' is NULL");
  WEFT_TRY(core::checkDataType(type, "ncclRedOpCreatePreMulSum"));
  WEFT_CHECK_ARG(residence == ncclScalarDevice || residence == ncclScalarHostImmediate,
                 "ncclRedOpCreatePreMulSum: residence %d is neither ncclScalarDevice nor ncclScalarHostImmediate",
                 residence);
  UserRedOp u;
  u.inUse = true;
  u.dataType = (ncclDataType_t)type;
  u.onDevice = residence == ncclScalarDevice;
  if (u.onDevice) {
    u.scalar = (uint64_t)(uintptr_t)scalar;
  } else {
    memcpy(&u.scalar, scalar, (size_t)dev::dataTypeBytes(u.dataType));
  }
  size_t slot = 0;
  while (slot < comm->redOps.size() && comm->redOps[slot].inUse) ++slot;
  if (slot == comm->redOps.size()) comm->redOps.push_back(u);
  else comm->redOps[slot] = u;
  *op = (ncclRedOp_t)(ncclNumOps + (int)slot);
  return ncclSuccess;
}

Status destroyRedOp(ncclComm* comm, int op) {
  size_t index = (size_t)op - (size_t)ncclNumOps;
  WEFT_CHECK_ARG(op < 0 || op >= (int)ncclNumOps,
                 "ncclRedOpDestroy: op %d is a built-in reduction (ncclSum to ncclAvg); only operations made by "
                 "ncclRedOpCreatePreMulSum are destroyed", op);
  WEFT_CHECK_ARG(op >= (int)ncclNumOps && index < comm->redOps.size() && comm->redOps[index].inUse,
                 "ncclRedOpDestroy: op %d was not created by ncclRedOpCreatePreMulSum on this communicator "
                 "(or is already destroyed)", op);
  comm->redOps[index] = UserRedOp{};
  return ncclSuccess;
}

}  // namespace weft::enqueue
