#include "core/communicator.h"

#include <unistd.h>

#include <cstring>

#include "bootstrap/bootstrap.h"
#include "core/call_check.h"
#include "core/comm_window.h"
#include "core/op_ledger.h"
#include "core/peer_info.h"
#include "core/registrations.h"
#include "transport/p2p/p2p_connections.h"

ncclComm::ncclComm()
    : registrations(std::make_unique<weft::core::RegistrationTable>((size_t)sysconf(_SC_PAGESIZE))),
      windows(std::make_unique<weft::core::WindowTable>()) {}
ncclComm::~ncclComm() = default;

void ncclComm::copyLastError(char* out, size_t bytes) const {
  std::lock_guard<std::mutex> lock(lastErrorMutex_);
  snprintf(out, bytes, "%s", lastError_);
}

void ncclComm::setLastError(const char* text) {
  std::lock_guard<std::mutex> lock(lastErrorMutex_);
  snprintf(lastError_, sizeof(lastError_), "%s", text);
}
