#include "transport/p2p/fd_passing.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/param.h"

namespace weft::transport::p2p {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kFrameMagic = 0x3150644674666557ull;  // "WeftFdP1" in little-endian bytes
constexpr int kAcceptRetryMs = 20;  // the pause after a failed accept (out of descriptors)

// One message; the fd rides along as SCM_RIGHTS ancillary data.
struct FdFrame {
  uint64_t magic;
  uint64_t jobKey;
  uint32_t length;  // sizeof(FdFrame): a frame of another version is rejected, not misread
  int32_t senderRank;
  int32_t senderPid;
  uint32_t payloadBytes;  // 0: an fd alone; else a small message of this many bytes follows
  uint64_t tag;
};
static_assert(sizeof(FdFrame) == 40, "FdFrame is a wire format");

constexpr int kBacklog = 128;
constexpr int kMaxFdsPerMessage = 8;  // room to receive (and close) extra fds a stranger attaches
constexpr size_t kMaxPending = 256;   // connections accepted but silent
constexpr auto kPassTimeout = 200ms;  // the thread's poll period (expiry of silent connections)
constexpr auto kSilentLimit = 10s;    // a connection must send its frame within this
constexpr auto kProbeFirst = 200ms;   // when recvFd first checks that the sender still exists
constexpr auto kProbeEvery = 500ms;
constexpr auto kWaitSlice = 50ms;     // how often waits look at the abort flag

bool aborted(const std::atomic<bool>* abort) { return abort != nullptr && abort->load(std::memory_order_relaxed); }

// Fills `sa`; returns its length, or 0 when the name does not fit.
socklen_t toSockaddr(const FdAddress& a, sockaddr_un* sa) {
  std::memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  size_t room = sizeof(sa->sun_path) - 1;  // abstract: leading NUL; path: trailing NUL
  if (a.name.empty() || a.name.size() > room) return 0;
  char* dst = sa->sun_path + (a.abstract ? 1 : 0);
  std::memcpy(dst, a.name.data(), a.name.size());
  // Abstract names are exactly as long as given (no terminator); paths include their NUL.
  return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + a.name.size());
}

