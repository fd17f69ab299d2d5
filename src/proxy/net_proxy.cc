#include "proxy/net_proxy.h"

#include <poll.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "core/log.h"
#include "device/abi.h"

namespace weft::proxy {

using bootstrap::Fd;
using bootstrap::Io;
using bootstrap::SocketAddress;

namespace {

using ull = unsigned long long;
constexpr uint64_t kSteps = dev::kSteps;
// Accepted connections still waiting for their hello, beyond one per expected receive side: more
// than this (a port scanner, a confused job) and the oldest are closed.
constexpr size_t kMaxStrangers = 64;
constexpr int kMaxMissingListed = 8;
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

// The GPU's counters live in host memory shared with a kernel: plain loads and stores with the
// ordering the protocol needs (data before the counter on the writer's side, and after on the reader's).
uint64_t loadAcquire(const volatile uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void storeRelease(volatile uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// A (channel, peer) pair as one number, for lookups.
int64_t key(int channel, int peer) { return (int64_t)channel << 32 | (uint32_t)peer; }

std::string ioWhy(Io io, int err) { return io == Io::kFailed ? strerror(err) : bootstrap::ioText(io); }

Status codeOf(Io io) { return io == Io::kClosed || io == Io::kRefused ? ncclRemoteError : ncclSystemError; }

}  // namespace

// One connection this rank sends on. Steps [sent, prepared) have a header and wait for the socket;
// prepared - sent <= kSteps because the GPU stays within the credit window and credits never pass `sent`.
struct NetProxy::SendConn {
  NetSendSide side;
  std::string what;  // "net proxy (rank 0), channel 3, sending to rank 1 (...)"
  Fd fd;
  Hello hello{};  // as sent: the echo must match it
  Hello echo{};
  size_t echoGot = 0;
  bool confirmed = false;

  DataHeader hdr[dev::kSteps] = {};  // header of step s at [s % kSteps]
  uint64_t prepared = 0;             // the GPU's tail as last read
  uint64_t sent = 0;                 // steps wholly written to the socket
  uint64_t offset = 0;               // bytes of step `sent`'s frame already written
  uint64_t head = 0;                 // the last credit, as stored into side.head
  Credit in{};
  size_t inGot = 0;
  bool peerGone = false;  // the receiver closed in order (bye)
};

// One connection this rank receives on.
struct NetProxy::RecvConn {
  NetRecvSide side;
  std::string what;
  Fd fd;
  bool connected = false;

  uint64_t received = 0;  // steps whose bytes are in: the tail published
  DataHeader hdr{};
  size_t hdrGot = 0;
  bool inPayload = false;  // hdr is checked; its payload is arriving
  uint64_t payloadGot = 0;
  uint64_t headSeen = 0;   // the GPU's head as last read
  uint64_t credited = 0;   // the head last sent in a credit
  Credit out{};
  size_t outDone = 0;
  bool outBusy = false;
  bool peerGone = false;  // the sender closed in order (bye)
};

// An accepted connection that has not yet identified itself with a hello.
struct NetProxy::Stranger {
  Fd fd;
  SocketAddress from;
  Hello hello{};
  size_t got = 0;
  bool done = false;  // refused, closed, or handed to its RecvConn
};

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
// Setup

Status NetProxy::checkSides(const std::vector<NetSendSide>& sends, const std::vector<NetRecvSide>& recvs) const {
  auto bad = [&](const char* kind, size_t i, int channel, int peer, const char* what) {
    WEFT_WARN("net proxy (rank %d): %s side %zu (channel %d, peer %d): %s", cfg_.rank, kind, i, channel, peer, what);
    return ncclInternalError;
  };
  auto badIds = [&](int channel, int peer) {
    return channel < 0 || channel >= dev::kMaxChannels || peer < 0 || peer >= cfg_.nRanks;
  };
  std::unordered_set<int64_t> sendKeys, recvKeys;
  for (size_t i = 0; i < sends.size(); ++i) {
    const NetSendSide& s = sends[i];
    if (badIds(s.channel, s.peer)) return bad("send", i, s.channel, s.peer, "channel or peer out of range");
    if (!s.gpuTail || !s.stepSizes || !s.slots || !s.head || s.stepBytes == 0) {
      return bad("send", i, s.channel, s.peer, "missing counters, slots or step size");
    }
    if (!sendKeys.insert(key(s.channel, s.peer)).second) return bad("send", i, s.channel, s.peer, "twice");
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    const NetRecvSide& r = recvs[i];
    if (badIds(r.channel, r.peer)) return bad("receive", i, r.channel, r.peer, "channel or peer out of range");
    if (!r.slots || !r.tail || !r.gpuHead || r.stepBytes == 0) {
      return bad("receive", i, r.channel, r.peer, "missing counters, slots or step size");
    }
    if (!recvKeys.insert(key(r.channel, r.peer)).second) return bad("receive", i, r.channel, r.peer, "twice");
  }
  return ncclSuccess;
}

Status NetProxy::start(const std::vector<NetSendSide>& sends, const std::vector<NetRecvSide>& recvs,
                       const std::vector<ListenerDesc>& peers) {
  if (started_ || !listener_.valid()) {
    WEFT_WARN("net proxy (rank %d): start() called twice", cfg_.rank);
    return ncclInternalError;
  }
  started_ = true;
  WEFT_TRY(checkSides(sends, recvs));
  if ((int)peers.size() != cfg_.nRanks) {
    WEFT_WARN("net proxy (rank %d): %zu listener descriptors for %d ranks", cfg_.rank, peers.size(), cfg_.nRanks);
    return ncclInternalError;
  }
  for (const NetSendSide& s : sends) {
    sends_.push_back(std::make_unique<SendConn>());
    sends_.back()->side = s;
    sends_.back()->what = describe(s.channel, true, s.peer);
  }
  for (const NetRecvSide& r : recvs) {
    recvs_.push_back(std::make_unique<RecvConn>());
    recvs_.back()->side = r;
    recvs_.back()->what = describe(r.channel, false, r.peer);
    recvByKey_[key(r.channel, r.peer)] = recvs_.back().get();
  }
  const util::Deadline deadline = util::Deadline::afterSeconds(cfg_.setupTimeoutSec);
  WEFT_TRY(connectSends(peers, deadline));
  WEFT_TRY(acceptAndConfirm(deadline));
  listener_.reset();  // every expected connection is in; later ones would only be strangers
  WEFT_INFO(log::kNet, "net proxy (rank %d): %zu send and %zu receive connections up after %.3f s", cfg_.rank,
            sends_.size(), recvs_.size(), deadline.elapsedSeconds());
  for (const auto& c : sends_) keepAlive(c->fd.get());
  for (const auto& c : recvs_) keepAlive(c->fd.get());
  thread_ = std::thread([this] { run(); });
  return ncclSuccess;
}

// Connects and sends the hello; the echo is awaited together with the accepts, so that two ranks
// connecting to each other never wait on one another (the kernel queues connections in the backlog).
Status NetProxy::connectSends(const std::vector<ListenerDesc>& peers, const util::Deadline& deadline) {
  for (auto& c : sends_) {
    const int peer = c->side.peer;
    SocketAddress address;
    std::string why;
    if (checkListenerDesc(peers[peer], cfg_.jobKey, peer, c->what.c_str(), &address, &why) != ncclSuccess) {
      WEFT_WARN("%s", why.c_str());
      return ncclRemoteError;
    }
    int err = 0;
    Io io = bootstrap::connectBlocking(address, deadline, cfg_.abortRequested, false, &c->fd, &err);
    if (io != Io::kOk) {
      WEFT_WARN("%s: cannot connect to its proxy at %s: %s%s", c->what.c_str(), address.toString().c_str(),
                ioWhy(io, err).c_str(),
                io == Io::kRefused ? " (that process has probably exited - check its log)" : "");
      return codeOf(io);
    }
    c->hello = makeHello(cfg_.jobKey, cfg_.rank, peer, c->side.channel, c->side.stepBytes);
    io = bootstrap::sendAll(c->fd.get(), &c->hello, sizeof(Hello), deadline, cfg_.abortRequested, &err);
    if (io != Io::kOk) {
      WEFT_WARN("%s: sending the hello to %s failed: %s", c->what.c_str(), address.toString().c_str(),
                ioWhy(io, err).c_str());
      return codeOf(io);
    }
  }
  return ncclSuccess;
}

Status NetProxy::acceptAndConfirm(const util::Deadline& deadline) {
  std::vector<Stranger> strangers;
  std::vector<pollfd> fds;
  for (;;) {
    std::string missing = missingText();
    if (missing.empty()) return ncclSuccess;
    if (bootstrap::aborted(cfg_.abortRequested)) {
      WEFT_WARN("net proxy (rank %d): connection setup aborted while waiting for %s", cfg_.rank, missing.c_str());
      return ncclSystemError;
    }
    if (deadline.expired()) {
      WEFT_WARN("net proxy (rank %d): connection setup timed out after %.1f s waiting for %s; check those ranks' "
                "logs (setup timeout %lld s)", cfg_.rank, deadline.elapsedSeconds(), missing.c_str(),
                (long long)cfg_.setupTimeoutSec);
      return ncclSystemError;
    }
    fds.clear();
    fds.push_back(pollfd{listener_.get(), POLLIN, 0});
    for (const Stranger& s : strangers) fds.push_back(pollfd{s.fd.get(), POLLIN, 0});
    for (const auto& c : sends_) {
      if (!c->confirmed) fds.push_back(pollfd{c->fd.get(), POLLIN, 0});
    }
    int rc = ::poll(fds.data(), fds.size(), deadline.pollMs(bootstrap::kPollSliceMs));
    if (rc < 0 && errno != EINTR) {
      WEFT_WARN("net proxy (rank %d): poll() during connection setup failed: %s", cfg_.rank, strerror(errno));
      return ncclSystemError;
    }
    if (rc <= 0) continue;
    // Every socket is non-blocking: trying them all is simpler than matching revents and costs little.
    acceptPending(&strangers);
    for (Stranger& s : strangers) {
      if (!s.done && readHello(s)) WEFT_TRY(admit(s, deadline));
    }
    for (size_t i = 0; i < strangers.size();) {
      if (strangers[i].done) strangers.erase(strangers.begin() + i);
      else ++i;
    }
    for (auto& c : sends_) {
      if (!c->confirmed) WEFT_TRY(readEcho(*c));
    }
  }
}

void NetProxy::acceptPending(std::vector<Stranger>* strangers) {
  for (;;) {
    Stranger s;
    int err = bootstrap::acceptOne(listener_.get(), &s.fd, &s.from);
    if (err == ECONNABORTED) continue;
    if (err == EAGAIN) return;
    if (err != 0) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): accept failed: %s", cfg_.rank, strerror(err));
      return;
    }
    strangers->push_back(std::move(s));
    if (strangers->size() > kMaxStrangers + recvs_.size()) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): too many connections without a hello; closing the one from %s",
                cfg_.rank, strangers->front().from.toString().c_str());
      strangers->erase(strangers->begin());
    }
  }
}

