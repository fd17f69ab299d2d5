// weftloop: a test network plugin speaking NCCL's ext-net ABI (tables v8, v9, v10) over TCP sockets,
// so that weft's plugin loader and plugin-driven network proxy can be tested on a machine without a
// NIC or a GPU. Host memory only; everything is non-blocking and progresses inside test().
//
// The behaviour weft's tests rely on (kept exact on purpose):
// - init reads the environment on every call (so a test may setenv and call init again):
//     WEFT_LOOP_NET_DEVICES          device count, default 1, 0 allowed
//     WEFT_LOOP_NET_INIT_FAIL=1      init returns ncclSystemError
//     WEFT_LOOP_NET_FAIL_AFTER_SENDS=N (N >= 0): isend requests number N+1, N+2, ... (counted in this
//                                    process from the last init) fail: test returns ncclSystemError
//     WEFT_LOOP_NET_ADDR             IPv4 address to listen on, default 127.0.0.1
//   A value that does not parse makes init return ncclInvalidArgument.
// - Handle (128 bytes, rest zeroed): bytes 0-7 magic, 8-11 IPv4 address, 12-13 port, both in network
//   order. A connection starts with an 8-byte hello; each message is a FrameHeader then the payload.
// - connect/accept never block and return a null comm until the hello went through (connect's first
//   call only starts the connection). Connections in progress are keyed by the handle's bytes.
// - At most kMaxInFlight live requests per comm (live: not yet returned done by test, or failed);
//   past that isend/irecv succeed with a null request. Errors are sticky per comm; requests that
//   failed stay owned by their comm until it is closed.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/net_plugin_abi.h"