// A fresh non-blocking SEQPACKET socket connected to `to`. Returns 0, or the connect errno.
int connectTo(const sockaddr_un& sa, socklen_t len, util::UniqueFd* out) {
  util::UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errno;
  int rc;
  do {
    rc = connect(s.get(), reinterpret_cast<const sockaddr*>(&sa), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return errno;
  *out = std::move(s);
  return 0;
}

bool nothingListens(int err) { return err == ECONNREFUSED || err == ENOENT; }

}  // namespace

// ---- Addresses --------------------------------------------------------------------------------

std::string FdAddress::describe() const { return abstract ? "@" + name : name; }

FdAddress fdAddressOf(uint64_t jobKey, int rank, const std::string& dir) {
  char leaf[64];
  snprintf(leaf, sizeof(leaf), "weft-fd-%016llx-%d", (unsigned long long)jobKey, rank);
  FdAddress a;
  if (dir.empty()) {
    a.name = leaf;
    a.abstract = true;
  } else {
    a.name = dir + "/" + leaf + ".sock";
    a.abstract = false;
  }
  return a;
}

std::string fdSocketDirFromEnv() { return param::getStr("WEFT_FD_SOCKET_DIR", ""); }

// ---- The endpoint's thread ---------------------------------------------------------------------

struct FdEndpointThread {
  struct Pending {
    util::UniqueFd fd;
    Clock::time_point since;
    int pid;
  };

  static void acceptAll(FdEndpoint& e, std::vector<Pending>* pending) {
    while (true) {
      int c = accept4(e.listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // Out of descriptors (EMFILE), say: the connection stays queued and the listener
          // readable, so an immediate poll would spin. Warn once, then retry every few ms.
          static thread_local bool warned = false;  // one endpoint per thread
          if (!warned) {
            WEFT_WARN("fd endpoint %s: accept failed: %s; retrying (a peer's transfer waits until a file "
                      "descriptor is free: raise `ulimit -n`?)", e.address_.describe().c_str(), strerror(errno));
          }
          warned = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(kAcceptRetryMs));
        }
        return;
      }
      util::UniqueFd conn(c);
      ucred cred{};
      socklen_t credLen = sizeof(cred);
      if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &credLen) != 0) {
        WEFT_WARN("fd endpoint %s: cannot identify a connecting process (%s); dropped",
                  e.address_.describe().c_str(), strerror(errno));
        continue;
      }
      if (cred.uid != getuid()) {
        WEFT_WARN("fd endpoint %s: connection from pid %d of another user (uid %u); dropped",
                  e.address_.describe().c_str(), (int)cred.pid, (unsigned)cred.uid);
        continue;
      }
      Pending fresh{std::move(conn), Clock::now(), (int)cred.pid};
      // A sender connects and sends at once, so its frame is usually here already: read it now,
      // before a crowd of connections accepted in this same loop could push it out. The frames
      // of older connections first: one sender's messages are held in the order it sent them.
      if (!pending->empty()) serviceAll(e, pending);
      if (readFrame(e, fresh)) continue;
      // Still full of silent connections: drop the oldest.
      if (pending->size() >= kMaxPending) {
        WEFT_WARN("fd endpoint %s: %zu connections sent nothing yet; dropping the oldest (pid %d)",
                  e.address_.describe().c_str(), pending->size(), pending->front().pid);
        pending->erase(pending->begin());
      }
      pending->push_back(std::move(fresh));
    }
  }

  // Reads the connection's one frame if it has arrived. Returns true when done with it.
  static bool readFrame(FdEndpoint& e, Pending& p) {
    struct {
      FdFrame frame;
      char payload[FdEndpoint::kMaxMessageBytes];
    } in;
    FdFrame& frame = in.frame;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    iovec iov{&in, sizeof(in)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n;
    do {
      n = recvmsg(p.fd.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    const std::string where = e.address_.describe();
    if (n < 0) {
      WEFT_INFO(log::kP2p, "fd endpoint %s: connection from pid %d failed: %s", where.c_str(), p.pid, strerror(errno));
      return true;
    }
    // Take ownership of every fd that came, so a rejected message leaks none.
    std::vector<util::UniqueFd> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(fd);
      }
    }
    if (n == 0 && fds.empty()) {
      WEFT_TRACE(log::kP2p, "fd endpoint %s: pid %d connected and left (a liveness probe)", where.c_str(), p.pid);
      return true;
    }
    const char* problem = nullptr;
    char detail[160] = "";
    if (msg.msg_flags & MSG_TRUNC) {
      problem = "a message longer than a frame";
    } else if (msg.msg_flags & MSG_CTRUNC) {
      problem = "too many file descriptors";
    } else if ((size_t)n < sizeof(frame)) {
      problem = "a message shorter than a frame";
      snprintf(detail, sizeof(detail), " (%zd bytes, a frame is %zu)", n, sizeof(frame));
    } else if (frame.magic != kFrameMagic) {
      problem = "a message that is not a weft fd frame";
    } else if (frame.jobKey != e.jobKey_) {
      problem = "a frame of another job";
      snprintf(detail, sizeof(detail), " (job key %016llx, this job %016llx)", (unsigned long long)frame.jobKey,
               (unsigned long long)e.jobKey_);
    } else if (frame.length != sizeof(frame)) {
      problem = "a frame of another format version";
      snprintf(detail, sizeof(detail), " (length field %u, expected %zu)", frame.length, sizeof(frame));
    } else if (frame.senderRank < 0) {
      problem = "a frame with a negative sender rank";
    } else if (frame.payloadBytes > FdEndpoint::kMaxMessageBytes || (size_t)n != sizeof(frame) + frame.payloadBytes) {
      problem = "a message of the wrong size";
      snprintf(detail, sizeof(detail), " (%zd bytes, the frame announces %zu)", n,
               sizeof(frame) + (size_t)frame.payloadBytes);
    } else if (frame.payloadBytes == 0 ? fds.size() != 1 : fds.size() > 1) {
      problem = frame.payloadBytes == 0 ? "a frame without exactly one file descriptor"
                                        : "a message with more than one file descriptor";
      snprintf(detail, sizeof(detail), " (%zu attached)", fds.size());
    }
    if (problem != nullptr) {
      WEFT_WARN("fd endpoint %s of rank %d: pid %d sent %s%s; connection dropped", where.c_str(), e.rank_, p.pid,
                problem, detail);
      return true;
    }
    if (frame.payloadBytes > 0) {
      FdEndpoint::Message m;
      m.fromRank = frame.senderRank;
      m.tag = frame.tag;
      m.payload.assign(in.payload, in.payload + frame.payloadBytes);
      if (!fds.empty()) m.fd = std::move(fds[0]);
      {
        std::lock_guard<std::mutex> lock(e.mutex_);
        e.messages_.push_back(std::move(m));
      }
      e.messagesReceived_.fetch_add(1, std::memory_order_release);
      WEFT_TRACE(log::kP2p, "fd endpoint %s: message from rank %d (pid %d) tag %llx, %u bytes%s", where.c_str(),
                 frame.senderRank, frame.senderPid, (unsigned long long)frame.tag, frame.payloadBytes,
                 fds.empty() ? "" : " and an fd");
      e.changed_.notify_all();
      return true;
    }
    std::pair<int, uint64_t> key{frame.senderRank, frame.tag};
    {
      std::lock_guard<std::mutex> lock(e.mutex_);
      auto [it, fresh] = e.held_.try_emplace(key);
      if (!fresh) {
        WEFT_WARN("fd endpoint %s: rank %d sent tag %llu twice; keeping the newer fd", where.c_str(),
                  frame.senderRank, (unsigned long long)frame.tag);
      }
      it->second = std::move(fds[0]);
    }
    WEFT_TRACE(log::kP2p, "fd endpoint %s: fd from rank %d (pid %d) tag %llu", where.c_str(), frame.senderRank,
               frame.senderPid, (unsigned long long)frame.tag);
    e.changed_.notify_all();
    return true;
  }

  static void serviceAll(FdEndpoint& e, std::vector<Pending>* pending) {
    Clock::time_point now = Clock::now();
    auto done = [&](Pending& p) {
      if (readFrame(e, p)) return true;
      if (now - p.since < kSilentLimit) return false;
      WEFT_WARN("fd endpoint %s: pid %d connected but sent nothing for %lld s; dropped",
                e.address_.describe().c_str(), p.pid,
                (long long)std::chrono::duration_cast<std::chrono::seconds>(kSilentLimit).count());
      return true;
    };
    pending->erase(std::remove_if(pending->begin(), pending->end(), done), pending->end());
  }
};