bool NetProxy::readHello(Stranger& s) {
  while (s.got < sizeof(Hello)) {
    ssize_t n = bootstrap::recvSome(s.fd.get(), reinterpret_cast<char*>(&s.hello) + s.got, sizeof(Hello) - s.got);
    if (n == -EAGAIN) return false;
    if (n <= 0) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): connection from %s closed before its hello (%s)", cfg_.rank,
                s.from.toString().c_str(), n == 0 ? "end of stream" : strerror((int)-n));
      s.done = true;
      return false;
    }
    s.got += (size_t)n;
  }
  return true;
}

// Accepts a complete hello by echoing it, or refuses it (WARN, close) and keeps waiting: a stray
// connection must not fail the communicator, and the expected peer may still come.
Status NetProxy::admit(Stranger& s, const util::Deadline& deadline) {
  s.done = true;
  const Hello& h = s.hello;
  const std::string from = "net proxy (rank " + std::to_string(cfg_.rank) + "): connection from " + s.from.toString();
  std::string why;
  RecvConn* match = nullptr;
  if (checkHello(h, cfg_.jobKey, cfg_.rank, cfg_.nRanks, from.c_str(), &why) == ncclSuccess) {
    auto it = recvByKey_.find(key(h.channel, h.sender));
    if (it != recvByKey_.end()) match = it->second;
    const std::string claim =
        from + " (" + peerName(h.sender) + " sending on channel " + std::to_string(h.channel) + ")";
    if (match == nullptr) {
      why = claim + ": this rank expects no such connection";
    } else if (match->connected) {
      why = claim + ": that connection is already established";
    } else if (h.stepBytes != match->side.stepBytes) {
      why = claim + ": its step size is " + std::to_string(h.stepBytes) + " bytes, this rank's " +
            std::to_string(match->side.stepBytes) + " (do the ranks use different NCCL_BUFFSIZE settings?)";
    }
  }
  if (!why.empty()) {
    WEFT_WARN("%s; connection refused", why.c_str());
    return ncclSuccess;
  }
  int err = 0;
  Io io = bootstrap::sendAll(s.fd.get(), &h, sizeof(h), deadline, cfg_.abortRequested, &err);
  if (io != Io::kOk) {
    WEFT_WARN("%s: answering its hello failed: %s", match->what.c_str(), ioWhy(io, err).c_str());
    return codeOf(io);
  }
  match->fd = std::move(s.fd);
  match->connected = true;
  WEFT_INFO(log::kNet, "%s: connected (from %s)", match->what.c_str(), s.from.toString().c_str());
  return ncclSuccess;
}

