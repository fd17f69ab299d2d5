// Watchdog: every rank notes what it is doing; if nothing is noted for `timeoutSec`, the notes are
// printed and the process exits with status 3, so that a hang in the library under test becomes a
// readable failure instead of a stuck job. Before it exits it prints every thread's stack when a
// debugger is at hand (cuda-gdb, else gdb; COLL_SWEEP_NO_STACKS=1 skips it): a hang's notes say which
// test, the stacks say which call (session 33 found a destroy-time cudaFree that way).
#include <sys/prctl.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

#include "sweep_host.h"

namespace sweep {

namespace {

constexpr int kMaxNotes = 64;

struct WatchState {
  std::mutex mu;
  std::string notes[kMaxNotes];
  std::atomic<double> last{0};
  int timeoutSec = 300;
};

WatchState& state() {
  static WatchState s;
  return s;
}

// Every thread's stack from a debugger attached to this process (it is our child, so this process
// allows the attach first: Yama's ptrace_scope 1 permits ancestors only).
void printStacks() {
  const char* off = std::getenv("COLL_SWEEP_NO_STACKS");
  if (off != nullptr && off[0] == '1') return;
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  char cmd[512];
  std::snprintf(cmd, sizeof(cmd),
                "d=$(command -v cuda-gdb || command -v gdb) && [ -n \"$d\" ] && echo \"stacks ($d):\" && "
                "timeout 120 \"$d\" -p %d -batch -ex 'thread apply all bt 30' 2>&1 | "
                "grep -E '^(Thread|#)' | grep -vE ' in (clone|start_thread) |libc.so.6$' | cut -c1-200",
                static_cast<int>(getpid()));
  std::fflush(stdout);
  (void)std::system(cmd);
  std::fflush(stdout);
}

void watchLoop() {
  WatchState& s = state();
  while (true) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (nowSec() - s.last.load() < s.timeoutSec) continue;
    std::lock_guard<std::mutex> lock(s.mu);
    std::printf("FAIL TIMEOUT: no progress for %d s (pid %d); this usually means a collective hangs. Last notes:\n",
                s.timeoutSec, static_cast<int>(getpid()));
    for (int r = 0; r < kMaxNotes; ++r) {
      if (!s.notes[r].empty()) std::printf("    rank %d: %s\n", r, s.notes[r].c_str());
    }
    printStacks();
    _exit(3);
  }
}

}  // namespace

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void watchStart(int timeoutSec) {
  WatchState& s = state();
  s.timeoutSec = timeoutSec;
  s.last = nowSec();
  std::thread(watchLoop).detach();
}

void watchNote(int rank, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  WatchState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.notes[rank % kMaxNotes] = buf;
  s.last = nowSec();
}

}  // namespace sweep
