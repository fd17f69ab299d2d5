#include "proxy/net_proxy.h"

#include <poll.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "core/log.h"
#include "device/abi.h"
#include "device/work_math.h"
#include "proxy/net_proxy_internal.h"

namespace weft::proxy {

using bootstrap::Fd;
using bootstrap::Io;
using bootstrap::SocketAddress;

using detail::kSteps;
using detail::loadAcquire;
using detail::storeRelease;
using ull = detail::ull;

namespace {

// The thread spins (sched_yield between passes) while anything moved in the last kIdleSlow; then it
// waits in poll() for kSlowPollMs at a time (sockets and wake() end the wait at once), so an idle
// communicator costs no core. What it may lose: up to kSlowPollMs before it sees the first step of
// a CUDA graph replayed after a quiet spell (launches call wake()).
constexpr std::chrono::milliseconds kIdleSlow{50};
constexpr int kSlowPollMs = 1;
// How long a destroyed proxy keeps sending what its kernels published before it closes anyway:
// while the peers take the bytes, up to kDrainLimit; once nothing moved for kDrainStall, at once.
constexpr std::chrono::seconds kDrainLimit{10};
constexpr std::chrono::milliseconds kDrainStall{1000};
// Dead hosts that never close their connections: TCP gives up on a silent peer after about
// kKeepIdleSec + kKeepCount x kKeepIntervalSec seconds, or on unacknowledged data after kUserTimeoutMs.
constexpr int kKeepIdleSec = 30, kKeepIntervalSec = 5, kKeepCount = 6;
constexpr unsigned kUserTimeoutMs = 60000;

}  // namespace

NetProxy::NetProxy(const NetProxyConfig& cfg) : cfg_(cfg) {}

NetProxy::~NetProxy() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  if (orderly_) sayGoodbye();
  // The sockets close with their Fds; close() does not wait for the peer (no SO_LINGER).
}

Status NetProxy::listen(const NetProxyConfig& cfg, const SocketAddress& bindAddress, std::unique_ptr<NetProxy>* out) {
  if (cfg.nRanks <= 0 || cfg.rank < 0 || cfg.rank >= cfg.nRanks) {
    WEFT_WARN("net proxy: rank %d of %d is not a valid rank", cfg.rank, cfg.nRanks);
    return ncclInternalError;
  }
  std::unique_ptr<NetProxy> proxy(new NetProxy(cfg));
  proxy->wakeFd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!proxy->wakeFd_.valid()) {
    WEFT_WARN("net proxy (rank %d): eventfd() failed: %s", cfg.rank, strerror(errno));
    return ncclSystemError;
  }
  SocketAddress bound;
  WEFT_TRY(bootstrap::listenOn(bindAddress, &proxy->listener_, &bound));
  proxy->desc_ = makeListenerDesc(cfg.jobKey, cfg.rank, bound);
  WEFT_INFO(log::kNet, "net proxy (rank %d): listening on %s", cfg.rank, bound.toString().c_str());
  *out = std::move(proxy);
  return ncclSuccess;
}

std::string NetProxy::peerName(int peer) const {
  if (peer >= 0 && (size_t)peer < cfg_.peerNames.size() && !cfg_.peerNames[peer].empty()) return cfg_.peerNames[peer];
  return "rank " + std::to_string(peer);
}

std::string NetProxy::describe(int channel, bool send, int peer) const {
  return "net proxy (rank " + std::to_string(cfg_.rank) + "), channel " + std::to_string(channel) +
         (send ? ", sending to peer " : ", receiving from peer ") + peerName(peer);
}

// ---------------------------------------------------------------------------------------------
// Progress

void NetProxy::wake() {
  if (!sleeping_.load(std::memory_order_relaxed)) return;
  const uint64_t one = 1;
  (void)!::write(wakeFd_.get(), &one, sizeof(one));
}

// The poll set: [sends_, recvs_, strangers_, listener, wake], by position. A connection that is
// gone (bye) or not yet made gets -1, which poll() skips.
void NetProxy::buildPollSet(std::vector<pollfd>* fds) const {
  fds->clear();
  for (const auto& c : sends_) fds->push_back(pollfd{c->peerGone ? -1 : c->fd.get(), POLLIN, 0});
  for (const auto& c : recvs_) fds->push_back(pollfd{c->peerGone || !c->connected ? -1 : c->fd.get(), POLLIN, 0});
  for (const Stranger& s : strangers_) fds->push_back(pollfd{s.fd.get(), POLLIN, 0});
  fds->push_back(pollfd{listener_.get(), POLLIN, 0});
  fds->push_back(pollfd{wakeFd_.get(), POLLIN, 0});
}

