// Runs bootstrap ranks as separate processes for the unit tests.
//
// Children are forked first, before the parent creates a root or calls ncclGetUniqueId, so that
// no thread exists at fork time and no child inherits the root's socket. Each child waits for
// the unique id on a pipe, runs its body, writes a result record (status, seconds, text) to
// another pipe and leaves with _exit(): it never returns into GoogleTest. The parent collects
// the records with one bounded wait and reaps every child, killing stragglers, so a bug cannot
// hang the suite.
#pragma once

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "bootstrap/unique_id.h"
#include "core/log.h"
#include "core/param.h"
#include "nccl.h"

namespace weft::test {

struct RankOutcome {
  int status = -1;  // the ncclResult_t the body reported; -1 when no record arrived
  double seconds = 0;
  std::string text;
};

struct ChildResult {
  int rank = -1;
  pid_t pid = -1;
  bool reported = false;  // a record arrived
  bool exited = false;    // exited normally (else: signal or killed by the harness)
  int exitCode = -1;
  int signal = 0;
  bool killedByHarness = false;
  RankOutcome outcome;
};

// Sets an environment variable in a child and drops the cached parameters.
inline void childSetEnv(const char* name, const std::string& value) {
  setenv(name, value.c_str(), 1);
  param::resetForTesting();
}

class ForkedRanks {
 public:
  using Body = std::function<RankOutcome(int rank, const ncclUniqueId& id)>;

  ~ForkedRanks() { killAll(); }

  // Forks one child per entry of `ranks`; each runs body(rank, id) once the id arrives.
  void start(const std::vector<int>& ranks, const Body& body) {
    fflush(stdout);
    fflush(stderr);
    struct Pipes { int id[2]; int result[2]; };
    std::vector<Pipes> pipes(ranks.size());
    for (Pipes& p : pipes) {
      if (pipe(p.id) != 0 || pipe(p.result) != 0) abort();
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      pid_t pid = fork();
      if (pid == 0) runChild(ranks[i], pipes[i].id[0], pipes[i].result[1], body);
      Child c;
      c.rank = ranks[i];
      c.pid = pid;
      c.idFd = pipes[i].id[1];
      c.resultFd = pipes[i].result[0];
      children_.push_back(c);
    }
    for (Pipes& p : pipes) {
      close(p.id[0]);
      close(p.result[1]);
    }
  }

  pid_t pidOf(int rank) const {
    for (const Child& c : children_) if (c.rank == rank) return c.pid;
    return -1;
  }

  // Gives every child its unique id.
  void sendId(const ncclUniqueId& id) {
    for (Child& c : children_) sendId(c.rank, id);
  }
  void sendId(int rank, const ncclUniqueId& id) { sendIds(rank, &id, 1); }
  void sendIds(int rank, const ncclUniqueId* ids, int n) {
    for (Child& c : children_) {
      if (c.rank != rank || c.idFd < 0) continue;
      int32_t count = n;
      if (write(c.idFd, &count, sizeof(count)) != sizeof(count)) {}
      if (write(c.idFd, ids, sizeof(ncclUniqueId) * n) != (ssize_t)(sizeof(ncclUniqueId) * n)) {}
      close(c.idFd);
      c.idFd = -1;
    }
  }