void FdEndpoint::run() {
  pthread_setname_np(pthread_self(), "weft-fd");
  std::vector<FdEndpointThread::Pending> pending;
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    // Accepted connections whose frame has not come yet are watched too: a sender connects first
    // and sends a moment later.
    fds.assign({{listen_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}});
    for (const auto& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    // The timeout only bounds how late silent connections expire.
    int n = poll(fds.data(), fds.size(),
                 (int)std::chrono::duration_cast<std::chrono::milliseconds>(kPassTimeout).count());
    if (n < 0 && errno != EINTR) {
      WEFT_WARN("fd endpoint %s: poll failed: %s", address_.describe().c_str(), strerror(errno));
      std::this_thread::sleep_for(10ms);
    }
    if (fds[1].revents & POLLIN) {
      uint64_t count;
      if (read(wake_.get(), &count, sizeof(count)) < 0) { /* nonblocking: already drained */ }
    }
    if (stop_.load()) break;
    FdEndpointThread::acceptAll(*this, &pending);
    FdEndpointThread::serviceAll(*this, &pending);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++passes_;
    }
    changed_.notify_all();
  }
}

void FdEndpoint::syncPass() {
  std::unique_lock<std::mutex> lock(mutex_);
  // A pass already under way may have accepted before our request: wait for the one after it.
  const uint64_t target = passes_ + 2;
  for (int i = 0; i < 100 && passes_ < target && !stop_.load(); ++i) {  // bounded: ~5 s at worst
    uint64_t one = 1;
    if (write(wake_.get(), &one, sizeof(one)) < 0) { /* counter full: a wake-up is pending anyway */ }
    changed_.wait_for(lock, kWaitSlice);
  }
}