void NetProxy::run() {
  std::vector<pollfd> fds;
  bool rebuild = true;
  auto lastMoved = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point drainUntil{};
  for (;;) {
    if (incoming_.load(std::memory_order_acquire)) {
      adoptIncoming();
      rebuild = true;
    }
    if (stop_.load(std::memory_order_acquire)) {
      // Destroyed in order: the steps this rank's kernels published still go out (they finished
      // believing them sent), within kDrainLimit; then the peers get a bye.
      const auto now = std::chrono::steady_clock::now();
      if (drainUntil == std::chrono::steady_clock::time_point{}) drainUntil = now + kDrainLimit;
      if (flushed()) {
        orderly_ = true;
        return;
      }
      if (now > drainUntil || now - lastMoved > kDrainStall) {
        WEFT_WARN("net proxy (rank %d): destroyed with steps its kernels published still unsent (the peers stopped "
                  "reading); those peers will see their connections fail", cfg_.rank);
        return;
      }
    }
    if (bootstrap::aborted(cfg_.abortRequested)) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): abort requested; the progress thread stops", cfg_.rank);
      shutdownAll();
      return;
    }
    if (rebuild) buildPollSet(&fds);
    rebuild = false;
    // One poll for all sockets: which have credits, data or a close to read (a peer that exits is
    // noticed here, whether or not data is flowing). Sends are simply tried: EAGAIN is cheap.
    const bool slow = std::chrono::steady_clock::now() - lastMoved > kIdleSlow;
    if (slow) sleeping_.store(true, std::memory_order_relaxed);
    if (::poll(fds.data(), fds.size(), slow ? kSlowPollMs : 0) < 0) {
      if (errno != EINTR) {
        fail(ncclSystemError, cfg_.rank, "net proxy (rank %d): poll() failed: %s", cfg_.rank, strerror(errno));
        return;
      }
      for (pollfd& p : fds) p.revents = 0;
    }
    bool moved = false;
    if (slow) sleeping_.store(false, std::memory_order_relaxed);
    if ((fds.back().revents & POLLIN) != 0) {  // woken: a launch is on its way
      uint64_t count = 0;
      (void)!::read(wakeFd_.get(), &count, sizeof(count));
      moved = true;
    }
    const size_t nSends = sends_.size(), nRecvs = recvs_.size();
    for (size_t i = 0; i < nSends; ++i) {
      const bool gone = sends_[i]->peerGone;
      if (!progressSend(*sends_[i], fds[i].revents, &moved)) return;
      rebuild = rebuild || gone != sends_[i]->peerGone;
    }
    for (size_t i = 0; i < nRecvs; ++i) {
      const bool gone = recvs_[i]->peerGone;
      if (!progressRecv(*recvs_[i], fds[nSends + i].revents, &moved)) return;
      rebuild = rebuild || gone != recvs_[i]->peerGone;
    }
    // Connections made on first use arrive at the listener (rarely: look only when poll says so).
    bool strangerEvent = false;
    for (size_t i = nSends + nRecvs; i + 1 < fds.size(); ++i) strangerEvent = strangerEvent || fds[i].revents != 0;
    if (strangerEvent) {
      welcomeStrangers(&rebuild);
      moved = true;
    }
    if (moved) lastMoved = std::chrono::steady_clock::now();
    else if (!slow) sched_yield();  // the GPU's counters cannot be waited on: stay close, but let others run
  }
}

bool NetProxy::progressSend(SendConn& c, short revents, bool* moved) {
  const uint64_t tail = loadAcquire(c.side.gpuTail);
  if (tail != c.prepared && !prepareSteps(c, tail)) return false;
  if (c.side.llStepBytes != 0 && c.linesQueued == 0 && !scanLines(c)) return false;
  if (c.outCount > 0 && !sendFrames(c, moved)) return false;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.peerGone && !readCredits(c, moved)) return false;
  return true;
}

