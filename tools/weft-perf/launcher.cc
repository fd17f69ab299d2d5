#include "launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "runner.h"

namespace weft::perf {
namespace {

constexpr uint32_t kWireMagic = 0x77706572;  // "wper"

struct WireRecord {
  uint32_t magic;
  uint32_t caseIndex;
  PartialResult result;
};

bool writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool readAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;  // EOF: the process ended early
    p += r;
    n -= (size_t)r;
  }
  return true;
}

class PipeSink : public ResultSink {
 public:
  explicit PipeSink(int fd) : fd_(fd) {}
  bool submit(size_t caseIndex, const PartialResult& result) override {
    WireRecord rec{kWireMagic, (uint32_t)caseIndex, result};
    return writeAll(fd_, &rec, sizeof(rec));
  }

 private:
  int fd_;
};

struct Pipe {
  int read = -1, write = -1;
};

void closeFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// The child side: process `p` of the run.
[[noreturn]] void childMain(const Options& opts, const std::vector<Case>& cases, int p, std::vector<Pipe>& idPipes,
                            std::vector<Pipe>& resultPipes) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
  signal(SIGPIPE, SIG_IGN);          // a vanished reader shows up as a write error instead
  // WEFT_PERF_HOSTS=H: the processes pretend to be on H hosts (NCCL_HOSTID, which NCCL reads too),
  // so that one machine measures the network transport between them.
  if (const char* hosts = getenv("WEFT_PERF_HOSTS"); hosts != nullptr && atoi(hosts) > 1) {
    const std::string hostId = "perf-host-" + std::to_string(p * atoi(hosts) / (int)resultPipes.size());
    setenv("NCCL_HOSTID", hostId.c_str(), 1);
  }
  for (size_t q = 0; q < resultPipes.size(); ++q) {
    closeFd(&resultPipes[q].read);
    if ((int)q != p) closeFd(&resultPipes[q].write);
    if ((int)q != p) closeFd(&idPipes[q].read);
    if (p != 0) closeFd(&idPipes[q].write);
  }
  auto getId = [&](ncclUniqueId* id) {
    if (p == 0) {
      if (!getUniqueId(id)) return false;
      for (size_t q = 1; q < idPipes.size(); ++q) {
        if (!writeAll(idPipes[q].write, id, sizeof(*id))) return false;
        closeFd(&idPipes[q].write);
      }
      return true;
    }
    return readAll(idPipes[p].read, id, sizeof(*id));
  };
  PipeSink sink(resultPipes[p].write);
  const int rc = runProcess(opts, p, cases, getId, &sink);
  fflush(stdout);
  fflush(stderr);
  _exit(rc);
}

std::vector<pid_t>& childPids() {
  static std::vector<pid_t> pids;
  return pids;
}

void killChildren() {
  for (pid_t pid : childPids()) {
    if (pid > 0) kill(pid, SIGKILL);
  }
}

// Waits for every child; the ones still running after `graceMs` (stuck waiting for a peer that
// died) are killed. Returns the exit codes.
std::vector<int> reapChildren(int graceMs) {
  std::vector<pid_t>& pids = childPids();
  std::vector<int> codes(pids.size(), -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(graceMs);
  size_t remaining = pids.size();
  bool killed = false;
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      pid_t r = waitpid(pids[i], &status, killed ? 0 : WNOHANG);
      if (r == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        pids[i] = -1;
        --remaining;
      } else if (r < 0 && errno != EINTR) {
        pids[i] = -1;
        --remaining;
      }
    }
    if (remaining > 0 && !killed) {
      if (std::chrono::steady_clock::now() >= deadline) {
        killChildren();
        killed = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  return codes;
}

}  // namespace

int runProcesses(const Options& opts, const std::vector<Case>& cases, ResultSink* printer) {
  const int nprocs = opts.processes;
  std::vector<Pipe> idPipes(nprocs), resultPipes(nprocs);
  for (int p = 0; p < nprocs; ++p) {
    int fds[2];
    if (pipe(fds) != 0) {
      perror("weft-perf: pipe");
      return kExitFailure;
    }
    resultPipes[p] = {fds[0], fds[1]};
    if (p == 0) continue;  // process 0 makes the id; it needs no id pipe
    if (pipe(fds) != 0) {
      perror("weft-perf: pipe");
      return kExitFailure;
    }
    idPipes[p] = {fds[0], fds[1]};
  }
  // Buffered output would be written once by the parent and once more by each child.
  fflush(stdout);
  fflush(stderr);
  childPids().assign(nprocs, -1);
  for (int p = 0; p < nprocs; ++p) {
    const pid_t pid = fork();
    if (pid < 0) {
      perror("weft-perf: fork");
      killChildren();
      reapChildren(0);
      return kExitFailure;
    }
    if (pid == 0) childMain(opts, cases, p, idPipes, resultPipes);
    childPids()[p] = pid;
  }
  for (int p = 0; p < nprocs; ++p) {
    closeFd(&resultPipes[p].write);
    closeFd(&idPipes[p].read);
    closeFd(&idPipes[p].write);
  }
  startWatchdog(opts.timeoutSec, killChildren);

  bool complete = true;
  for (size_t k = 0; k < cases.size() && complete; ++k) {
    PartialResult total;
    for (int p = 0; p < nprocs; ++p) {
      WireRecord rec;
      if (!readAll(resultPipes[p].read, &rec, sizeof(rec)) || rec.magic != kWireMagic || rec.caseIndex != k) {
        complete = false;
        break;
      }
      combine(&total, rec.result);
    }
    if (complete) printer->submit(k, total);
  }
  // After a failure the other processes may wait forever for the dead one; give them a moment
  // to report their own errors, then kill them.
  const std::vector<int> codes = reapChildren(complete ? 60000 : 2000);
  for (int p = 0; p < nprocs; ++p) closeFd(&resultPipes[p].read);
  int rc = complete ? kExitOk : kExitFailure;
  for (int code : codes) {
    if (code == kExitNoGpu) return kExitNoGpu;
  }
  for (int p = 0; p < nprocs; ++p) {
    if (codes[p] != 0) {
      fprintf(stderr, "weft-perf: process %d exited with code %d\n", p, codes[p]);
      if (rc == kExitOk) rc = codes[p] > 0 ? codes[p] : kExitFailure;
    }
  }
  return rc;
}

}  // namespace weft::perf