// ---- Endpoint ----------------------------------------------------------------------------------

FdEndpoint::FdEndpoint(uint64_t jobKey, int rank, std::string dir, FdAddress address)
    : jobKey_(jobKey), rank_(rank), dir_(std::move(dir)), address_(std::move(address)) {}

FdEndpoint::~FdEndpoint() {
  stop_.store(true);
  uint64_t one = 1;
  if (write(wake_.get(), &one, sizeof(one)) < 0) { /* the thread polls with a timeout anyway */ }
  if (thread_.joinable()) thread_.join();
  if (!address_.abstract) unlink(address_.name.c_str());
}

Status FdEndpoint::create(uint64_t jobKey, int rank, const std::string& dir, std::unique_ptr<FdEndpoint>* out) {
  WEFT_CHECK_ARG(out != nullptr && rank >= 0, "FdEndpoint::create: bad arguments (rank %d)", rank);
  FdAddress address = fdAddressOf(jobKey, rank, dir);
  sockaddr_un sa;
  socklen_t len = toSockaddr(address, &sa);
  if (len == 0) {
    WEFT_WARN("fd socket name %s is too long for a Unix socket (at most %zu bytes); choose a shorter "
              "WEFT_FD_SOCKET_DIR", address.describe().c_str(), sizeof(sa.sun_path) - 2);
    return ncclInvalidArgument;
  }
  util::UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) {
    WEFT_WARN("cannot create a Unix socket for passing file descriptors: %s", strerror(errno));
    return ncclSystemError;
  }
  int rc = bind(s.get(), reinterpret_cast<const sockaddr*>(&sa), len);
  if (rc != 0 && errno == EADDRINUSE && !address.abstract) {
    // A socket file left by a process that died; remove it only if nobody listens there.
    util::UniqueFd probe;
    if (nothingListens(connectTo(sa, len, &probe))) {
      unlink(address.name.c_str());
      rc = bind(s.get(), reinterpret_cast<const sockaddr*>(&sa), len);
    } else {
      errno = EADDRINUSE;
    }
  }
  if (rc != 0) {
    if (errno == EADDRINUSE) {
      WEFT_WARN("fd socket %s is in use: another live process of this job (key %016llx) also claims rank %d on "
                "this host", address.describe().c_str(), (unsigned long long)jobKey, rank);
      return ncclInvalidUsage;
    }
    WEFT_WARN("cannot bind fd socket %s: %s", address.describe().c_str(), strerror(errno));
    return ncclSystemError;
  }
  // From here on a failure must not leave the socket file behind.
  struct UnlinkOnFailure {
    const FdAddress& a;
    bool armed = true;
    ~UnlinkOnFailure() {
      if (armed && !a.abstract) unlink(a.name.c_str());
    }
  } cleanup{address};
  // Only this user may connect (before listen() nobody can, so there is no window).
  if (!address.abstract) WEFT_SYS_TRY(chmod(address.name.c_str(), 0600));
  WEFT_SYS_TRY(listen(s.get(), kBacklog));
  util::UniqueFd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) {
    WEFT_WARN("eventfd failed: %s", strerror(errno));
    return ncclSystemError;
  }
  cleanup.armed = false;
  std::unique_ptr<FdEndpoint> e(new FdEndpoint(jobKey, rank, dir, address));
  e->listen_ = std::move(s);
  e->wake_ = std::move(wake);
  e->thread_ = std::thread([p = e.get()] { p->run(); });
  WEFT_INFO(log::kP2p, "rank %d passes file descriptors at %s", rank, address.describe().c_str());
  *out = std::move(e);
  return ncclSuccess;
}

