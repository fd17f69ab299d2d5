#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <utility>

#include "core/log.h"
#include "device/work_math.h"
#include "proxy/net_proxy_internal.h"

namespace weft::proxy {

using bootstrap::Fd;
using bootstrap::Io;
using bootstrap::SocketAddress;
using detail::codeOf;
using detail::ioWhy;
using detail::key;

namespace {

// Accepted connections still waiting for their hello, beyond one per expected receive side: more
// than this (a port scanner, a confused job) and the oldest are closed.
constexpr size_t kMaxStrangers = 64;
constexpr int kMaxMissingListed = 8;
// How long the progress thread gives the echo of a first-use connection's hello (a fresh socket
// takes 40 bytes at once; this only bounds a peer that stopped reading).
constexpr int64_t kEchoMs = 1000;

}  // namespace

namespace detail {

std::string ioWhy(Io io, int err) { return io == Io::kFailed ? strerror(err) : bootstrap::ioText(io); }

Status codeOf(Io io) { return io == Io::kClosed || io == Io::kRefused ? ncclRemoteError : ncclSystemError; }

}  // namespace detail

Status NetProxy::checkSides(const std::vector<NetSendSide>& sends, const std::vector<NetRecvSide>& recvs) {
  auto bad = [&](const char* kind, size_t i, int channel, int peer, const char* what) {
    WEFT_WARN("net proxy (rank %d): %s side %zu (channel %d, peer %d): %s", cfg_.rank, kind, i, channel, peer, what);
    return ncclInternalError;
  };
  auto badIds = [&](int channel, int peer) {
    return channel < 0 || channel >= dev::kMaxChannels || peer < 0 || peer >= cfg_.nRanks;
  };
  auto badLL = [](const char* slots, uint64_t bytes) {
    return (slots == nullptr) != (bytes == 0) || (bytes != 0 && !dev::llStepBytesValid(bytes));
  };
  std::lock_guard<std::mutex> lock(mutex_);
  std::unordered_set<int64_t> sendKeys = sendKeys_, recvKeys = recvKeys_;
  for (size_t i = 0; i < sends.size(); ++i) {
    const NetSendSide& s = sends[i];
    if (badIds(s.channel, s.peer)) return bad("send", i, s.channel, s.peer, "channel or peer out of range");
    if (!s.gpuTail || !s.stepSizes || !s.slots || !s.head || s.stepBytes == 0) {
      return bad("send", i, s.channel, s.peer, "missing counters, slots or step size");
    }
    if (badLL(s.llSlots, s.llStepBytes)) return bad("send", i, s.channel, s.peer, "LL slots or step size wrong");
    if (!sendKeys.insert(key(s.channel, s.peer)).second) return bad("send", i, s.channel, s.peer, "twice");
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    const NetRecvSide& r = recvs[i];
    if (badIds(r.channel, r.peer)) return bad("receive", i, r.channel, r.peer, "channel or peer out of range");
    if (!r.slots || !r.tail || !r.gpuHead || r.stepBytes == 0) {
      return bad("receive", i, r.channel, r.peer, "missing counters, slots or step size");
    }
    if (badLL(r.llSlots, r.llStepBytes)) return bad("receive", i, r.channel, r.peer, "LL slots or step size wrong");
    if (!recvKeys.insert(key(r.channel, r.peer)).second) return bad("receive", i, r.channel, r.peer, "twice");
  }
  sendKeys_ = std::move(sendKeys);
  recvKeys_ = std::move(recvKeys);
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
  peers_ = peers;
  const util::Deadline deadline = util::Deadline::afterSeconds(cfg_.setupTimeoutSec);
  // Connects and sends every hello first; the echoes are awaited together with the accepts, so that
  // two ranks connecting to each other never wait on one another (the kernel queues connections in
  // the backlog).
  for (auto& c : sends_) WEFT_TRY(connectOne(*c, deadline));
  WEFT_TRY(acceptAndConfirm(deadline));
  WEFT_INFO(log::kNet, "net proxy (rank %d): %zu send and %zu receive connections up after %.3f s", cfg_.rank,
            sends_.size(), recvs_.size(), deadline.elapsedSeconds());
  for (const auto& c : sends_) keepAlive(c->fd.get());
  for (const auto& c : recvs_) keepAlive(c->fd.get());
  thread_ = std::thread([this] { run(); });
  return ncclSuccess;
}

// Connects one send side to its peer's listener and sends the hello.
Status NetProxy::connectOne(SendConn& c, const util::Deadline& deadline) {
  const int peer = c.side.peer;
  SocketAddress address;
  std::string why;
  if (checkListenerDesc(peers_[peer], cfg_.jobKey, peer, c.what.c_str(), &address, &why) != ncclSuccess) {
    WEFT_WARN("%s", why.c_str());
    return ncclRemoteError;
  }
  int err = 0;
  Io io = bootstrap::connectBlocking(address, deadline, cfg_.abortRequested, false, &c.fd, &err);
  if (io != Io::kOk) {
    WEFT_WARN("%s: cannot connect to its proxy at %s: %s%s", c.what.c_str(), address.toString().c_str(),
              ioWhy(io, err).c_str(), io == Io::kRefused ? " (that process has probably exited - check its log)" : "");
    return codeOf(io);
  }
  c.hello = makeHello(cfg_.jobKey, cfg_.rank, peer, c.side.channel, c.side.stepBytes, c.side.llStepBytes);
  io = bootstrap::sendAll(c.fd.get(), &c.hello, sizeof(Hello), deadline, cfg_.abortRequested, &err);
  if (io != Io::kOk) {
    WEFT_WARN("%s: sending the hello to %s failed: %s", c.what.c_str(), address.toString().c_str(),
              ioWhy(io, err).c_str());
    return codeOf(io);
  }
  return ncclSuccess;
}

Status NetProxy::acceptAndConfirm(const util::Deadline& deadline) {
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
    for (const Stranger& s : strangers_) fds.push_back(pollfd{s.fd.get(), POLLIN, 0});
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
    acceptPending();
    for (Stranger& s : strangers_) {
      if (!s.done && readHello(s)) WEFT_TRY(admit(s, deadline));
    }
    for (size_t i = 0; i < strangers_.size();) {
      if (strangers_[i].done) strangers_.erase(strangers_.begin() + i);
      else ++i;
    }
    for (auto& c : sends_) {
      if (!c->confirmed) WEFT_TRY(readEcho(*c));
    }
  }
}

