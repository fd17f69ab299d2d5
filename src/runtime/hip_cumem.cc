// HIP build only (CMake leaves this file out of the CUDA build, and cumem.cc out of this one):
// the cuMem virtual-memory path does not exist here (runtime/gpu_api.h says why), so every
// shareable allocation is hipExtMallocWithFlags memory shared through a hipIpc handle.
#include "core/log.h"
#include "core/param.h"
#include "runtime/shareable_alloc.h"

namespace weft::runtime {

Status cuMemUsable(int device, bool* usable) {
  WEFT_CHECK_ARG(usable != nullptr, "cuMemUsable: usable is NULL");
  if (param::getInt("NCCL_CUMEM_ENABLE", -2) > 0) {
    WEFT_INFO(log::kAlloc, "NCCL_CUMEM_ENABLE is set, but the HIP build has no cuMem path: device %d shares "
              "memory through hipIpc handles", device);
  }
  *usable = false;
  return ncclSuccess;
}

}  // namespace weft::runtime
