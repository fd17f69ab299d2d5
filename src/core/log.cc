#include "core/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include "core/param.h"
#include "core/version.h"

namespace weft::log {
namespace {

constexpr size_t kLastErrorBytes = 1024;

struct State {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  Settings settings;
  FILE* out = stdout;
  bool bannerDone = false;
  char host[64] = "";
  char processLastError[kLastErrorBytes] = "";
};

State& state() {
  static State* s = new State();  // never destroyed: threads may log during exit
  return *s;
}

thread_local int tDevice = -1;
thread_local char tLastError[kLastErrorBytes] = "";

std::string paramText(const char* name) {
  std::optional<std::string> v = param::lookup(name);
  return v ? *v : std::string();
}

void initLocked(State& s) {
  if (s.ready.load(std::memory_order_relaxed)) return;
  Settings st;
  std::string level = paramText("NCCL_DEBUG");
  st.level = parseLevel(level.c_str());
  std::string subsys = paramText("NCCL_DEBUG_SUBSYS");
  if (!subsys.empty()) st.subsys = parseSubsys(subsys.c_str());
  std::string tsLevels = paramText("NCCL_DEBUG_TIMESTAMP_LEVELS");
  if (!tsLevels.empty()) st.timestampLevels = parseTimestampLevels(tsLevels.c_str());
  if (auto fmt = param::lookup("NCCL_DEBUG_TIMESTAMP_FORMAT")) st.timestampFormat = *fmt;

  gethostname(s.host, sizeof(s.host) - 1);
  if (char* dot = strchr(s.host, '.')) *dot = '\0';

  if (s.out != stdout && s.out != nullptr) fclose(s.out);
  s.out = stdout;
  std::string file = paramText("NCCL_DEBUG_FILE");
  if (!file.empty() && st.level > Level::None) {
    st.file = expandFileName(file.c_str(), s.host, (int)getpid());
    if (FILE* f = fopen(st.file.c_str(), "w")) {
      setvbuf(f, nullptr, _IOLBF, 0);
      s.out = f;
    }
  }
  s.settings = st;
  s.ready.store(true, std::memory_order_release);
}

const Settings& settings() {
  State& s = state();
  if (!s.ready.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(s.mutex);
    initLocked(s);
  }
  return s.settings;
}

const char* levelName(Level level) {
  switch (level) {
    case Level::Version: return "VERSION";
    case Level::Warn: return "WARN";
    case Level::Info: return "INFO";
    case Level::Abort: return "ABORT";
    case Level::Trace: return "TRACE";
    default: return "";
  }
}

struct SubsysName { const char* name; Subsys bits; };
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kInit}, {"COLL", kColl}, {"P2P", kP2p}, {"SHM", kShm}, {"NET", kNet},
    {"GRAPH", kGraph}, {"TUNING", kTuning}, {"ENV", kEnv}, {"ALLOC", kAlloc}, {"CALL", kCall},
    {"PROXY", kProxy}, {"NVLS", kNvls}, {"BOOTSTRAP", kBootstrap}, {"REG", kReg},
    {"PROFILE", kProfile}, {"RAS", kRas}, {"DESTROY", kDestroy}, {"ALLOC_HOST", kAllocHost},
    {"ALL", kAll}};

}  // namespace

Level parseLevel(const char* text) {
  if (text == nullptr) return Level::None;
  if (!strcasecmp(text, "VERSION")) return Level::Version;
  if (!strcasecmp(text, "WARN")) return Level::Warn;
  if (!strcasecmp(text, "INFO")) return Level::Info;
  if (!strcasecmp(text, "ABORT")) return Level::Abort;
  if (!strcasecmp(text, "TRACE")) return Level::Trace;
  return Level::None;
}

Subsys parseSubsys(const char* text) {
  if (text == nullptr || *text == '\0') return kInit | kBootstrap | kEnv;
  bool invert = text[0] == '^';
  if (invert) text++;
  Subsys mask = 0;
  std::string list(text);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string name = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const SubsysName& s : kSubsysNames) {
      if (!strcasecmp(name.c_str(), s.name)) mask |= s.bits;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

unsigned parseTimestampLevels(const char* text) {
  if (text == nullptr) return 1u << (int)Level::Warn;
  bool invert = text[0] == '^';
  if (invert) text++;
  unsigned bits = 0;
  std::string list(text);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string name = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!strcasecmp(name.c_str(), "ALL")) bits = ~0u;
    else if (Level l = parseLevel(name.c_str()); l != Level::None) bits |= 1u << (int)l;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~bits : bits;
}

std::string expandFileName(const char* pattern, const std::string& host, int pid) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') { out += host; ++p; }
    else if (p[0] == '%' && p[1] == 'p') { out += std::to_string(pid); ++p; }
    else if (p[0] == '%' && p[1] == '%') { out += '%'; ++p; }
    else out += *p;
  }
  return out;
}

bool enabled(Level level, Subsys subsys) {
  const Settings& st = settings();
  if ((int)level > (int)st.level) return false;
  return level <= Level::Warn || (st.subsys & subsys) != 0;
}

void write(Level level, Subsys subsys, const char* file, int line, const char* fmt, ...) {
  char message[kLastErrorBytes];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);

  State& s = state();
  if (level == Level::Warn) {
    snprintf(tLastError, kLastErrorBytes, "%s", message);
    std::lock_guard<std::mutex> lock(s.mutex);
    snprintf(s.processLastError, kLastErrorBytes, "%s", message);
  }
  if (!enabled(level, subsys)) return;

  char stamp[64] = "";
  const Settings& st = settings();
  if (st.timestampLevels & (1u << (int)level)) {
    time_t now = time(nullptr);
    struct tm tmNow;
    localtime_r(&now, &tmNow);
    strftime(stamp, sizeof(stamp), st.timestampFormat.c_str(), &tmNow);
  }
  int tid = (int)syscall(SYS_gettid);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (level == Level::Warn) {
    fprintf(s.out, "%s%s:%d:%d [%d] %s:%d NCCL WARN %s\n", stamp, s.host, (int)getpid(), tid, tDevice,
            base, line, message);
  } else {
    fprintf(s.out, "%s%s:%d:%d [%d] NCCL %s %s\n", stamp, s.host, (int)getpid(), tid, tDevice,
            levelName(level), message);
  }
  fflush(s.out);
}

void setThreadDevice(int device) { tDevice = device; }

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.ready.store(false, std::memory_order_release);
  s.bannerDone = false;
}

void printBannerOnce() {
  const Settings& st = settings();
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.bannerDone) return;
    s.bannerDone = true;
  }
  if (st.level < Level::Version) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  fprintf(s.out, "%s:%d:%d [%d] NCCL INFO NCCL version %s (weft %s, %s)\n", s.host, (int)getpid(),
          (int)syscall(SYS_gettid), tDevice, version::kNcclBanner, version::kWeft, version::kGpuRuntime);
  fflush(s.out);
}

const char* lastErrorOfThread() { return tLastError; }

const char* lastErrorOfProcess() {
  // Other threads write it under the lock: the caller gets a copy of its own (valid until its next call).
  static thread_local char copy[kLastErrorBytes];
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  snprintf(copy, sizeof(copy), "%s", s.processLastError);
  return copy;
}

void clearLastError() { tLastError[0] = '\0'; }

}  // namespace weft::log