size_t FdEndpoint::heldCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.size();
}

Status FdEndpoint::sendFd(int toRank, int fd, uint64_t tag, Clock::time_point deadline,
                          const std::atomic<bool>* abort) {
  return sendFdTo(fdAddressOf(jobKey_, toRank, dir_), toRank, fd, tag, deadline, abort);
}

Status FdEndpoint::sendFdTo(const FdAddress& to, int toRank, int fd, uint64_t tag, Clock::time_point deadline,
                            const std::atomic<bool>* abort) {
  WEFT_CHECK_ARG(fd >= 0, "sendFd: invalid file descriptor %d for rank %d", fd, toRank);
  return sendFrame(to, toRank, fd, tag, nullptr, 0, deadline, abort);
}

Status FdEndpoint::sendMessage(int toRank, uint64_t tag, const void* data, size_t bytes, int fd,
                               Clock::time_point deadline, const std::atomic<bool>* abort) {
  WEFT_CHECK_ARG(data != nullptr && bytes > 0 && bytes <= kMaxMessageBytes,
                 "sendMessage: %zu bytes for rank %d (1 to %zu allowed)", bytes, toRank, kMaxMessageBytes);
  return sendFrame(fdAddressOf(jobKey_, toRank, dir_), toRank, fd, tag, data, bytes, deadline, abort);
}

std::vector<FdEndpoint::Message> FdEndpoint::takeMessages(uint64_t mask, uint64_t value) {
  std::vector<Message> out;
  std::lock_guard<std::mutex> lock(mutex_);
  auto keep = std::stable_partition(messages_.begin(), messages_.end(),
                                    [&](const Message& m) { return (m.tag & mask) != value; });
  std::move(keep, messages_.end(), std::back_inserter(out));
  messages_.erase(keep, messages_.end());
  return out;
}

