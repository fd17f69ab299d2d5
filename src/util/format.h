// printf into a std::string, for sentences built in pieces (error texts, reports).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace weft::util {

inline std::string formatText(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string formatText(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list again;
  va_copy(again, args);
  const int length = vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string text(length > 0 ? (size_t)length : 0, '\0');
  if (length > 0) vsnprintf(text.data(), text.size() + 1, fmt, again);
  va_end(again);
  return text;
}

}  // namespace weft::util