namespace {

using namespace weft::netabi;  // NOLINT(build/namespaces): this file implements that ABI

#ifdef WEFT_LOOP_ONLY_V8
constexpr const char* kPluginName = "weftloop8";
#else
constexpr const char* kPluginName = "weftloop";
#endif
char gPropertiesName[] = "weftloop";  // ncclNetProperties.name is a non-const char*

constexpr unsigned long kLogSubsysNet = 0x10;  // NCCL_NET
constexpr uint64_t kHandleMagic = 0x31504f4f4c544657ULL;  // "WFTLOOP1" little-endian
constexpr uint64_t kHelloMagic = 0x4f4c4c45484c5057ULL;   // "WPLHELLO"
constexpr uint32_t kFrameMagic = 0x4d52464cU;             // "LFRM"
constexpr size_t kHelloBytes = sizeof(kHelloMagic);
constexpr size_t kMaxInFlight = 8;
constexpr int kMaxDevices = 1024;

// ---------------------------------------------------------------------------------------------
// Logging and configuration (shared by every thread: atomics only, the logger included).

std::atomic<Logger> gLogger{nullptr};
std::atomic<int> gDeviceCount{1};
std::atomic<uint32_t> gListenAddr{INADDR_LOOPBACK};  // host byte order
std::atomic<long long> gFailAfterSends{-1};          // -1: no injected failures
std::atomic<unsigned long long> gSendsPosted{0};

// The logger is variadic, so a va_list cannot be forwarded: format here and pass the text as "%s".
__attribute__((format(printf, 3, 4))) void logLine(LogLevel level, int line, const char* fmt, ...) {
  Logger logger = gLogger.load();
  if (logger == nullptr) return;
  char text[512];
  int prefix = snprintf(text, sizeof(text), "%s: ", kPluginName);
  va_list args;
  va_start(args, fmt);
  vsnprintf(text + prefix, sizeof(text) - prefix, fmt, args);
  va_end(args);
  logger(level, kLogSubsysNet, __FILE__, line, "%s", text);
}
#define LOOP_WARN(...) logLine(kLogWarn, __LINE__, __VA_ARGS__)
#define LOOP_INFO(...) logLine(kLogInfo, __LINE__, __VA_ARGS__)

bool parseInteger(const char* text, long long* value) {
  char* end = nullptr;
  errno = 0;
  *value = strtoll(text, &end, 10);
  return errno == 0 && end != text && *end == '\0';
}

ncclResult_t loopInit(Logger logger) {
  gLogger.store(logger);
  const char* initFail = getenv("WEFT_LOOP_NET_INIT_FAIL");
  if (initFail != nullptr && strcmp(initFail, "1") == 0) {
    LOOP_WARN("init fails as WEFT_LOOP_NET_INIT_FAIL=1 asks");
    return ncclSystemError;
  }
  long long devices = 1;
  if (const char* text = getenv("WEFT_LOOP_NET_DEVICES")) {
    if (!parseInteger(text, &devices) || devices < 0 || devices > kMaxDevices) {
      LOOP_WARN("WEFT_LOOP_NET_DEVICES=%s is not a device count in [0, %d]", text, kMaxDevices);
      return ncclInvalidArgument;
    }
  }
  long long failAfter = -1;
  if (const char* text = getenv("WEFT_LOOP_NET_FAIL_AFTER_SENDS")) {
    if (!parseInteger(text, &failAfter)) {
      LOOP_WARN("WEFT_LOOP_NET_FAIL_AFTER_SENDS=%s is not an integer", text);
      return ncclInvalidArgument;
    }
    if (failAfter < 0) failAfter = -1;
  }
  uint32_t listenAddr = INADDR_LOOPBACK;
  if (const char* text = getenv("WEFT_LOOP_NET_ADDR")) {
    in_addr parsed{};
    if (inet_pton(AF_INET, text, &parsed) != 1) {
      LOOP_WARN("WEFT_LOOP_NET_ADDR=%s is not an IPv4 address", text);
      return ncclInvalidArgument;
    }
    listenAddr = ntohl(parsed.s_addr);
  }
  gDeviceCount.store(static_cast<int>(devices));
  gFailAfterSends.store(failAfter);
  gListenAddr.store(listenAddr);
  gSendsPosted.store(0);  // the injected-failure count starts again with each init
  LOOP_INFO("%d device(s)", static_cast<int>(devices));
  return ncclSuccess;
}

bool validDevice(int dev) { return dev >= 0 && dev < gDeviceCount.load(); }

ncclResult_t loopDevices(int* ndev) {
  if (ndev == nullptr) return ncclInvalidArgument;
  *ndev = gDeviceCount.load();
  return ncclSuccess;
}

ncclResult_t loopGetProperties(int dev, PropertiesV9* props) {
  if (props == nullptr) return ncclInvalidArgument;
  if (!validDevice(dev)) {
    LOOP_WARN("getProperties: device %d out of range (%d device(s))", dev, gDeviceCount.load());
    return ncclInvalidArgument;
  }
  memset(props, 0, sizeof(*props));
  props->name = gPropertiesName;
  props->pciPath = nullptr;
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = kPtrHost;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = 10000;
  props->port = 1;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = kDeviceHost;
  props->netDeviceVersion = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = size_t(1) << 30;
  props->maxCollBytes = size_t(1) << 30;
  return ncclSuccess;
}

// ---------------------------------------------------------------------------------------------
// Sockets, handles and connection set-up.

struct WireHandle {
  uint64_t magic;
  uint32_t addr;  // network byte order
  uint16_t port;  // network byte order
  uint16_t zero;
};
static_assert(sizeof(WireHandle) <= kHandleBytes, "the handle must fit NCCL's 128 bytes");
using HandleKey = std::array<unsigned char, sizeof(WireHandle)>;

// strerror may share a buffer between threads; the GNU strerror_r does not.
std::string errorText(int err) {
  char buffer[128];
  return strerror_r(err, buffer, sizeof(buffer));
}

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }
bool peerGone(int err) { return err == ECONNRESET || err == EPIPE; }