Status FdEndpoint::sendFrame(const FdAddress& to, int toRank, int fd, uint64_t tag, const void* payload, size_t bytes,
                             Clock::time_point deadline, const std::atomic<bool>* abort) {
  sockaddr_un sa;
  socklen_t len = toSockaddr(to, &sa);
  WEFT_CHECK_ARG(len != 0, "sendFd: fd socket name %s is too long", to.describe().c_str());
  const std::string where = to.describe();
  util::UniqueFd s;
  while (true) {
    int err = connectTo(sa, len, &s);
    if (err == 0) break;
    if (nothingListens(err)) {
      WEFT_WARN("cannot pass a file descriptor to rank %d: nothing listens at %s (%s); that process has exited, "
                "or it did not create its fd endpoint before the exchange", toRank, where.c_str(), strerror(err));
      return ncclRemoteError;
    }
    if (err != EAGAIN) {
      WEFT_WARN("cannot connect to rank %d's fd socket %s: %s", toRank, where.c_str(), strerror(err));
      return ncclSystemError;
    }
    // Its queue of pending connections is full: its endpoint thread is behind; retry.
    if (aborted(abort)) {
      WEFT_WARN("passing a file descriptor to rank %d interrupted: the operation is being aborted", toRank);
      return ncclInternalError;
    }
    if (Clock::now() >= deadline) {
      WEFT_WARN("timed out passing a file descriptor to rank %d: its socket %s stayed busy", toRank, where.c_str());
      return ncclRemoteError;
    }
    std::this_thread::sleep_for(1ms);
  }

  FdFrame frame{kFrameMagic, jobKey_, (uint32_t)sizeof(FdFrame), rank_, (int32_t)getpid(), (uint32_t)bytes, tag};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::memset(control, 0, sizeof(control));
  iovec iov[2] = {{&frame, sizeof(frame)}, {const_cast<void*>(payload), bytes}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = bytes > 0 ? 2 : 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  while (true) {
    ssize_t n = sendmsg(s.get(), &msg, MSG_NOSIGNAL);
    if (n == (ssize_t)(sizeof(frame) + bytes)) break;
    if (n >= 0) {
      WEFT_WARN("passing a file descriptor to rank %d: short send (%zd bytes)", toRank, n);
      return ncclSystemError;
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) {
      WEFT_WARN("rank %d closed its fd socket %s while a file descriptor was being passed to it; it probably exited",
                toRank, where.c_str());
      return ncclRemoteError;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      WEFT_WARN("passing a file descriptor to rank %d failed: sendmsg: %s", toRank, strerror(errno));
      return ncclSystemError;
    }
    if (aborted(abort)) {
      WEFT_WARN("passing a file descriptor to rank %d interrupted: the operation is being aborted", toRank);
      return ncclInternalError;
    }
    if (Clock::now() >= deadline) {
      WEFT_WARN("timed out passing a file descriptor to rank %d: its socket %s accepts no data", toRank,
                where.c_str());
      return ncclRemoteError;
    }
    pollfd p{s.get(), POLLOUT, 0};
    (void)poll(&p, 1, (int)std::chrono::duration_cast<std::chrono::milliseconds>(kWaitSlice).count());
  }
  WEFT_TRACE(log::kP2p, "passed fd %d to rank %d tag %llu", fd, toRank, (unsigned long long)tag);
  return ncclSuccess;
}

Status FdEndpoint::probe(int rank, bool* gone) {
  FdAddress a = fdAddressOf(jobKey_, rank, dir_);
  sockaddr_un sa;
  socklen_t len = toSockaddr(a, &sa);
  util::UniqueFd s;
  int err = connectTo(sa, len, &s);
  *gone = nothingListens(err);
  return ncclSuccess;  // any other answer (EAGAIN: busy, ...) means someone is there
}

Status FdEndpoint::recvFd(int fromRank, uint64_t tag, Clock::time_point deadline, const std::atomic<bool>* abort,
                          util::UniqueFd* out) {
  WEFT_CHECK_ARG(out != nullptr && fromRank >= 0, "recvFd: bad arguments (rank %d)", fromRank);
  const std::pair<int, uint64_t> key{fromRank, tag};
  const Clock::time_point start = Clock::now();
  Clock::time_point nextProbe = start + kProbeFirst;
  std::unique_lock<std::mutex> lock(mutex_);
  auto take = [&]() {
    auto it = held_.find(key);
    if (it == held_.end()) return false;
    *out = std::move(it->second);
    held_.erase(it);
    return true;
  };
  while (true) {
    if (take()) return ncclSuccess;
    if (aborted(abort)) {
      WEFT_WARN("waiting for a file descriptor from rank %d (tag %llu) interrupted: the operation is being aborted",
                fromRank, (unsigned long long)tag);
      return ncclInternalError;
    }
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      WEFT_WARN("timed out after %.1f s waiting for a file descriptor (tag %llu) from rank %d at %s; that rank is "
                "stuck or slower than the timeout", std::chrono::duration<double>(now - start).count(),
                (unsigned long long)tag, fromRank, address_.describe().c_str());
      return ncclRemoteError;
    }
    if (now >= nextProbe) {
      lock.unlock();
      bool gone = false;
      WEFT_TRY(probe(fromRank, &gone));
      if (gone) syncPass();  // it may have sent before it went: collect what is already queued
      lock.lock();
      if (gone) {
        if (take()) return ncclSuccess;
        WEFT_WARN("rank %d exited (nothing listens at %s any more) before passing the file descriptor (tag %llu) "
                  "this rank waits for; check rank %d's log", fromRank, fdAddressOf(jobKey_, fromRank, dir_)
                  .describe().c_str(), (unsigned long long)tag, fromRank);
        return ncclRemoteError;
      }
      nextProbe = Clock::now() + kProbeEvery;
      continue;
    }
    changed_.wait_until(lock, std::min({deadline, nextProbe, now + kWaitSlice}));
  }
}

}  // namespace weft::transport::p2p
