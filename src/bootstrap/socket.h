// TCP plumbing for the bootstrap: an owned file descriptor, a socket address that converts to and
// from text, and non-blocking socket calls. The calls here decide nothing about peers and log
// nothing about them: they return an Io code (plus errno) and the caller, who knows which rank is
// on the other side and what operation is running, writes the one error message.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "util/deadline.h"

namespace weft::bootstrap {

// Owns one file descriptor; closes it when destroyed.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 address with port (a sockaddr_storage holding sockaddr_in or sockaddr_in6).
class SocketAddress {
 public:
  SocketAddress();
  static SocketAddress fromSockaddr(const sockaddr* sa, socklen_t len);
  static SocketAddress loopback(int family);  // 127.0.0.1 or ::1, port 0

  // Parses "10.0.0.4:41234", "[fe80::1%eth0]:41234", "[::1]:5000" or "hostname:5000" (a name is
  // resolved when resolveNames is set). The port is required and must be 1..65535. On failure
  // *why says what is wrong with the text.
  static bool parse(const std::string& text, SocketAddress* out, std::string* why, bool resolveNames = true);

  bool valid() const { return family() == AF_INET || family() == AF_INET6; }
  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  bool isLinkLocal() const;  // fe80::/10 (needs a scope id to be usable)

  std::string toString() const;    // "10.0.0.4:41234", "[::1]:5000"; "<no address>" when unset
  std::string hostString() const;  // the host part alone: "10.0.0.4", "::1"

  const sockaddr* sockaddrPtr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const;

  bool operator==(const SocketAddress& o) const;
  bool operator!=(const SocketAddress& o) const { return !(*this == o); }

 private:
  sockaddr_storage storage_;
};

// Outcome of a socket operation, for the caller to turn into a message.
enum class Io {
  kOk,
  kClosed,    // orderly close, EPIPE or ECONNRESET: the peer went away
  kRefused,   // ECONNREFUSED: nobody listens at that address (any more)
  kTimedOut,  // the deadline passed
  kAborted,   // the abort flag was raised
  kFailed,    // any other error; see the errno returned alongside
};
const char* ioText(Io io);

// A listening TCP socket bound to `address` (port 0 = any), non-blocking, close-on-exec.
// *bound receives the actual address (with the port the kernel picked). Logs and returns
// ncclSystemError on failure, naming the address.
[[nodiscard]] Status listenOn(const SocketAddress& address, Fd* listener, SocketAddress* bound);

// Accepts one pending connection without blocking. Returns 0 and fills *conn (non-blocking,
// TCP_NODELAY) and *peer; EAGAIN when none is pending; another errno on failure.
int acceptOne(int listenFd, Fd* conn, SocketAddress* peer);

// Starts a non-blocking connect. Returns 0 when connected at once, EINPROGRESS when pending (wait
// for POLLOUT, then call connectResult), or the errno of the failure.
int startConnect(const SocketAddress& address, Fd* conn);
int connectResult(int fd);  // SO_ERROR of a pending connect: 0 once connected

// One non-blocking send of the iovecs; returns the bytes sent or -errno (-EAGAIN when full).
// Never raises SIGPIPE.
ssize_t sendSome(int fd, const iovec* iov, int iovCount);
// One non-blocking receive; returns the bytes read, 0 at end of stream, or -errno.
ssize_t recvSome(int fd, void* buffer, size_t bytes);

// Maps the errno of a failed send/recv/connect to an Io code.
Io ioFromErrno(int err);

// Blocking helpers built on poll() with short slices: each polls `abort` (may be null) at least
// every 100 ms and stops at the deadline. *err receives the errno for Io::kFailed.
// connectBlocking retries refused/unreachable attempts until the deadline when `retry` is set
// (a root that has not started listening yet).
Io connectBlocking(const SocketAddress& address, const util::Deadline& deadline,
                   const std::atomic<bool>* abort, bool retry, Fd* conn, int* err);
Io sendAll(int fd, const void* data, size_t bytes, const util::Deadline& deadline,
           const std::atomic<bool>* abort, int* err);
Io recvAll(int fd, void* data, size_t bytes, const util::Deadline& deadline,
           const std::atomic<bool>* abort, int* err, size_t* received = nullptr);

// How long blocking waits sleep in poll() before looking at the abort flag again.
constexpr int kPollSliceMs = 100;

inline bool aborted(const std::atomic<bool>* abort) {
  return abort != nullptr && abort->load(std::memory_order_relaxed);
}

}  // namespace weft::bootstrap