// Small messages (a hello, a frame header) must not wait for Nagle.
void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string addressText(uint32_t addrNetOrder, uint16_t portNetOrder) {
  in_addr addr{};
  addr.s_addr = addrNetOrder;
  char host[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &addr, host, sizeof(host));
  char text[INET_ADDRSTRLEN + 8];
  snprintf(text, sizeof(text), "%s:%u", host, static_cast<unsigned>(ntohs(portNetOrder)));
  return text;
}

struct ListenComm {
  int fd = -1;
  int acceptedFd = -1;  // accepted, its hello not read in full yet
  unsigned char hello[kHelloBytes] = {};
  size_t helloBytes = 0;
};

struct Comm;
struct MemHandle {
  Comm* comm;
  uintptr_t begin;
  uintptr_t end;
};

struct FrameHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t size;
};

struct Request {
  Comm* comm = nullptr;
  bool isSend = false;
  unsigned char* data = nullptr;
  size_t capacity = 0;  // send: the message size; receive: the posted size
  int tag = 0;
  FrameHeader header{};  // send: filled at isend; receive: read off the wire
  size_t headerDone = 0;
  size_t payloadDone = 0;
  bool complete = false;
  bool injectedFailure = false;
  bool injectedWarned = false;
  unsigned long long sendNumber = 0;
};

struct Comm {
  bool isSend = false;
  int fd = -1;
  ncclResult_t error = ncclSuccess;            // sticky: once set, nothing more moves on this comm
  std::deque<Request*> wire;                   // incomplete requests, in wire order
  std::vector<std::unique_ptr<Request>> live;  // every request not yet handed back done
};

void closeFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

ncclResult_t loopListen(int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return ncclInvalidArgument;
  *listenComm = nullptr;
  if (!validDevice(dev)) {
    LOOP_WARN("listen: device %d out of range", dev);
    return ncclInvalidArgument;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    LOOP_WARN("listen: socket() failed: %s", errorText(errno).c_str());
    return ncclSystemError;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(gListenAddr.load());
  addr.sin_port = 0;  // ephemeral
  socklen_t addrLen = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addrLen) != 0) {
    int err = errno;
    LOOP_WARN("listen: bind/listen on %s failed: %s", addressText(addr.sin_addr.s_addr, 0).c_str(),
              errorText(err).c_str());
    close(fd);
    return ncclSystemError;
  }
  WireHandle wire{kHandleMagic, addr.sin_addr.s_addr, addr.sin_port, 0};
  memset(handle, 0, kHandleBytes);
  memcpy(handle, &wire, sizeof(wire));
  auto* comm = new ListenComm;
  comm->fd = fd;
  *listenComm = comm;
  return ncclSuccess;
}

// A connection the sender is still setting up, keyed by the handle's bytes: NCCL calls connect again
// with the same handle until the comm comes back.
struct PendingConnect {
  int fd = -1;
  bool connected = false;
  size_t helloSent = 0;
};
std::mutex gPendingMutex;
std::map<HandleKey, PendingConnect> gPendingConnects;  // guarded by gPendingMutex


// One step of a pending connect; *sendComm is set once the hello has gone out.
ncclResult_t advanceConnect(PendingConnect* pending, const WireHandle& wire, void** sendComm) {
  if (!pending->connected) {
    pollfd waitFor{pending->fd, POLLOUT, 0};
    int ready = poll(&waitFor, 1, 0);
    if (ready == 0 || (ready < 0 && errno == EINTR)) return ncclSuccess;
    int err = 0;
    socklen_t errLen = sizeof(err);
    if (ready < 0 || getsockopt(pending->fd, SOL_SOCKET, SO_ERROR, &err, &errLen) != 0) err = errno;
    if (err != 0) {
      LOOP_WARN("connect to %s failed: %s", addressText(wire.addr, wire.port).c_str(), errorText(err).c_str());
      return ncclSystemError;
    }
    pending->connected = true;
  }
  unsigned char hello[kHelloBytes];
  memcpy(hello, &kHelloMagic, kHelloBytes);
  while (pending->helloSent < kHelloBytes) {
    ssize_t sent = send(pending->fd, hello + pending->helloSent, kHelloBytes - pending->helloSent,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (wouldBlock(errno)) return ncclSuccess;
      int err = errno;
      LOOP_WARN("connect to %s: sending the hello failed: %s", addressText(wire.addr, wire.port).c_str(),
                errorText(err).c_str());
      return ncclSystemError;
    }
    pending->helloSent += static_cast<size_t>(sent);
  }
  auto* comm = new Comm;
  comm->isSend = true;
  comm->fd = pending->fd;
  pending->fd = -1;  // the comm owns it now
  *sendComm = comm;
  return ncclSuccess;
}

