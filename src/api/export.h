// How entry points leave the library. Each public name is a weak, default-visibility definition,
// and its "p"-prefixed twin is a global alias of it (as NCCL does), so a profiling interposer can
// define a strong ncclX and forward to pncclX.
#pragma once

#include <cstring>
#include <type_traits>

#include "core/catching.h"
#include "core/log.h"
#include "enqueue/group.h"
#include "nccl.h"

#define WEFT_EXPORT __attribute__((visibility("default")))

#define WEFT_API(ret, name, ...)                                                   \
  extern "C" WEFT_EXPORT __attribute__((alias(#name))) ret p##name(__VA_ARGS__);   \
  extern "C" WEFT_EXPORT __attribute__((weak)) ret name(__VA_ARGS__)

namespace weft::api {

// Runs the body of an entry point; no C++ exception may cross the C ABI.
template <typename Body>
ncclResult_t guard(const char* function, Body&& body) noexcept {
  return core::callCatching(function, body);
}

// guard() for a call that may sit inside a group (collectives, communicator creations, splits):
// inside one, its error also fails the group, as NCCL's group error check does.
template <typename Body>
ncclResult_t guardGroupCall(const char* function, Body&& body) noexcept {
  const ncclResult_t s = guard(function, body);
  if (isError(s)) enqueue::failGroup(s);
  return s;
}

// The integer a caller passed for an enum-typed argument (ncclDataType_t, ncclRedOp_t, ...), read
// from its bytes. Loading an argument as the enum is undefined behaviour exactly when the argument
// check should fail (a value the enum cannot hold; UBSan: "not a valid value for type"), and a
// compiler may drop such a check. Entry points check these integers and convert them back to the
// enum only once they are known to be valid.
template <typename Enum>
int enumArg(const Enum& arg) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) == sizeof(int), "an int-sized enum");
  int value;
  std::memcpy(&value, &arg, sizeof value);
  return value;
}

// The answer of an entry point whose feature weft does not provide yet.
inline ncclResult_t notImplemented(const char* function, const char* why) {
  WEFT_WARN("%s is not implemented in weft yet (%s); see the README's list of unsupported calls", function, why);
  return ncclInvalidUsage;
}

}  // namespace weft::api