Status NetProxy::readEcho(SendConn& c) {
  while (c.echoGot < sizeof(Hello)) {
    ssize_t n =
        bootstrap::recvSome(c.fd.get(), reinterpret_cast<char*>(&c.echo) + c.echoGot, sizeof(Hello) - c.echoGot);
    if (n == -EAGAIN) return ncclSuccess;
    if (n == 0) {
      WEFT_WARN("%s: the peer closed the connection instead of accepting it: it refused the hello (see its log) "
                "or it exited", c.what.c_str());
      return ncclRemoteError;
    }
    if (n < 0) {
      Io io = bootstrap::ioFromErrno((int)-n);
      WEFT_WARN("%s: waiting for the answer to the hello failed: %s", c.what.c_str(), ioWhy(io, (int)-n).c_str());
      return codeOf(io);
    }
    c.echoGot += (size_t)n;
  }
  if (memcmp(&c.echo, &c.hello, sizeof(Hello)) != 0) {
    WEFT_WARN("%s: the peer answered the hello with something else (magic 0x%08x): not a weft net proxy of this job",
              c.what.c_str(), c.echo.magic);
    return ncclRemoteError;
  }
  c.confirmed = true;
  WEFT_INFO(log::kNet, "%s: connected", c.what.c_str());
  return ncclSuccess;
}