ncclResult_t loopConnect(int dev, void* handle, void** sendComm) {
  if (handle == nullptr || sendComm == nullptr) return ncclInvalidArgument;
  *sendComm = nullptr;
  if (!validDevice(dev)) {
    LOOP_WARN("connect: device %d out of range", dev);
    return ncclInvalidArgument;
  }
  WireHandle wire;
  memcpy(&wire, handle, sizeof(wire));
  if (wire.magic != kHandleMagic) {
    LOOP_WARN("connect: the handle is not a weftloop handle (magic 0x%llx)",
              static_cast<unsigned long long>(wire.magic));
    return ncclInvalidArgument;
  }
  HandleKey key;
  memcpy(key.data(), &wire, sizeof(wire));
  std::lock_guard<std::mutex> lock(gPendingMutex);
  auto found = gPendingConnects.find(key);
  if (found == gPendingConnects.end()) {
    // First call: only start the connection (the contract: the first call returns no comm).
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      LOOP_WARN("connect: socket() failed: %s", errorText(errno).c_str());
      return ncclSystemError;
    }
    setNoDelay(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = wire.addr;
    addr.sin_port = wire.port;
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno != EINPROGRESS) {
      int err = errno;
      LOOP_WARN("connect to %s failed: %s", addressText(wire.addr, wire.port).c_str(), errorText(err).c_str());
      close(fd);
      return ncclSystemError;
    }
    PendingConnect pending;
    pending.fd = fd;
    pending.connected = rc == 0;
    gPendingConnects.emplace(key, pending);
    return ncclSuccess;
  }
  ncclResult_t result = advanceConnect(&found->second, wire, sendComm);
  if (result != ncclSuccess) closeFd(&found->second.fd);
  if (result != ncclSuccess || *sendComm != nullptr) gPendingConnects.erase(found);
  return result;
}

ncclResult_t loopAccept(void* listenComm, void** recvComm) {
  if (listenComm == nullptr || recvComm == nullptr) return ncclInvalidArgument;
  *recvComm = nullptr;
  auto* listener = static_cast<ListenComm*>(listenComm);
  for (;;) {
    if (listener->acceptedFd < 0) {
      int fd = accept4(listener->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (wouldBlock(errno)) return ncclSuccess;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        LOOP_WARN("accept failed: %s", errorText(errno).c_str());
        return ncclSystemError;
      }
      setNoDelay(fd);
      listener->acceptedFd = fd;
      listener->helloBytes = 0;
    }
    ssize_t got = recv(listener->acceptedFd, listener->hello + listener->helloBytes,
                       kHelloBytes - listener->helloBytes, MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && wouldBlock(errno)) return ncclSuccess;
    if (got <= 0) {  // a peer that left before its hello is dropped; keep waiting for others
      LOOP_WARN("accept: a connection closed before its hello (%s); dropped",
                got == 0 ? "end of stream" : errorText(errno).c_str());
      closeFd(&listener->acceptedFd);
      continue;
    }
    listener->helloBytes += static_cast<size_t>(got);
    if (listener->helloBytes < kHelloBytes) continue;
    uint64_t hello;
    memcpy(&hello, listener->hello, kHelloBytes);
    if (hello != kHelloMagic) {
      LOOP_WARN("accept: a connection sent a wrong hello 0x%llx; dropped", static_cast<unsigned long long>(hello));
      closeFd(&listener->acceptedFd);
      continue;
    }
    auto* comm = new Comm;
    comm->isSend = false;
    comm->fd = listener->acceptedFd;
    listener->acceptedFd = -1;
    *recvComm = comm;
    return ncclSuccess;
  }
}

