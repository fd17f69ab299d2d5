#include "core/communicator.h"

#include <cstring>

void ncclComm::setLastError(const char* text) {
  std::lock_guard<std::mutex> lock(lastErrorMutex_);
  strncpy(lastError_, text, sizeof(lastError_) - 1);
}