// The GPU published steps [prepared, tail): each Simple one (its size word names it) is queued.
bool NetProxy::prepareSteps(SendConn& c, uint64_t tail) {
  if (tail < c.prepared) {
    return fail(ncclInternalError, cfg_.rank, "%s: the GPU's tail went backwards from %llu to %llu", c.what.c_str(),
                (ull)c.prepared, (ull)tail);
  }
  if (tail > c.head + kSteps) {
    return fail(ncclInternalError, cfg_.rank,
                "%s: the GPU published step %llu while the receiver had consumed only %llu "
                "steps (the slot was not free)", c.what.c_str(), (ull)(tail - 1), (ull)c.head);
  }
  if (c.peerGone) {
    return fail(ncclRemoteError, c.side.peer,
                "%s: the peer closed its proxy (destroyed its communicator), but this rank still "
                "sends step %llu to it (do the ranks run the same operations?)", c.what.c_str(), (ull)c.prepared);
  }
  for (uint64_t s = c.prepared; s < tail; ++s) {
    // Written before the tail, read after it; but the word of an LL step's slot may be rewritten
    // meanwhile for step s + kSteps (the LL step's credit can come before this proxy reads the
    // tail past it): a plain 8-byte load, either value naming another step.
    const uint64_t word = __atomic_load_n(&c.side.stepSizes[s % kSteps], __ATOMIC_RELAXED);
    if (!dev::stepSizeWordIsFor(word, s) || dev::stepSizeWordIsLL(word)) continue;  // LL: lines go by their flags
    const uint64_t bytes = dev::stepSizeWordBytes(word);
    if (bytes > c.side.stepBytes) {
      return fail(ncclInternalError, cfg_.rank, "%s: step %llu has %llu bytes, more than the %llu-byte slot",
                  c.what.c_str(), (ull)s, (ull)bytes, (ull)c.side.stepBytes);
    }
    if (!queueFrame(c, makeDataHeader(c.side.channel, s, bytes), c.side.slots + (s % kSteps) * c.side.stepBytes)) {
      return false;
    }
  }
  c.prepared = tail;
  return true;
}

bool NetProxy::queueFrame(SendConn& c, const DataHeader& hdr, const char* payload) {
  constexpr size_t kQueue = sizeof(c.out) / sizeof(c.out[0]);
  if (c.outCount == kQueue) {
    return fail(ncclInternalError, cfg_.rank, "%s: more than %zu frames wait for the socket (step %llu)",
                c.what.c_str(), kQueue, (ull)hdr.step);
  }
  c.out[(c.outFirst + c.outCount++) % kQueue] = OutFrame{hdr, payload};
  if (isLines(hdr)) c.linesQueued++;
  return true;
}

// Writes as much of the queued frames as the socket takes, headers and payloads in one call.
bool NetProxy::sendFrames(SendConn& c, bool* moved) {
  constexpr size_t kQueue = sizeof(c.out) / sizeof(c.out[0]);
  iovec iov[2 * kQueue];
  int count = 0;
  uint64_t skip = c.offset;
  auto add = [&](const void* p, uint64_t len) {
    if (skip >= len) {
      skip -= len;
      return;
    }
    iov[count++] = iovec{const_cast<char*>(static_cast<const char*>(p)) + skip, (size_t)(len - skip)};
    skip = 0;
  };
  for (size_t i = 0; i < c.outCount; ++i) {
    const OutFrame& f = c.out[(c.outFirst + i) % kQueue];
    add(&f.hdr, sizeof(f.hdr));
    if (f.hdr.bytes > 0) add(f.payload, f.hdr.bytes);
  }
  ssize_t n = bootstrap::sendSome(c.fd.get(), iov, count);
  if (n == -EAGAIN) return true;
  if (n < 0) return failIo(c.side.peer, c.what, "sending data", (int)-n);
  *moved = true;
  uint64_t left = (uint64_t)n;
  while (c.outCount > 0) {
    const OutFrame& f = c.out[c.outFirst];
    const uint64_t frame = sizeof(DataHeader) + f.hdr.bytes;
    if (c.offset + left < frame) {
      c.offset += left;
      break;
    }
    left -= frame - c.offset;
    c.offset = 0;
    c.sentEnd = std::max(c.sentEnd, f.hdr.step + 1);
    if (isLines(f.hdr)) {
      c.linesQueued--;
    } else {
      stepsSent_.fetch_add(1, std::memory_order_release);
    }
    c.outFirst = (c.outFirst + 1) % kQueue;
    c.outCount--;
  }
  return true;
}

