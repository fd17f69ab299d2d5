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
    static thread_local char text[1024];  // the caller's copy: valid until its next call
    comm->copyLastError(text, sizeof(text));
    if (text[0] != '\0') return text;
  }
  const char* own = log::lastErrorOfThread();
  return own[0] != '\0' ? own : log::lastErrorOfProcess();
}

}  // namespace weft::core
