// Parameters as NCCL users set them: NCCL_<NAME> in the environment, else in NCCL_CONF_FILE,
// else in ~/.nccl.conf, else in /etc/nccl.conf (KEY=VALUE lines, '#' comments).
// Each value is read once and cached; a value other than the default is logged under ENV.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace weft::param {

// The raw text for a full name ("NCCL_BUFFSIZE"), or nothing. Never logs.
std::optional<std::string> lookup(const char* name);

// Integer parameter (decimal, or 0x.. hex). An unparsable value is warned about once and the
// default is used.
int64_t getInt(const char* name, int64_t defaultValue);

// String parameter; the default when unset.
std::string getStr(const char* name, const std::string& defaultValue);

// A typed handle for a parameter used in several places:
//   constexpr weft::param::IntParam kBuffSize{"NCCL_BUFFSIZE", 4 << 20};
//   size_t bytes = kBuffSize.get();
struct IntParam {
  const char* name;
  int64_t defaultValue;
  int64_t get() const { return getInt(name, defaultValue); }
};

// Parses KEY=VALUE text as a config file does; exposed for tests.
bool parseConfLine(const std::string& line, std::string* key, std::string* value);

// Drops every cached value and the loaded config files; tests only.
void resetForTesting();

}  // namespace weft::param