// ---------------------------------------------------------------------------------------------
// Memory registration, posting and progress.

ncclResult_t loopRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  *mhandle = nullptr;
  if (type != kPtrHost) {
    LOOP_WARN("regMr: memory type %d is not host memory (weftloop moves host memory only)", type);
    return ncclInvalidArgument;
  }
  uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  *mhandle = new MemHandle{static_cast<Comm*>(comm), begin, begin + size};
  return ncclSuccess;
}

ncclResult_t loopRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInvalidUsage; }

ncclResult_t loopDeregMr(void*, void* mhandle) {
  delete static_cast<MemHandle*>(mhandle);
  return ncclSuccess;
}

// The buffer must be registered on this comm and [data, data + size) must lie inside the registration.
ncclResult_t checkRange(Comm* comm, void* mhandle, const void* data, size_t size, const char* call) {
  auto* mh = static_cast<MemHandle*>(mhandle);
  if (mh == nullptr) {
    LOOP_WARN("%s: no memory handle", call);
    return ncclInvalidArgument;
  }
  if (mh->comm != comm) {
    LOOP_WARN("%s: the memory handle was registered on another comm", call);
    return ncclInvalidArgument;
  }
  uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  if (begin < mh->begin || begin > mh->end || size > mh->end - begin) {
    LOOP_WARN("%s: [%p, +%zu) lies outside the registered [%p, +%zu)", call, data, size,
              reinterpret_cast<void*>(mh->begin), static_cast<size_t>(mh->end - mh->begin));
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

__attribute__((format(printf, 3, 4))) void failComm(Comm* comm, ncclResult_t error, const char* fmt, ...) {
  char text[400];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  comm->error = error;
  LOOP_WARN("%s comm: %s", comm->isSend ? "send" : "receive", text);
}

void failOnSocketError(Comm* comm, int err, const char* what) {
  if (peerGone(err)) {
    failComm(comm, ncclRemoteError, "the peer reset the connection while %s (%s)", what, errorText(err).c_str());
  } else {
    failComm(comm, ncclSystemError, "%s failed: %s", what, errorText(err).c_str());
  }
}

void progressSends(Comm* comm) {
  if (comm->wire.empty()) return;
  // A peer that closed its end cannot take what is still queued; TCP would only say so on a later send.
  char peek;
  ssize_t peeked = recv(comm->fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT);
  if (peeked == 0) {
    failComm(comm, ncclRemoteError, "the peer closed the connection with %zu send(s) incomplete",
             comm->wire.size());
    return;
  }
  if (peeked < 0 && !wouldBlock(errno) && errno != EINTR) {
    failOnSocketError(comm, errno, "checking the connection");
    return;
  }
  while (!comm->wire.empty()) {
    Request* req = comm->wire.front();
    iovec parts[2];
    int partCount = 0;
    if (req->headerDone < sizeof(FrameHeader)) {
      parts[partCount++] = {reinterpret_cast<char*>(&req->header) + req->headerDone,
                            sizeof(FrameHeader) - req->headerDone};
    }
    if (req->payloadDone < req->capacity) {
      parts[partCount++] = {req->data + req->payloadDone, req->capacity - req->payloadDone};
    }
    if (partCount == 0) {
      req->complete = true;
      comm->wire.pop_front();
      continue;
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = partCount;
    ssize_t sent = sendmsg(comm->fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (!wouldBlock(errno)) failOnSocketError(comm, errno, "sending");
      return;
    }
    size_t fromHeader = std::min(static_cast<size_t>(sent), sizeof(FrameHeader) - req->headerDone);
    req->headerDone += fromHeader;
    req->payloadDone += static_cast<size_t>(sent) - fromHeader;
  }
}

// Reads at most `bytes` into `into`. Returns false when nothing more can be read now (or the comm failed).
bool receiveSome(Comm* comm, void* into, size_t bytes, size_t* done) {
  for (;;) {
    ssize_t got = recv(comm->fd, into, bytes, MSG_DONTWAIT);
    if (got > 0) {
      *done += static_cast<size_t>(got);
      return true;
    }
    if (got == 0) {
      failComm(comm, ncclRemoteError, "the peer closed the connection with %zu receive(s) incomplete",
               comm->wire.size());
      return false;
    }
    if (errno == EINTR) continue;
    if (!wouldBlock(errno)) failOnSocketError(comm, errno, "receiving");
    return false;
  }
}

// Frames are read one at a time and never past their end, so the payload lands straight in the buffer
// of the request it belongs to.
void progressReceives(Comm* comm) {
  while (!comm->wire.empty()) {
    Request* req = comm->wire.front();
    if (req->headerDone < sizeof(FrameHeader)) {
      if (!receiveSome(comm, reinterpret_cast<char*>(&req->header) + req->headerDone,
                       sizeof(FrameHeader) - req->headerDone, &req->headerDone)) {
        return;
      }
      if (req->headerDone < sizeof(FrameHeader)) continue;
      const FrameHeader& header = req->header;
      if (header.magic != kFrameMagic) {
        failComm(comm, ncclSystemError, "corrupt stream: frame magic 0x%x", header.magic);
        return;
      }
      if (header.tag != req->tag) {
        failComm(comm, ncclSystemError, "message tag %d does not match the posted receive's tag %d", header.tag,
                 req->tag);
        return;
      }
      if (header.size > req->capacity) {
        failComm(comm, ncclSystemError, "message of %llu bytes is larger than the posted receive of %zu bytes",
                 static_cast<unsigned long long>(header.size), req->capacity);
        return;
      }
    }
    if (req->payloadDone < req->header.size) {
      if (!receiveSome(comm, req->data + req->payloadDone, req->header.size - req->payloadDone,
                       &req->payloadDone)) {
        return;
      }
      if (req->payloadDone < req->header.size) continue;
    }
    req->complete = true;
    comm->wire.pop_front();
  }
}

void progress(Comm* comm) {
  if (comm->error != ncclSuccess) return;
  if (comm->isSend) {
    progressSends(comm);
  } else {
    progressReceives(comm);
  }
}

// Shared by isend and irecv: checks the comm, the buffer and the in-flight limit, then queues a request
// (*request stays null when the comm already has kMaxInFlight live requests).
ncclResult_t postRequest(void* commPtr, bool isSend, void* data, size_t size, int tag, void* mhandle,
                         void** request, Request** posted) {
  const char* call = isSend ? "isend" : "irecv";
  *posted = nullptr;
  if (request == nullptr || commPtr == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  auto* comm = static_cast<Comm*>(commPtr);
  if (comm->isSend != isSend) {
    LOOP_WARN("%s on a %s comm", call, comm->isSend ? "send" : "receive");
    return ncclInvalidArgument;
  }
  ncclResult_t inRange = checkRange(comm, mhandle, data, size, call);
  if (inRange != ncclSuccess) return inRange;
  if (comm->error != ncclSuccess) return comm->error;
  if (comm->live.size() >= kMaxInFlight) return ncclSuccess;
  comm->live.push_back(std::make_unique<Request>());
  Request* req = comm->live.back().get();
  req->comm = comm;
  req->isSend = isSend;
  req->data = static_cast<unsigned char*>(data);
  req->capacity = size;
  req->tag = tag;
  *posted = req;
  *request = req;
  return ncclSuccess;
}

ncclResult_t loopIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  Request* req;
  ncclResult_t result = postRequest(sendComm, true, data, size, tag, mhandle, request, &req);
  if (req == nullptr) return result;
  req->header = FrameHeader{kFrameMagic, tag, size};
  req->sendNumber = ++gSendsPosted;
  long long failAfter = gFailAfterSends.load();
  if (failAfter >= 0 && req->sendNumber > static_cast<unsigned long long>(failAfter)) {
    req->injectedFailure = true;  // never reaches the wire: the receiver simply waits
  } else {
    req->comm->wire.push_back(req);
  }
  return ncclSuccess;
}

ncclResult_t checkReceiveCount(int n) {
  if (n == 1) return ncclSuccess;
  LOOP_WARN("irecv: %d receives grouped; weftloop takes exactly 1 (maxRecvs = 1)", n);
  return ncclInvalidArgument;
}

// The version wrappers check n == 1 and pass the first element of each array.
ncclResult_t loopIrecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  Request* req;
  ncclResult_t result = postRequest(recvComm, false, data, size, tag, mhandle, request, &req);
  if (req != nullptr) req->comm->wire.push_back(req);
  return result;
}

ncclResult_t loopIflush(void*, int, void**, int*, void**, void** request) {
  if (request != nullptr) *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t loopTest(void* request, int* done, int* sizes) {
  if (request == nullptr || done == nullptr) return ncclInvalidArgument;
  *done = 0;
  auto* req = static_cast<Request*>(request);
  Comm* comm = req->comm;
  if (req->injectedFailure) {
    if (!req->injectedWarned) {
      LOOP_WARN("isend #%llu fails: injected by WEFT_LOOP_NET_FAIL_AFTER_SENDS=%lld", req->sendNumber,
                gFailAfterSends.load());
      req->injectedWarned = true;
    }
    return ncclSystemError;
  }
  progress(comm);
  if (!req->complete) return comm->error;
  *done = 1;
  if (sizes != nullptr) *sizes = static_cast<int>(req->isSend ? req->capacity : req->header.size);
  auto owner = std::find_if(comm->live.begin(), comm->live.end(),
                            [req](const std::unique_ptr<Request>& held) { return held.get() == req; });
  comm->live.erase(owner);  // frees req
  return ncclSuccess;
}

ncclResult_t loopCloseComm(void* commPtr) {
  auto* comm = static_cast<Comm*>(commPtr);
  if (comm == nullptr) return ncclSuccess;
  closeFd(&comm->fd);
  delete comm;  // its requests, incomplete or failed, go with it
  return ncclSuccess;
}

ncclResult_t loopCloseListen(void* listenComm) {
  auto* listener = static_cast<ListenComm*>(listenComm);
  if (listener == nullptr) return ncclSuccess;
  closeFd(&listener->fd);
  closeFd(&listener->acceptedFd);
  delete listener;
  return ncclSuccess;
}

ncclResult_t loopGetDeviceMr(void*, void*, void** dptrMhandle) {
  if (dptrMhandle != nullptr) *dptrMhandle = nullptr;
  return ncclSuccess;
}

ncclResult_t loopIrecvConsumed(void*, int, void*) { return ncclSuccess; }

// ---------------------------------------------------------------------------------------------
// Per-version entry points: the device handle is never written (no offload), sizes are converted.

ncclResult_t connectNoOffload(int dev, void* handle, void** sendComm, DeviceHandle**) {
  return loopConnect(dev, handle, sendComm);
}
ncclResult_t acceptNoOffload(void* listenComm, void** recvComm, DeviceHandle**) {
  return loopAccept(listenComm, recvComm);
}

ncclResult_t v8GetProperties(int dev, PropertiesV8* props) {
  if (props == nullptr) return ncclInvalidArgument;
  PropertiesV9 full;
  ncclResult_t result = loopGetProperties(dev, &full);
  if (result != ncclSuccess) return result;
  props->name = full.name;
  props->pciPath = full.pciPath;
  props->guid = full.guid;
  props->ptrSupport = full.ptrSupport;
  props->regIsGlobal = full.regIsGlobal;
  props->speed = full.speed;
  props->port = full.port;
  props->latency = full.latency;
  props->maxComms = full.maxComms;
  props->maxRecvs = full.maxRecvs;
  props->netDeviceType = full.netDeviceType;
  props->netDeviceVersion = full.netDeviceVersion;
  return ncclSuccess;
}

ncclResult_t v8Isend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) {
    if (request != nullptr) *request = nullptr;
    LOOP_WARN("isend: negative size %d", size);
    return ncclInvalidArgument;
  }
  return loopIsend(sendComm, data, static_cast<size_t>(size), tag, mhandle, request);
}

ncclResult_t v8Irecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (request != nullptr) *request = nullptr;
  ncclResult_t ok = checkReceiveCount(n);
  if (ok != ncclSuccess) return ok;
  if (data == nullptr || sizes == nullptr || tags == nullptr || mhandles == nullptr) return ncclInvalidArgument;
  if (sizes[0] < 0) {
    LOOP_WARN("irecv: negative size %d", sizes[0]);
    return ncclInvalidArgument;
  }
  return loopIrecv(recvComm, data[0], static_cast<size_t>(sizes[0]), tags[0], mhandles[0], request);
}

