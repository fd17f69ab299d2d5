#include "core/library.h"

#include <mutex>

#include "core/communicator.h"
#include "core/log.h"

namespace weft::core {

void initOnce() {
  static std::once_flag once;
  std::call_once(once, [] { log::printBannerOnce(); });
}

const char* lastErrorText(ncclComm_t comm) {
  if (comm != nullptr && comm->looksValid()) {
    if (const char* text = comm->lastError(); text[0] != '\0') return text;
  }
  const char* own = log::lastErrorOfThread();
  return own[0] != '\0' ? own : log::lastErrorOfProcess();
}

}  // namespace weft::core
