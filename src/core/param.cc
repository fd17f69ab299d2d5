#include "core/param.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "core/log.h"

namespace weft::param {
namespace {

struct Store {
  std::mutex mutex;
  bool filesLoaded = false;
  std::unordered_map<std::string, std::string> fromFiles;
  // What the environment or files said, parsed once. Empty means unset (or, for integers,
  // unparsable): the caller's default applies, and callers may pass different defaults.
  std::unordered_map<std::string, std::optional<int64_t>> ints;
  std::unordered_map<std::string, std::optional<std::string>> strs;
};

Store& store() {
  static Store* s = new Store();  // never destroyed: parameters may be read during exit
  return *s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Loads one file; keys already present (from a file of higher priority) are kept.
void loadFile(const std::string& path, std::unordered_map<std::string, std::string>* out) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, key, value;
  while (std::getline(in, line)) {
    if (parseConfLine(line, &key, &value)) out->emplace(key, value);
  }
}

void loadFilesLocked(Store& s) {
  if (s.filesLoaded) return;
  s.filesLoaded = true;
  if (const char* conf = getenv("NCCL_CONF_FILE"); conf && *conf) {
    loadFile(conf, &s.fromFiles);
    return;
  }
  if (const char* home = getenv("HOME"); home && *home) loadFile(std::string(home) + "/.nccl.conf", &s.fromFiles);
  loadFile("/etc/nccl.conf", &s.fromFiles);
}

std::optional<std::string> lookupLocked(Store& s, const char* name, const char** source) {
  if (const char* v = getenv(name)) {
    *source = "environment";
    return std::string(v);
  }
  loadFilesLocked(s);
  auto it = s.fromFiles.find(name);
  if (it == s.fromFiles.end()) return std::nullopt;
  *source = "configuration file";
  return it->second;
}

}  // namespace

bool parseConfLine(const std::string& raw, std::string* key, std::string* value) {
  std::string line = trim(raw);
  if (line.empty() || line[0] == '#') return false;
  size_t eq = line.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *key = trim(line.substr(0, eq));
  *value = trim(line.substr(eq + 1));
  return !key->empty();
}

std::optional<std::string> lookup(const char* name) {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  const char* source = nullptr;
  return lookupLocked(s, name, &source);
}

int64_t getInt(const char* name, int64_t defaultValue) {
  Store& s = store();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (auto it = s.ints.find(name); it != s.ints.end()) return it->second.value_or(defaultValue);
  const char* source = nullptr;
  std::optional<std::string> text = lookupLocked(s, name, &source);
  std::optional<int64_t> value;
  bool bad = false;
  if (text && !text->empty()) {
    errno = 0;
    char* end = nullptr;
    long long parsed = strtoll(text->c_str(), &end, 0);
    if (errno != 0 || end == text->c_str() || *end != '\0') bad = true;
    else value = parsed;
  }
  s.ints.emplace(name, value);
  lock.unlock();  // logging may read parameters itself
  if (bad) {
    WEFT_WARN("Invalid value '%s' for %s (from the %s): expected an integer, using the default %lld",
              text->c_str(), name, source, (long long)defaultValue);
  } else if (value && *value != defaultValue) {
    WEFT_INFO(log::kEnv, "%s set by %s to %lld", name, source, (long long)*value);
  }
  return value.value_or(defaultValue);
}

std::string getStr(const char* name, const std::string& defaultValue) {
  Store& s = store();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (auto it = s.strs.find(name); it != s.strs.end()) return it->second.value_or(defaultValue);
  const char* source = nullptr;
  std::optional<std::string> text = lookupLocked(s, name, &source);
  s.strs.emplace(name, text);
  lock.unlock();
  if (text && *text != defaultValue) WEFT_INFO(log::kEnv, "%s set by %s to %s", name, source, text->c_str());
  return text.value_or(defaultValue);
}

void resetForTesting() {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.filesLoaded = false;
  s.fromFiles.clear();
  s.ints.clear();
  s.strs.clear();
}

}  // namespace weft::param