#ifndef WEFT_LOOP_ONLY_V8
ncclResult_t v9Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request) {
  if (request != nullptr) *request = nullptr;
  ncclResult_t ok = checkReceiveCount(n);
  if (ok != ncclSuccess) return ok;
  if (data == nullptr || sizes == nullptr || tags == nullptr || mhandles == nullptr) return ncclInvalidArgument;
  return loopIrecv(recvComm, data[0], sizes[0], tags[0], mhandles[0], request);
}

ncclResult_t loopMakeVDevice(int*, VirtualDeviceProps*) { return ncclInvalidUsage; }

ncclResult_t v10Init(Logger logger, ProfilerCallback) { return loopInit(logger); }

ncclResult_t v10Connect(int dev, CommConfig*, void* handle, void** sendComm, DeviceHandle**) {
  return loopConnect(dev, handle, sendComm);
}

ncclResult_t v10Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return loopIsend(sendComm, data, size, tag, mhandle, request);
}

ncclResult_t v10Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                      void** request) {
  return v9Irecv(recvComm, n, data, sizes, tags, mhandles, request);
}
#endif

}  // namespace

// The tables NCCL-compatible loaders look up by name: C symbols, the only ones this library exports.
extern "C" {

__attribute__((visibility("default"))) PluginV8 ncclNetPlugin_v8 = {
    kPluginName,     loopInit,        loopDevices,     v8GetProperties, loopListen,
    connectNoOffload, acceptNoOffload, loopRegMr,      loopRegMrDmaBuf, loopDeregMr,
    v8Isend,         v8Irecv,         loopIflush,      loopTest,        loopCloseComm,
    loopCloseComm,   loopCloseListen, loopGetDeviceMr, loopIrecvConsumed,
};

#ifndef WEFT_LOOP_ONLY_V8
__attribute__((visibility("default"))) PluginV9 ncclNetPlugin_v9 = {
    kPluginName,     loopInit,        loopDevices,     loopGetProperties, loopListen,
    connectNoOffload, acceptNoOffload, loopRegMr,      loopRegMrDmaBuf,   loopDeregMr,
    loopIsend,       v9Irecv,         loopIflush,      loopTest,          loopCloseComm,
    loopCloseComm,   loopCloseListen, loopGetDeviceMr, loopIrecvConsumed, loopMakeVDevice,
};

__attribute__((visibility("default"))) PluginV10 ncclNetPlugin_v10 = {
    kPluginName,     v10Init,         loopDevices,     loopGetProperties, loopListen,
    v10Connect,      acceptNoOffload, loopRegMr,       loopRegMrDmaBuf,   loopDeregMr,
    v10Isend,        v10Irecv,        loopIflush,      loopTest,          loopCloseComm,
    loopCloseComm,   loopCloseListen, loopGetDeviceMr, loopIrecvConsumed, loopMakeVDevice,
};
#endif

}  // extern "C"
