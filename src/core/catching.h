// Code that must let no C++ exception out (a C entry point, a thread's body): an exception becomes
// a status, with a warning naming `what`.
#pragma once

#include <exception>
#include <new>

#include "core/log.h"
#include "core/status.h"

namespace weft::core {

template <typename Body>
Status callCatching(const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    WEFT_WARN("%s: out of host memory", what);
    return ncclSystemError;
  } catch (const std::exception& e) {
    WEFT_WARN("%s: internal error: %s", what, e.what());
    return ncclInternalError;
  } catch (...) {
    WEFT_WARN("%s: internal error (unknown exception)", what);
    return ncclInternalError;
  }
}

}  // namespace weft::core