  // Collects the records and reaps every child within timeoutMs; stragglers are killed.
  std::vector<ChildResult> wait(int timeoutMs) {
    for (Child& c : children_) {
      if (c.idFd >= 0) { close(c.idFd); c.idFd = -1; }  // a child still waiting for an id gives up
    }
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    auto left = [&] {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
      return ms > 0 ? (int)ms : 0;
    };
    // Read every result pipe to its end.
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<Child*> owners;
      for (Child& c : children_) {
        if (c.resultFd >= 0) { fds.push_back(pollfd{c.resultFd, POLLIN, 0}); owners.push_back(&c); }
      }
      if (fds.empty() || left() == 0) break;
      if (poll(fds.data(), fds.size(), left()) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        char buf[4096];
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n > 0) owners[i]->record.append(buf, (size_t)n);
        else { close(owners[i]->resultFd); owners[i]->resultFd = -1; }
      }
    }
    std::vector<ChildResult> out;
    for (Child& c : children_) {
      ChildResult r;
      r.rank = c.rank;
      r.pid = c.pid;
      int status = 0;
      pid_t got = 0;
      while ((got = waitpid(c.pid, &status, WNOHANG)) == 0 && left() > 0) usleep(2000);
      if (got == 0) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        r.killedByHarness = true;
      }
      r.exited = WIFEXITED(status);
      r.exitCode = r.exited ? WEXITSTATUS(status) : -1;
      r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      parseRecord(c.record, &r);
      if (c.resultFd >= 0) close(c.resultFd);
      c.resultFd = -1;
      c.pid = -1;
      out.push_back(r);
    }
    children_.clear();
    return out;
  }

 private:
  struct Child {
    int rank;
    pid_t pid;
    int idFd;
    int resultFd;
    std::string record;
  };

  [[noreturn]] static void runChild(int rank, int idFd, int resultFd, const Body& body) {
    // Keep only stdio and our two pipes: other children's pipes and any socket of the parent
    // must not stay open in this process.
    std::vector<int> open;
    if (DIR* dir = opendir("/proc/self/fd")) {
      while (dirent* e = readdir(dir)) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd > 2 && fd != dirfd(dir) && fd != idFd && fd != resultFd) open.push_back(fd);
      }
      closedir(dir);
    }
    for (int fd : open) close(fd);
    alarm(120);  // last resort if both the code and the harness were wrong
    childSetEnv("NCCL_SOCKET_IFNAME", "lo");
    log::reset();
    std::vector<ncclUniqueId> ids;
    int32_t count = 0;
    pollfd p{idFd, POLLIN, 0};
    if (poll(&p, 1, 30000) == 1 && read(idFd, &count, sizeof(count)) == sizeof(count) && count > 0 && count < 1024) {
      ids.resize(count);
      size_t want = sizeof(ncclUniqueId) * count, got = 0;
      while (got < want) {
        ssize_t n = read(idFd, reinterpret_cast<char*>(ids.data()) + got, want - got);
        if (n <= 0) break;
        got += (size_t)n;
      }
      if (got != want) ids.clear();
    }
    if (ids.empty()) _exit(98);
    auto t0 = std::chrono::steady_clock::now();
    // The body sees ids[0]; multi-root tests read the others from gIds.
    idsOfThisChild() = ids;
    RankOutcome o = body(rank, ids[0]);
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string rec = std::to_string(o.status) + "\n" + std::to_string(o.seconds) + "\n" + o.text;
    size_t off = 0;
    while (off < rec.size()) {
      ssize_t n = write(resultFd, rec.data() + off, rec.size() - off);
      if (n <= 0) break;
      off += (size_t)n;
    }
    _exit(0);
  }

  static void parseRecord(const std::string& rec, ChildResult* r) {
    size_t a = rec.find('\n');
    if (a == std::string::npos) return;
    size_t b = rec.find('\n', a + 1);
    if (b == std::string::npos) return;
    r->reported = true;
    r->outcome.status = atoi(rec.substr(0, a).c_str());
    r->outcome.seconds = atof(rec.substr(a + 1, b - a - 1).c_str());
    r->outcome.text = rec.substr(b + 1);
  }

  void killAll() {
    for (Child& c : children_) {
      if (c.pid > 0) {
        kill(c.pid, SIGKILL);
        int status;
        waitpid(c.pid, &status, 0);
      }
      if (c.idFd >= 0) close(c.idFd);
      if (c.resultFd >= 0) close(c.resultFd);
    }
    children_.clear();
  }

 public:
  // All ids a child received (for multi-root tests); valid inside a child's body.
  static std::vector<ncclUniqueId>& idsOfThisChild() {
    static std::vector<ncclUniqueId> ids;
    return ids;
  }

 private:
  std::vector<Child> children_;
};

// A one-line summary of results for assertion messages.
inline std::string describe(const std::vector<ChildResult>& rs) {
  std::string s;
  for (const ChildResult& r : rs) {
    char buf[160];
    snprintf(buf, sizeof(buf), "\n  rank %d: status %d, %.3f s, exit %d sig %d%s: ", r.rank, r.outcome.status,
             r.outcome.seconds, r.exitCode, r.signal, r.killedByHarness ? " (killed by harness)" : "");
    s += buf + r.outcome.text;
  }
  return s;
}

// A root served by a thread of the test process. Create it after the children are forked.
struct ParentRoot {
  std::unique_ptr<bootstrap::Root> root;
  ncclUniqueId id;
  uint64_t jobKey = 0;
  std::atomic<bool> stop{false};

  explicit ParentRoot(int64_t timeoutSeconds, int family = AF_INET) {
    jobKey = bootstrap::randomJobKey();
    if (bootstrap::Root::create(bootstrap::SocketAddress::loopback(family), jobKey, &root, timeoutSeconds) != ncclSuccess) abort();
    bootstrap::UniqueIdInfo info;
    info.jobKey = jobKey;
    info.root = root->address();
    bootstrap::encodeUniqueId(info, &id);
    root->start(&stop);
  }
  Status join() { return root->join(); }
  Status stopAndJoin() {
    stop.store(true);
    return root->join();
  }
};

// Result of a child body: a status with the bootstrap's failure text (or the last warning).
inline RankOutcome outcome(Status s, const std::string& text = "") {
  RankOutcome o;
  o.status = (int)s;
  o.text = !text.empty() ? text : (s == ncclSuccess ? std::string() : std::string(log::lastErrorOfThread()));
  return o;
}
// A failed check inside a child: status 100 and what went wrong.
constexpr int kCheckFailed = 100;
#define WEFT_CHILD_CHECK(cond, text)                                                             \
  do {                                                                                           \
    if (!(cond)) return ::weft::test::RankOutcome{::weft::test::kCheckFailed, 0, std::string(text)}; \
  } while (0)
#define WEFT_CHILD_TRY(expr)                                                                     \
  do {                                                                                           \
    ::weft::Status child_status_ = (expr);                                                       \
    if (child_status_ != ncclSuccess) return ::weft::test::outcome(child_status_, std::string(#expr ": ") + \
                                                                   ::weft::log::lastErrorOfThread()); \
  } while (0)

// Deterministic payload bytes, distinct per (source, destination, salt).
inline uint8_t patternByte(int src, int dst, int salt, size_t i) {
  return (uint8_t)(src * 131 + dst * 31 + salt * 7 + i * 13 + (i >> 8));
}
inline std::vector<uint8_t> pattern(int src, int dst, int salt, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = patternByte(src, dst, salt, i);
  return v;
}

}  // namespace weft::test