void NetProxy::acceptPending() {
  for (;;) {
    Stranger s;
    int err = bootstrap::acceptOne(listener_.get(), &s.fd, &s.from);
    if (err == ECONNABORTED) continue;
    if (err == EAGAIN) return;
    if (err != 0) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): accept failed: %s", cfg_.rank, strerror(err));
      return;
    }
    strangers_.push_back(std::move(s));
    if (strangers_.size() > kMaxStrangers + recvs_.size()) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): too many connections without a hello; closing the one from %s",
                cfg_.rank, strangers_.front().from.toString().c_str());
      strangers_.erase(strangers_.begin());
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
    if (it == recvByKey_.end()) {
      adoptIncoming();  // declared (expectReceives) after this pass of the progress thread began
      it = recvByKey_.find(key(h.channel, h.sender));
    }
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
    } else if (h.llStepBytes != match->side.llStepBytes) {
      why = claim + ": its LL step size is " + std::to_string(h.llStepBytes) + " bytes, this rank's " +
            std::to_string(match->side.llStepBytes) + " (do the ranks use different NCCL_LL_BUFFSIZE or NCCL_PROTO "
            "settings?)";
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
// Connections made on first use

Status NetProxy::checkRunning(const char* what) const {
  if (!started_) {
    WEFT_WARN("net proxy (rank %d): %s before start()", cfg_.rank, what);
    return ncclInternalError;
  }
  if (bootstrap::aborted(cfg_.abortRequested)) {
    WEFT_WARN("net proxy (rank %d): %s after the communicator was aborted", cfg_.rank, what);
    return ncclSystemError;
  }
  if (failed_.load() || stop_.load()) {
    WEFT_WARN("net proxy (rank %d): %s after its network transfers stopped (see the earlier warning)", cfg_.rank, what);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

Status NetProxy::expectReceives(const std::vector<NetRecvSide>& recvs) {
  WEFT_TRY(checkRunning("receive connections declared"));
  WEFT_TRY(checkSides({}, recvs));
  std::vector<std::unique_ptr<RecvConn>> made;
  for (const NetRecvSide& r : recvs) {
    made.push_back(std::make_unique<RecvConn>());
    made.back()->side = r;
    made.back()->what = describe(r.channel, false, r.peer);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& c : made) incomingRecvs_.push_back(std::move(c));
    incoming_.store(true, std::memory_order_release);
  }
  wake();
  return ncclSuccess;
}

Status NetProxy::addSends(const std::vector<NetSendSide>& sends) {
  WEFT_TRY(checkRunning("send connections added"));
  WEFT_TRY(checkSides(sends, {}));
  const util::Deadline deadline = util::Deadline::afterSeconds(cfg_.setupTimeoutSec);
  std::vector<std::unique_ptr<SendConn>> made;
  Status status = ncclSuccess;
  for (const NetSendSide& side : sends) {  // one after another: each receiver's thread echoes at once
    made.push_back(std::make_unique<SendConn>());
    made.back()->side = side;
    made.back()->what = describe(side.channel, true, side.peer);
    status = connectAndConfirm(*made.back(), deadline);
    if (status != ncclSuccess) break;
  }
  if (status != ncclSuccess) {  // none of them was made: a later call may declare them again
    std::lock_guard<std::mutex> lock(mutex_);
    for (const NetSendSide& side : sends) sendKeys_.erase(key(side.channel, side.peer));
    return status;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& c : made) incomingSends_.push_back(std::move(c));
    incoming_.store(true, std::memory_order_release);
  }
  wake();
  return ncclSuccess;
}

Status NetProxy::connectAndConfirm(SendConn& c, const util::Deadline& deadline) {
  WEFT_TRY(connectOne(c, deadline));
  for (;;) {
    WEFT_TRY(readEcho(c));
    if (c.confirmed) break;
    if (bootstrap::aborted(cfg_.abortRequested)) {
      WEFT_WARN("%s: aborted while waiting for the peer to accept the connection", c.what.c_str());
      return ncclSystemError;
    }
    if (deadline.expired()) {
      WEFT_WARN("%s: the peer did not accept the connection within %.1f s (setup timeout %lld s); check its log",
                c.what.c_str(), deadline.elapsedSeconds(), (long long)cfg_.setupTimeoutSec);
      return ncclSystemError;
    }
    pollfd p{c.fd.get(), POLLIN, 0};
    (void)::poll(&p, 1, deadline.pollMs(bootstrap::kPollSliceMs));
  }
  keepAlive(c.fd.get());
  return ncclSuccess;
}

void NetProxy::adoptIncoming() {
  std::lock_guard<std::mutex> lock(mutex_);
  incoming_.store(false, std::memory_order_relaxed);
  for (auto& c : incomingSends_) sends_.push_back(std::move(c));
  for (auto& c : incomingRecvs_) {
    recvByKey_[key(c->side.channel, c->side.peer)] = c.get();
    recvs_.push_back(std::move(c));
  }
  incomingSends_.clear();
  incomingRecvs_.clear();
}

// The listener and the strangers' sockets are non-blocking: trying them is cheap. A hello that
// fails to be admitted only costs that connection (its sender reports the failure).
void NetProxy::welcomeStrangers(bool* changed) {
  const size_t before = strangers_.size();
  acceptPending();
  bool any = strangers_.size() != before;
  for (Stranger& s : strangers_) {
    if (s.done || !readHello(s)) continue;
    const std::string from = s.from.toString();
    if (admit(s, util::Deadline::afterMs(kEchoMs)) != ncclSuccess) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): the connection from %s is dropped", cfg_.rank, from.c_str());
    }
    auto it = recvByKey_.find(key(s.hello.channel, s.hello.sender));
    if (it != recvByKey_.end() && it->second->connected && it->second->fd.valid()) keepAlive(it->second->fd.get());
  }
  for (size_t i = 0; i < strangers_.size();) {
    if (strangers_[i].done) {
      strangers_.erase(strangers_.begin() + i);
      any = true;
    } else {
      ++i;
    }
  }
  *changed = *changed || any;
}

}  // namespace weft::proxy
