#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

namespace weft::bootstrap {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

// ---------------------------------------------------------------------------------------------
// SocketAddress

SocketAddress::SocketAddress() { memset(&storage_, 0, sizeof(storage_)); }

SocketAddress SocketAddress::fromSockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  if (sa == nullptr) return a;
  if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(sockaddr_in)) memcpy(&a.storage_, sa, sizeof(sockaddr_in));
  if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(sockaddr_in6)) memcpy(&a.storage_, sa, sizeof(sockaddr_in6));
  return a;
}

SocketAddress SocketAddress::loopback(int family) {
  SocketAddress a;
  if (family == AF_INET6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_loopback;
  } else {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  return a;
}

bool SocketAddress::parse(const std::string& text, SocketAddress* out, std::string* why, bool resolveNames) {
  std::string host, portText;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) { *why = "missing ']' after the IPv6 address"; return false; }
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') { *why = "expected ':port' after ']'"; return false; }
    portText = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) { *why = "expected host:port"; return false; }
    if (text.find(':') != colon) { *why = "an IPv6 address must be written in brackets: [addr]:port"; return false; }
    host = text.substr(0, colon);
    portText = text.substr(colon + 1);
  }
  if (host.empty()) { *why = "empty host"; return false; }
  if (portText.empty() || portText.size() > 5 || portText.find_first_not_of("0123456789") != std::string::npos) {
    *why = "the port must be a number from 1 to 65535";
    return false;
  }
  long port = strtol(portText.c_str(), nullptr, 10);
  if (port < 1 || port > 65535) { *why = "the port must be a number from 1 to 65535"; return false; }

  addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = resolveNames ? 0 : AI_NUMERICHOST;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    *why = resolveNames ? std::string("cannot resolve host '") + host + "': " + gai_strerror(rc)
                        : std::string("'") + host + "' is not a numeric IPv4 or IPv6 address";
    return false;
  }
  // Prefer the first IPv4 result, as most of our peers listen on IPv4.
  const addrinfo* pick = result;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) { pick = ai; break; }
  }
  SocketAddress a = fromSockaddr(pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(result);
  if (!a.valid()) { *why = "not an IPv4 or IPv6 address"; return false; }
  a.setPort((uint16_t)port);
  *out = a;
  return true;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

bool SocketAddress::isLinkLocal() const {
  if (family() != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr;
  return IN6_IS_ADDR_LINKLOCAL(&a);
}

std::string SocketAddress::hostString() const {
  char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof(buf));
  } else if (family() == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    inet_ntop(AF_INET6, &s6->sin6_addr, buf, INET6_ADDRSTRLEN);
    char ifname[IF_NAMESIZE] = "";
    if (s6->sin6_scope_id != 0 && if_indextoname(s6->sin6_scope_id, ifname) != nullptr) {
      strcat(buf, "%");
      strcat(buf, ifname);
    }
  } else {
    return "<no address>";
  }
  return buf;
}

std::string SocketAddress::toString() const {
  if (family() == AF_INET) return hostString() + ":" + std::to_string(port());
  if (family() == AF_INET6) return "[" + hostString() + "]:" + std::to_string(port());
  return "<no address>";
}

socklen_t SocketAddress::length() const {
  if (family() == AF_INET) return sizeof(sockaddr_in);
  if (family() == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

bool SocketAddress::operator==(const SocketAddress& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&storage_);
    const auto* b = reinterpret_cast<const sockaddr_in*>(&o.storage_);
    return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
  }
  if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
    const auto* b = reinterpret_cast<const sockaddr_in6*>(&o.storage_);
    return a->sin6_port == b->sin6_port && a->sin6_scope_id == b->sin6_scope_id &&
           memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return true;  // both unset
}

// ---------------------------------------------------------------------------------------------
// Socket calls

const char* ioText(Io io) {
  switch (io) {
    case Io::kOk: return "ok";
    case Io::kClosed: return "connection closed";
    case Io::kRefused: return "connection refused";
    case Io::kTimedOut: return "timed out";
    case Io::kAborted: return "aborted";
    case Io::kFailed: return "failed";
  }
  return "?";
}

namespace {

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // best effort: latency only
}

}  // namespace

Status listenOn(const SocketAddress& address, Fd* listener, SocketAddress* bound) {
  if (!address.valid()) {
    WEFT_WARN("bootstrap: cannot listen: no usable IPv4/IPv6 address");
    return ncclSystemError;
  }
  Fd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    WEFT_WARN("bootstrap: socket() for %s failed: %s", address.toString().c_str(), strerror(errno));
    return ncclSystemError;
  }
  int one = 1;
  // A fixed port (NCCL_COMM_ID) must be reusable right after a previous job exited.
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), address.sockaddrPtr(), address.length()) != 0) {
    int err = errno;
    WEFT_WARN("bootstrap: cannot bind to %s: %s%s", address.toString().c_str(), strerror(err),
              err == EADDRINUSE ? " (is another job or a previous root still using this port?)" : "");
    return ncclSystemError;
  }
  // The kernel caps the backlog at net.core.somaxconn; ask for plenty so that a burst of ranks
  // arriving together is queued instead of refused.
  if (::listen(fd.get(), 16384) != 0) {
    WEFT_WARN("bootstrap: listen() on %s failed: %s", address.toString().c_str(), strerror(errno));
    return ncclSystemError;
  }
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    WEFT_WARN("bootstrap: getsockname() on %s failed: %s", address.toString().c_str(), strerror(errno));
    return ncclSystemError;
  }
  *bound = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  *listener = std::move(fd);
  return ncclSuccess;
}

