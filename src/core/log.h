// NCCL-compatible logging: NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE, and the
// "host:pid:tid [dev] NCCL INFO ..." line shape that users and their tools know.
#pragma once

#include <string>

namespace weft::log {

// Same numbering as NCCL's ncclDebugLogLevel (plugins receive these values).
enum class Level : int { None = 0, Version = 1, Warn = 2, Info = 3, Abort = 4, Trace = 5 };

// Subsystem bits, numbered as NCCL's ncclDebugLogSubSys.
using Subsys = unsigned long;
constexpr Subsys kInit = 0x1, kColl = 0x2, kP2p = 0x4, kShm = 0x8, kNet = 0x10, kGraph = 0x20,
                 kTuning = 0x40, kEnv = 0x80, kAlloc = 0x100, kCall = 0x200, kProxy = 0x400,
                 kNvls = 0x800, kBootstrap = 0x1000, kReg = 0x2000, kProfile = 0x4000, kRas = 0x8000,
                 kDestroy = 0x10000, kAllocHost = 0x20000, kAll = ~0UL;

// Settings as parsed from the environment; exposed so that parsing can be unit-tested.
struct Settings {
  Level level = Level::None;
  Subsys subsys = kInit | kBootstrap | kEnv;
  std::string file;          // NCCL_DEBUG_FILE after %h/%p expansion; empty = stdout
  unsigned timestampLevels = 1u << (int)Level::Warn;  // bit (1 << level): prefix with a timestamp
  std::string timestampFormat = "[%F %T] ";
};
Level parseLevel(const char* text);
Subsys parseSubsys(const char* text);  // "INIT,NET", "^COLL", "ALL"; unknown names are ignored
std::string expandFileName(const char* pattern, const std::string& host, int pid);
unsigned parseTimestampLevels(const char* text);

// True when a line of this level and subsystem would be written (reads the settings once).
bool enabled(Level level, Subsys subsys);

// Writes one line. Warnings are also remembered as the last error text (see lastError()).
void write(Level level, Subsys subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// The device shown in "[dev]": set by the runtime layer whenever a thread selects a device.
void setThreadDevice(int device);

// Forget the parsed settings; the next line re-reads the environment (ncclResetDebugInit).
void reset();

// The library's version banner ("NCCL version 2.28.9+cuda13.0 (weft x.y.z)"), printed once at
// VERSION level and above.
void printBannerOnce();

// Last warning text: per thread, and the newest one process-wide (for other threads' queries;
// returned as the calling thread's copy, valid until its next call).
const char* lastErrorOfThread();
const char* lastErrorOfProcess();
void clearLastError();

}  // namespace weft::log

#define WEFT_WARN(...) \
  ::weft::log::write(::weft::log::Level::Warn, ::weft::log::kAll, __FILE__, __LINE__, __VA_ARGS__)

#define WEFT_INFO(subsys, ...)                                                       \
  do {                                                                               \
    if (::weft::log::enabled(::weft::log::Level::Info, (subsys)))                     \
      ::weft::log::write(::weft::log::Level::Info, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define WEFT_TRACE(subsys, ...)                                                      \
  do {                                                                               \
    if (::weft::log::enabled(::weft::log::Level::Trace, (subsys)))                    \
      ::weft::log::write(::weft::log::Level::Trace, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