std::string NetProxy::missingText() const {
  std::string text;
  int count = 0;
  auto add = [&](const std::string& item) {
    if (count++ < kMaxMissingListed) text += (text.empty() ? "" : "; ") + item;
  };
  for (const auto& c : recvs_) {
    if (!c->connected) add("channel " + std::to_string(c->side.channel) + " from " + peerName(c->side.peer));
  }
  for (const auto& c : sends_) {
    if (!c->confirmed) {
      add("channel " + std::to_string(c->side.channel) + " to " + peerName(c->side.peer) + " (to accept the hello)");
    }
  }
  if (count > kMaxMissingListed) text += "; and " + std::to_string(count - kMaxMissingListed) + " more";
  return text;
}

// ---------------------------------------------------------------------------------------------
// Progress

void NetProxy::wake() {
  if (!sleeping_.load(std::memory_order_relaxed)) return;
  const uint64_t one = 1;
  (void)!::write(wakeFd_.get(), &one, sizeof(one));
}

void NetProxy::run() {
  std::vector<pollfd> fds;
  for (const auto& c : sends_) fds.push_back(pollfd{c->fd.get(), POLLIN, 0});
  for (const auto& c : recvs_) fds.push_back(pollfd{c->fd.get(), POLLIN, 0});
  fds.push_back(pollfd{wakeFd_.get(), POLLIN, 0});
  const size_t nSends = sends_.size();
  auto lastMoved = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point drainUntil{};
  for (;;) {
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
    // One poll for all sockets: which have credits, data or a close to read (a peer that exits is
    // noticed here, whether or not data is flowing). Sends are simply tried: EAGAIN is cheap.
    const bool slow = std::chrono::steady_clock::now() - lastMoved > kIdleSlow;
    if (slow) sleeping_.store(true, std::memory_order_relaxed);
    if (::poll(fds.data(), fds.size(), slow ? kSlowPollMs : 0) < 0) {
      if (errno != EINTR) {
        fail(ncclSystemError, "net proxy (rank %d): poll() failed: %s", cfg_.rank, strerror(errno));
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
    for (size_t i = 0; i < nSends; ++i) {
      if (!progressSend(*sends_[i], fds[i].revents, &moved)) return;
      if (sends_[i]->peerGone) fds[i].fd = -1;
    }
    for (size_t i = 0; i < recvs_.size(); ++i) {
      if (!progressRecv(*recvs_[i], fds[nSends + i].revents, &moved)) return;
      if (recvs_[i]->peerGone) fds[nSends + i].fd = -1;
    }
    if (moved) lastMoved = std::chrono::steady_clock::now();
    else if (!slow) sched_yield();  // the GPU's counters cannot be waited on: stay close, but let others run
  }
}

bool NetProxy::progressSend(SendConn& c, short revents, bool* moved) {
  const uint64_t tail = loadAcquire(c.side.gpuTail);
  if (tail != c.prepared) {
    if (tail < c.prepared) {
      return fail(ncclInternalError, "%s: the GPU's tail went backwards from %llu to %llu", c.what.c_str(),
                  (ull)c.prepared, (ull)tail);
    }
    if (tail > c.head + kSteps) {
      return fail(ncclInternalError, "%s: the GPU published step %llu while the receiver had consumed only %llu "
                  "steps (the slot was not free)", c.what.c_str(), (ull)(tail - 1), (ull)c.head);
    }
    if (c.peerGone) {
      return fail(ncclRemoteError, "%s: the peer closed its proxy (destroyed its communicator), but this rank still "
                  "sends step %llu to it (do the ranks run the same operations?)", c.what.c_str(), (ull)c.prepared);
    }
    for (uint64_t s = c.prepared; s < tail; ++s) {
      const uint64_t bytes = c.side.stepSizes[s % kSteps];  // written before the tail, read after it
      if (bytes > c.side.stepBytes) {
        return fail(ncclInternalError, "%s: step %llu has %llu bytes, more than the %llu-byte slot", c.what.c_str(),
                    (ull)s, (ull)bytes, (ull)c.side.stepBytes);
      }
      c.hdr[s % kSteps] = makeDataHeader(c.side.channel, s, bytes);
    }
    c.prepared = tail;
  }
  if (c.sent < c.prepared && !sendFrames(c, moved)) return false;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.peerGone && !readCredits(c, moved)) return false;
  return true;
}

// Writes as much of steps [sent, prepared) as the socket takes, headers and payloads in one call.
bool NetProxy::sendFrames(SendConn& c, bool* moved) {
  iovec iov[2 * dev::kSteps];
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
  for (uint64_t s = c.sent; s < c.prepared; ++s) {
    const DataHeader& h = c.hdr[s % kSteps];
    add(&h, sizeof(h));
    if (h.bytes > 0) add(c.side.slots + (s % kSteps) * c.side.stepBytes, h.bytes);
  }
  ssize_t n = bootstrap::sendSome(c.fd.get(), iov, count);
  if (n == -EAGAIN) return true;
  if (n < 0) return failIo(c.what, "sending data", (int)-n);
  *moved = true;
  uint64_t left = (uint64_t)n;
  while (c.sent < c.prepared) {
    const uint64_t frame = sizeof(DataHeader) + c.hdr[c.sent % kSteps].bytes;
    if (c.offset + left < frame) {
      c.offset += left;
      break;
    }
    left -= frame - c.offset;
    c.offset = 0;
    ++c.sent;
    stepsSent_.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

bool NetProxy::readCredits(SendConn& c, bool* moved) {
  for (;;) {
    ssize_t n = bootstrap::recvSome(c.fd.get(), reinterpret_cast<char*>(&c.in) + c.inGot, sizeof(Credit) - c.inGot);
    if (n == -EAGAIN) return true;
    if (n == 0) {
      return fail(ncclRemoteError, "%s: the peer closed the connection%s; it probably exited or aborted - check its "
                  "log", c.what.c_str(), c.inGot > 0 ? " in the middle of a credit" : "");
    }
    if (n < 0) return failIo(c.what, "receiving credits", (int)-n);
    *moved = true;
    c.inGot += (size_t)n;
    if (c.inGot < sizeof(Credit)) continue;
    c.inGot = 0;
    std::string why;
    if (checkCredit(c.in, c.side.channel, c.head, c.sent, c.what.c_str(), &why) != ncclSuccess) {
      return fail(ncclRemoteError, "%s", why.c_str());
    }
    if (isBye(c.in)) {
      if (c.sent < c.prepared) {
        return fail(ncclRemoteError, "%s: the peer closed its proxy (destroyed its communicator) while step %llu "
                    "was on its way", c.what.c_str(), (ull)c.sent);
      }
      WEFT_INFO(log::kNet, "%s: the peer closed the connection in order", c.what.c_str());
      c.peerGone = true;
      return true;
    }
    c.head = c.in.head;
    storeRelease(c.side.head, c.head);
  }
}

bool NetProxy::progressRecv(RecvConn& c, short revents, bool* moved) {
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.peerGone && !readData(c, moved)) return false;
  const uint64_t head = loadAcquire(c.side.gpuHead);
  if (head != c.headSeen) {
    if (head < c.headSeen || head > c.received) {
      return fail(ncclInternalError, "%s: the GPU's head moved from %llu to %llu, but %llu steps have arrived",
                  c.what.c_str(), (ull)c.headSeen, (ull)head, (ull)c.received);
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

// Reads frames until the socket is empty. A header is checked before its payload is read; the
// payload goes straight into its slot, which the end-to-end flow control guarantees is free.
bool NetProxy::readData(RecvConn& c, bool* moved) {
  for (;;) {
    if (!c.inPayload) {
      ssize_t n = bootstrap::recvSome(c.fd.get(), reinterpret_cast<char*>(&c.hdr) + c.hdrGot,
                                      sizeof(DataHeader) - c.hdrGot);
      if (n == -EAGAIN) return true;
      if (n == 0) {
        return fail(ncclRemoteError, "%s: the peer closed the connection%s; it probably exited or aborted - check "
                    "its log", c.what.c_str(), c.hdrGot > 0 ? " in the middle of a data header" : "");
      }
      if (n < 0) return failIo(c.what, "receiving data", (int)-n);
      *moved = true;
      c.hdrGot += (size_t)n;
      if (c.hdrGot < sizeof(DataHeader)) continue;
      c.hdrGot = 0;
      const uint64_t windowEnd = loadAcquire(c.side.gpuHead) + kSteps;
      std::string why;
      if (checkDataHeader(c.hdr, c.side.channel, c.received, windowEnd, c.side.stepBytes, c.what.c_str(), &why) !=
          ncclSuccess) {
        return fail(ncclRemoteError, "%s", why.c_str());
      }
      if (isBye(c.hdr)) {
        WEFT_INFO(log::kNet, "%s: the peer closed the connection in order after %llu steps", c.what.c_str(),
                  (ull)c.received);
        c.peerGone = true;
        return true;
      }
      c.inPayload = true;
      c.payloadGot = 0;
    }
    char* slot = c.side.slots + (c.hdr.step % kSteps) * c.side.stepBytes;
    while (c.payloadGot < c.hdr.bytes) {
      ssize_t n = bootstrap::recvSome(c.fd.get(), slot + c.payloadGot, c.hdr.bytes - c.payloadGot);
      if (n == -EAGAIN) return true;
      if (n == 0) {
        return fail(ncclRemoteError, "%s: the peer closed the connection in the middle of step %llu (%llu of %llu "
                    "bytes arrived); it probably exited or aborted - check its log", c.what.c_str(), (ull)c.hdr.step,
                    (ull)c.payloadGot, (ull)c.hdr.bytes);
      }
      if (n < 0) return failIo(c.what, "receiving data", (int)-n);
      *moved = true;
      c.payloadGot += (uint64_t)n;
    }
    c.inPayload = false;
    c.received = c.hdr.step + 1;
    storeRelease(c.side.tail, c.received);
    stepsReceived_.fetch_add(1, std::memory_order_relaxed);
    *moved = true;
  }
}

bool NetProxy::sendCredit(RecvConn& c, bool* moved) {
  iovec iov{reinterpret_cast<char*>(&c.out) + c.outDone, sizeof(Credit) - c.outDone};
  ssize_t n = bootstrap::sendSome(c.fd.get(), &iov, 1);
  if (n == -EAGAIN) return true;
  if (n < 0) return failIo(c.what, "sending a credit", (int)-n);
  *moved = true;
  c.outDone += (size_t)n;
  if (c.outDone == sizeof(Credit)) {
    c.credited = c.out.head;
    c.outBusy = false;
    c.outDone = 0;
  }
  return true;
}

bool NetProxy::fail(Status code, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  WEFT_WARN("%s; this rank's network transfers stop", text);
  failed_ = true;
  shutdownAll();
  if (cfg_.onFailure) cfg_.onFailure(code);
  return false;
}

bool NetProxy::failIo(const std::string& what, const char* doing, int err) {
  if (bootstrap::ioFromErrno(err) == Io::kClosed) {
    return fail(ncclRemoteError, "%s: the connection was reset while %s (%s); the peer probably exited or aborted - "
                "check its log", what.c_str(), doing, strerror(err));
  }
  return fail(ncclSystemError, "%s: %s failed: %s", what.c_str(), doing, strerror(err));
}

// Peers waiting on this rank's connections see them close now and fail fast instead of waiting for
// their timeouts. The descriptors stay open (and owned) until the destructor.
void NetProxy::shutdownAll() {
  for (const auto& c : sends_) ::shutdown(c->fd.get(), SHUT_RDWR);
  for (const auto& c : recvs_) ::shutdown(c->fd.get(), SHUT_RDWR);
}

bool NetProxy::flushed() const {
  for (const auto& c : sends_) {
    if (c->peerGone) continue;
    if (c->offset != 0 || c->sent != c->prepared || loadAcquire(c->side.gpuTail) != c->sent) return false;
  }
  return true;
}

// Best effort, never waits: tells each peer that this side closes in order, where the stream is
// between frames and nothing is owed to the peer. Elsewhere the plain close makes the peer fail,
// which is right: it would otherwise wait for data that never comes. What the peers sent and this
// side never read is read first, and this side only stops writing: a close with unread bytes
// would reset the connection, and a reset may overtake the bye.
void NetProxy::sayGoodbye() {
  for (const auto& c : sends_) {
    if (c->peerGone || c->offset != 0 || c->sent != c->prepared || loadAcquire(c->side.gpuTail) != c->sent) continue;
    DataHeader bye = makeByeData(c->side.channel);
    iovec iov{&bye, sizeof(bye)};
    (void)bootstrap::sendSome(c->fd.get(), &iov, 1);
  }
  for (const auto& c : recvs_) {
    if (c->peerGone || c->outDone != 0) continue;
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
  for (const auto& c : recvs_) finish(c->fd.get());
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
