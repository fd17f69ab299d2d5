// The HIP build's header from C++ (PyTorch includes it from C++ with hip_runtime.h already in).
#include <hip/hip_runtime.h>
#include <rccl/rccl.h>

static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes in RCCL too");
static_assert(ncclNumResults == 8, "RCCL's ncclResult_t ends at ncclInProgress");
static_assert(ncclFloat8e4m3 == 10 && ncclNumTypes == 12, "RCCL 2.22+ data type values");