bool NetProxy::readCredits(SendConn& c, bool* moved) {
  for (;;) {
    ssize_t n = bootstrap::recvSome(c.fd.get(), reinterpret_cast<char*>(&c.in) + c.inGot, sizeof(Credit) - c.inGot);
    if (n == -EAGAIN) return true;
    if (n == 0) {
      return fail(ncclRemoteError, c.side.peer,
                  "%s: the peer closed the connection%s; it probably exited or aborted - check its "
                  "log", c.what.c_str(), c.inGot > 0 ? " in the middle of a credit" : "");
    }
    if (n < 0) return failIo(c.side.peer, c.what, "receiving credits", (int)-n);
    *moved = true;
    c.inGot += (size_t)n;
    if (c.inGot < sizeof(Credit)) continue;
    c.inGot = 0;
    std::string why;
    if (checkCredit(c.in, c.side.channel, c.head, c.sentEnd, c.what.c_str(), &why) != ncclSuccess) {
      return fail(ncclRemoteError, c.side.peer, "%s", why.c_str());
    }
    if (isFail(c.in)) return failAfterPeer(c.side.peer, c.in.head, c.what);
    if (isBye(c.in)) {
      if (c.outCount > 0) {
        return fail(ncclRemoteError, c.side.peer,
                    "%s: the peer closed its proxy (destroyed its communicator) while step %llu "
                    "was on its way", c.what.c_str(), (ull)c.out[c.outFirst].hdr.step);
      }
      WEFT_INFO(log::kNet, "%s: the peer closed the connection in order", c.what.c_str());
      c.peerGone = true;
      return true;
    }
    if (c.side.llStepBytes != 0) {
      for (uint64_t s = c.head; s < c.in.head; ++s) {
        if (dev::llWipeAfter(s)) wipeLines(c, s);  // before the GPU may write the slot again
      }
    }
    c.head = c.in.head;
    storeRelease(c.side.head, c.head);
  }
}

bool NetProxy::progressRecv(RecvConn& c, short revents, bool* moved) {
  if (!c.connected) return true;  // made on first use, its sender not yet here: nothing can arrive
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.peerGone && !readData(c, moved)) return false;
  const uint64_t head = loadAcquire(c.side.gpuHead);
  if (head != c.headSeen) {
    if (head < c.headSeen || head > c.arrivedEnd) {
      return fail(ncclInternalError, cfg_.rank,
                  "%s: the GPU's head moved from %llu to %llu, but only steps up to %llu have arrived",
                  c.what.c_str(), (ull)c.headSeen, (ull)head, (ull)c.arrivedEnd);
    }
    c.headSeen = head;
  }
  if (!c.outBusy && c.headSeen > c.credited && !c.peerGone) {
    c.out = makeCredit(c.side.channel, c.headSeen);
    c.outBusy = true;
    c.outDone = 0;
  }
  if (c.outBusy && !c.peerGone && !sendCredit(c, moved)) return false;
  return true;
}

