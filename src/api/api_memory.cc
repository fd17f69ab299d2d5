// ncclMemAlloc / ncclMemFree: device memory that NCCL can share with peers cheaply (cuMem with
// POSIX fd handles, mapped for every P2P-capable device; cudaMalloc where cuMem is unusable).
// ncclCommRegister / ncclCommDeregister: a communicator's registered buffers (core/comm_register.h).
// ncclCommWindowRegister / ncclCommWindowDeregister: registrations made by all ranks together
// (core/comm_window.h).
#include "api/export.h"
#include "core/comm_register.h"
#include "core/comm_window.h"
#include "core/status.h"
#include "runtime/mem_alloc.h"

WEFT_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  return weft::api::guard("ncclMemAlloc", [&]() -> ncclResult_t {
    WEFT_CHECK_ARG(ptr != nullptr, "ncclMemAlloc: argument 'ptr' is NULL");
    if (size == 0) {
      *ptr = nullptr;
      return ncclSuccess;
    }
    WEFT_TRY(weft::runtime::memAlloc(ptr, size));
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclMemFree, void* ptr) {
  return weft::api::guard("ncclMemFree", [&]() -> ncclResult_t {
    WEFT_TRY(weft::runtime::memFree(ptr));
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return weft::api::guard("ncclCommRegister", [&]() -> ncclResult_t {
    return weft::core::registerBuffer(comm, buff, size, handle);
  });
}

WEFT_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return weft::api::guard("ncclCommDeregister", [&]() -> ncclResult_t {
    return weft::core::deregisterBuffer(comm, handle);
  });
}

WEFT_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  return weft::api::guard("ncclCommWindowRegister", [&]() -> ncclResult_t {
    return weft::core::registerWindow(comm, buff, size, reinterpret_cast<void**>(win), winFlags);
  });
}

WEFT_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return weft::api::guard("ncclCommWindowDeregister", [&]() -> ncclResult_t {
    return weft::core::deregisterWindow(comm, win);
  });
}