int acceptOne(int listenFd, Fd* conn, SocketAddress* peer) {
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  int fd;
  do {
    fd = ::accept4(listenFd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno == EWOULDBLOCK ? EAGAIN : errno;
  setNoDelay(fd);
  conn->reset(fd);
  *peer = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  return 0;
}

int startConnect(const SocketAddress& address, Fd* conn) {
  if (!address.valid()) return EAFNOSUPPORT;
  Fd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  setNoDelay(fd.get());
  int rc;
  do {
    rc = ::connect(fd.get(), address.sockaddrPtr(), address.length());
  } while (rc != 0 && errno == EINTR);
  int err = rc == 0 ? 0 : errno;
  if (err == 0 || err == EINPROGRESS) *conn = std::move(fd);
  return err;
}

int connectResult(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

ssize_t sendSome(int fd, const iovec* iov, int iovCount) {
  msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = iovCount;
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  return n;
}

ssize_t recvSome(int fd, void* buffer, size_t bytes) {
  ssize_t n;
  do {
    n = ::recv(fd, buffer, bytes, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  return n;
}

Io ioFromErrno(int err) {
  switch (err) {
    case 0: return Io::kOk;
    case EPIPE:
    case ECONNRESET:
    case ECONNABORTED:
      return Io::kClosed;
    case ECONNREFUSED: return Io::kRefused;
    case ETIMEDOUT: return Io::kTimedOut;
    default: return Io::kFailed;
  }
}

namespace {

// Waits for `events` on fd within the deadline, looking at the abort flag between slices.
Io waitFor(int fd, short events, const util::Deadline& deadline, const std::atomic<bool>* abort, int* err) {
  for (;;) {
    if (aborted(abort)) return Io::kAborted;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.pollMs(kPollSliceMs));
    if (rc < 0 && errno != EINTR) {
      *err = errno;
      return Io::kFailed;
    }
    if (rc > 0) return Io::kOk;  // readiness or an error condition: the next call reports which
    if (deadline.expired()) return Io::kTimedOut;
  }
}

bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == EAGAIN;
}

}  // namespace

Io connectBlocking(const SocketAddress& address, const util::Deadline& deadline,
                   const std::atomic<bool>* abort, bool retry, Fd* conn, int* err) {
  int backoffMs = 10;
  for (;;) {
    Fd fd;
    int rc = startConnect(address, &fd);
    if (rc == EINPROGRESS) {
      Io w = waitFor(fd.get(), POLLOUT, deadline, abort, err);
      if (w != Io::kOk) return w;
      rc = connectResult(fd.get());
    }
    if (rc == 0) {
      *conn = std::move(fd);
      return Io::kOk;
    }
    *err = rc;
    if (!retry || !retryableConnectError(rc)) return ioFromErrno(rc);
    // Sleep in poll() so that the abort flag is still honoured.
    int sleepMs = deadline.pollMs(backoffMs);
    if (sleepMs <= 0 || deadline.expired()) return Io::kTimedOut;
    if (aborted(abort)) return Io::kAborted;
    ::poll(nullptr, 0, sleepMs);
    backoffMs = backoffMs * 2 > kPollSliceMs ? kPollSliceMs : backoffMs * 2;
  }
}

Io sendAll(int fd, const void* data, size_t bytes, const util::Deadline& deadline,
           const std::atomic<bool>* abort, int* err) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < bytes) {
    iovec iov{const_cast<char*>(p + done), bytes - done};
    ssize_t n = sendSome(fd, &iov, 1);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n != -EAGAIN) {
      *err = (int)-n;
      return ioFromErrno(*err);
    }
    Io w = waitFor(fd, POLLOUT, deadline, abort, err);
    if (w != Io::kOk) return w;
  }
  return Io::kOk;
}

Io recvAll(int fd, void* data, size_t bytes, const util::Deadline& deadline,
           const std::atomic<bool>* abort, int* err, size_t* received) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  Io result = Io::kOk;
  while (done < bytes) {
    ssize_t n = recvSome(fd, p + done, bytes - done);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0) {
      result = Io::kClosed;
      break;
    }
    if (n != -EAGAIN) {
      *err = (int)-n;
      result = ioFromErrno(*err);
      break;
    }
    result = waitFor(fd, POLLIN, deadline, abort, err);
    if (result != Io::kOk) break;
  }
  if (received != nullptr) *received = done;
  return result;
}

}  // namespace weft::bootstrap