// Reads frames until the socket is empty. A header is checked before its payload is read; a Simple
// payload goes straight into its slot, which the end-to-end flow control guarantees is free, LL
// lines into c.lines first (landLines checks them and stores them in whole words).
bool NetProxy::readData(RecvConn& c, bool* moved) {
  for (;;) {
    if (!c.inPayload) {
      ssize_t n = bootstrap::recvSome(c.fd.get(), reinterpret_cast<char*>(&c.hdr) + c.hdrGot,
                                      sizeof(DataHeader) - c.hdrGot);
      if (n == -EAGAIN) return true;
      if (n == 0) {
        return fail(ncclRemoteError, c.side.peer,
                    "%s: the peer closed the connection%s; it probably exited or aborted - check "
                    "its log", c.what.c_str(), c.hdrGot > 0 ? " in the middle of a data header" : "");
      }
      if (n < 0) return failIo(c.side.peer, c.what, "receiving data", (int)-n);
      *moved = true;
      c.hdrGot += (size_t)n;
      if (c.hdrGot < sizeof(DataHeader)) continue;
      c.hdrGot = 0;
      const RecvWindow window{c.received, loadAcquire(c.side.gpuHead), c.side.stepBytes, c.side.llStepBytes};
      std::string why;
      if (checkDataHeader(c.hdr, c.side.channel, window, c.what.c_str(), &why) != ncclSuccess) {
        return fail(ncclRemoteError, c.side.peer, "%s", why.c_str());
      }
      if (isFail(c.hdr)) return failAfterPeer(c.side.peer, c.hdr.step, c.what);
      if (isBye(c.hdr)) {
        WEFT_INFO(log::kNet, "%s: the peer closed the connection in order after %llu steps", c.what.c_str(),
                  (ull)c.received);
        c.peerGone = true;
        return true;
      }
      c.inPayload = true;
      c.payloadGot = 0;
      if (isLines(c.hdr) && c.lines.size() < c.side.llStepBytes) c.lines.resize(c.side.llStepBytes);
    }
    char* slot = isLines(c.hdr) ? c.lines.data() : c.side.slots + (c.hdr.step % kSteps) * c.side.stepBytes;
    while (c.payloadGot < c.hdr.bytes) {
      ssize_t n = bootstrap::recvSome(c.fd.get(), slot + c.payloadGot, c.hdr.bytes - c.payloadGot);
      if (n == -EAGAIN) return true;
      if (n == 0) {
        return fail(ncclRemoteError, c.side.peer,
                    "%s: the peer closed the connection in the middle of step %llu (%llu of %llu "
                    "bytes arrived); it probably exited or aborted - check its log", c.what.c_str(), (ull)c.hdr.step,
                    (ull)c.payloadGot, (ull)c.hdr.bytes);
      }
      if (n < 0) return failIo(c.side.peer, c.what, "receiving data", (int)-n);
      *moved = true;
      c.payloadGot += (uint64_t)n;
    }
    c.inPayload = false;
    c.arrivedEnd = std::max(c.arrivedEnd, c.hdr.step + 1);
    *moved = true;
    if (isLines(c.hdr)) {
      if (!landLines(c)) return false;
      continue;
    }
    c.received = c.hdr.step + 1;
    storeRelease(c.side.tail, c.received);
    stepsReceived_.fetch_add(1, std::memory_order_release);
  }
}

bool NetProxy::sendCredit(RecvConn& c, bool* moved) {
  iovec iov{reinterpret_cast<char*>(&c.out) + c.outDone, sizeof(Credit) - c.outDone};
  ssize_t n = bootstrap::sendSome(c.fd.get(), &iov, 1);
  if (n == -EAGAIN) return true;
  if (n < 0) return failIo(c.side.peer, c.what, "sending a credit", (int)-n);
  *moved = true;
  c.outDone += (size_t)n;
  if (c.outDone == sizeof(Credit)) {
    c.credited = c.out.head;
    c.outBusy = false;
    c.outDone = 0;
  }
  return true;
}

void detail::warnStop(const char* fmt, va_list args) {
  char text[1024];
  vsnprintf(text, sizeof(text), fmt, args);
  WEFT_WARN("%s; this rank's network transfers stop", text);
}

bool NetProxy::fail(Status code, int culprit, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  detail::warnStop(fmt, args);
  va_end(args);
  failed_.store(true);
  announceFailure(culprit);
  shutdownAll();
  if (cfg_.onFailure) cfg_.onFailure(code);
  return false;
}

bool NetProxy::failIo(int peer, const std::string& what, const char* doing, int err) {
  if (bootstrap::ioFromErrno(err) == Io::kClosed) {
    return fail(ncclRemoteError, peer, "%s: the connection was reset while %s (%s); the peer probably exited or "
                "aborted - check its log", what.c_str(), doing, strerror(err));
  }
  return fail(ncclSystemError, cfg_.rank, "%s: %s failed: %s", what.c_str(), doing, strerror(err));
}

