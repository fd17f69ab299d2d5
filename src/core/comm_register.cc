#include "core/comm_register.h"

#include <cstdint>

#include "core/buffer_checks.h"
#include "core/comm_checks.h"
#include "core/communicator.h"
#include "core/param.h"
#include "core/registrations.h"
#include "transport/p2p/p2p_connections.h"

namespace weft::core {

Status registerBuffer(ncclComm* comm, void* buff, size_t size, void** handle, const char* fn) {
  WEFT_TRY(checkCommHandle(comm, fn));
  WEFT_CHECK_ARG(handle != nullptr, "%s: argument 'handle' is NULL", fn);
  *handle = nullptr;
  if (size == 0) {
    WEFT_INFO(log::kReg, "%s: rank %d: size 0, nothing to register (NULL handle)", fn, comm->rank);
    return ncclSuccess;
  }
  WEFT_CHECK_ARG(buff != nullptr, "%s: argument 'buff' is NULL (size %zu)", fn, size);
  const size_t pageBytes = comm->registrations->pageBytes();
  WEFT_CHECK_ARG(size <= UINTPTR_MAX - pageBytes && (uintptr_t)buff <= UINTPTR_MAX - pageBytes - size,
                 "%s: buff %p and size %zu run past the end of the address space; the size is wrong", fn, buff,
                 size);
  static const bool localRegister = param::getInt("NCCL_LOCAL_REGISTER", 1) != 0;
  if (!localRegister) {
    WEFT_INFO(log::kReg, "%s: NCCL_LOCAL_REGISTER=0: buff %p not registered (NULL handle)", fn, buff);
    return ncclSuccess;
  }
  WEFT_TRY(checkPointer(comm, fn, {"buff", buff, size}, nullptr));  // memory no collective could use
  Registration kept;
  *handle = comm->registrations->add((uintptr_t)buff, size, &kept);
  WEFT_INFO(log::kReg, "%s: rank %d: buff %p (%zu bytes) -> handle %p, pages [%#zx, %#zx), %d reference(s)", fn,
            comm->rank, buff, size, *handle, (size_t)kept.begin, (size_t)kept.end, kept.refs);
  return ncclSuccess;
}

Status deregisterBuffer(ncclComm* comm, void* handle, const char* fn) {
  WEFT_TRY(checkCommHandle(comm, fn));
  if (handle == nullptr) return ncclSuccess;  // what ncclCommRegister gives when it registers nothing
  bool released = false;
  if (!comm->registrations->remove(handle, &released)) {
    WEFT_WARN(
        "%s: handle %p is not a registration of this communicator (rank %d): it was "
        "deregistered as often as it was registered, made by another communicator, or never came from "
        "ncclCommRegister",
        fn, handle, comm->rank);
    return ncclInvalidUsage;
  }
  // Peers that mapped it for zero-copy sends unmap it at their next launch.
  if (released && comm->p2p && comm->p2p->sharing()) comm->p2p->sharing()->withdraw(comm, (uint64_t)(uintptr_t)handle);
  WEFT_INFO(log::kReg, "%s: rank %d: handle %p released (%zu registration(s) left)", fn, comm->rank, handle,
            comm->registrations->size());
  return ncclSuccess;
}

}  // namespace weft::core
