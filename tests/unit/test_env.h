// Helpers for unit tests that change the environment or the log settings. Every change is undone
// when the helper goes out of scope, and the parameter cache and log settings are re-read, so tests
// stay independent whether ctest runs them one per process or the binary runs them all at once.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/param.h"

namespace weft::test {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sets (or unsets) environment variables for one scope.
class ScopedEnv {
 public:
  ScopedEnv() { refresh(); }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
    refresh();
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  ScopedEnv& set(const char* name, const std::string& value) {
    remember(name);
    setenv(name, value.c_str(), 1);
    refresh();
    return *this;
  }
  ScopedEnv& unset(const char* name) {
    remember(name);
    unsetenv(name);
    refresh();
    return *this;
  }

 private:
  void remember(const char* name) {
    const char* old = getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
  }
  static void refresh() {
    weft::param::resetForTesting();
    weft::log::reset();
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A fresh directory under /tmp, removed with its files at scope exit.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/weft-test-XXXXXX";
    const char* made = mkdtemp(pattern);
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

}  // namespace weft::test