// A peer that stopped on a failure of its own says which rank's connection failed first: that is
// the rank to name here, not the peer (which only passed the failure on).
bool NetProxy::failAfterPeer(int peer, uint64_t culprit, const std::string& what) {
  if (culprit >= (uint64_t)cfg_.nRanks || (int)culprit == peer) {
    return fail(ncclRemoteError, peer, "%s: the peer stopped its network transfers on a failure of its own - check its "
                "log", what.c_str());
  }
  return fail(ncclRemoteError, (int)culprit, "%s: the peer stopped its network transfers after its connection with "
              "peer %s failed; that rank probably exited or aborted - check its log", what.c_str(),
              peerName((int)culprit).c_str());
}

// Best effort, never waits: where a connection is between frames, a fail frame naming the culprit
// goes ahead of the shutdown, so that the peers name the rank that failed first, not this one.
void NetProxy::announceFailure(int culprit) {
  for (const auto& c : sends_) {
    if (c->peerGone || c->offset != 0) continue;
    DataHeader frame = makeFailData(c->side.channel, culprit);
    iovec iov{&frame, sizeof(frame)};
    (void)bootstrap::sendSome(c->fd.get(), &iov, 1);
  }
  for (const auto& c : recvs_) {
    if (c->peerGone || c->outDone != 0 || !c->connected) continue;
    Credit frame = makeFailCredit(c->side.channel, culprit);
    iovec iov{&frame, sizeof(frame)};
    (void)bootstrap::sendSome(c->fd.get(), &iov, 1);
  }
}

// Peers waiting on this rank's connections see them close now and fail fast instead of waiting for
// their timeouts. The descriptors stay open (and owned) until the destructor.
void NetProxy::shutdownAll() {
  for (const auto& c : sends_) ::shutdown(c->fd.get(), SHUT_RDWR);
  for (const auto& c : recvs_) ::shutdown(c->fd.get(), SHUT_RDWR);
}

bool NetProxy::flushed() const {
  for (const auto& c : sends_) {
    if (!c->peerGone && !nothingOwed(*c)) return false;
  }
  return true;
}

// Every step and line the GPU published to this connection is on the wire.
bool NetProxy::nothingOwed(const SendConn& c) const {
  return c.outCount == 0 && loadAcquire(c.side.gpuTail) == c.prepared && !linesPending(c);
}

// Best effort, never waits: tells each peer that this side closes in order, where the stream is
// between frames and nothing is owed to the peer. Elsewhere the plain close makes the peer fail,
// which is right: it would otherwise wait for data that never comes. What the peers sent and this
// side never read is read first, and this side only stops writing: a close with unread bytes
// would reset the connection, and a reset may overtake the bye.
void NetProxy::sayGoodbye() {
  for (const auto& c : sends_) {
    if (c->peerGone || !nothingOwed(*c)) continue;
    DataHeader bye = makeByeData(c->side.channel);
    iovec iov{&bye, sizeof(bye)};
    (void)bootstrap::sendSome(c->fd.get(), &iov, 1);
  }
  for (const auto& c : recvs_) {
    if (c->peerGone || c->outDone != 0 || !c->connected) continue;
    Credit bye = makeByeCredit(c->side.channel);
    iovec iov{&bye, sizeof(bye)};
    (void)bootstrap::sendSome(c->fd.get(), &iov, 1);
  }
  char sink[4096];
  auto finish = [&](int fd) {
    while (bootstrap::recvSome(fd, sink, sizeof(sink)) > 0) {
    }
    ::shutdown(fd, SHUT_WR);
  };
  for (const auto& c : sends_) finish(c->fd.get());
  for (const auto& c : recvs_) {
    if (c->connected) finish(c->fd.get());
  }
}

// TCP keepalive and a user timeout on a connection, so that a peer host that dies without closing
// it fails the communicator instead of leaving it waiting (best effort: a refusal is only logged).
void NetProxy::keepAlive(int fd) const {
  const int on = 1;
  bool ok = setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) == 0;
  ok = ok && setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleSec, sizeof(kKeepIdleSec)) == 0;
  ok = ok && setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalSec, sizeof(kKeepIntervalSec)) == 0;
  ok = ok && setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepCount, sizeof(kKeepCount)) == 0;
  ok = ok && setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &kUserTimeoutMs, sizeof(kUserTimeoutMs)) == 0;
  if (!ok) WEFT_INFO(log::kNet, "net proxy (rank %d): TCP keepalive settings refused: %s", cfg_.rank, strerror(errno));
}

}  // namespace weft::proxy
