#include "bootstrap/messenger.h"

#include <poll.h>

#include <algorithm>
#include <cstdarg>
#include <cstring>

#include "core/log.h"

namespace weft::bootstrap {

using wire::FrameType;
using Clock = std::chrono::steady_clock;

namespace {
constexpr int kNotifyMs = 500;        // budget of a best-effort failure notice
constexpr int kAcceptsPerProgress = 64;
// A peer we wait for that has never connected is probed (we connect to it) after this long: if
// it is gone, its listen socket refuses, and if it goes later, our connection closes.
constexpr int kProbeAfterMs = 500;
// Its data may still be on its way on another connection when we see it close; wait this long.
constexpr int kGoneGraceMs = 200;

std::string printable(const std::vector<char>& bytes) {
  std::string s(bytes.begin(), bytes.end());
  for (char& c : s) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return s;
}
}  // namespace

struct Messenger::Incoming {
  explicit Incoming(uint64_t key) : reader(key) {}
  Fd fd;
  SocketAddress from;
  FrameReader reader;
  Clock::time_point since = Clock::now();
  int peer = -1;  // set by a valid PeerHello
  bool dead = false;
  // The data message being assembled from frames.
  bool assembling = false;
  uint16_t type = 0;
  int32_t tag = 0;
  uint64_t total = 0;
  std::vector<char> data;
};

Messenger::Messenger(int rank, int nRanks, uint64_t jobKey, const std::atomic<bool>* abort)
    : rank_(rank), nRanks_(nRanks), jobKey_(jobKey), abort_(abort), peers_(nRanks),
      rejects_("rank " + std::to_string(rank)) {}

Messenger::~Messenger() = default;

Status Messenger::listen(const SocketAddress& bindAddress) {
  WEFT_TRY(listenOn(bindAddress, &listener_, &listenAddress_));
  rejects_.setEndpoint("rank " + std::to_string(rank_) + " (" + listenAddress_.toString() + ")");
  return ncclSuccess;
}

std::string Messenger::peerText(int peer) const {
  if (peer < 0 || peer >= nRanks_) return "rank " + std::to_string(peer) + " (out of range)";
  const SocketAddress& a = peers_[peer].address;
  return "rank " + std::to_string(peer) + " (" + (a.valid() ? a.toString() : std::string("address unknown")) + ")";
}

Status Messenger::fail(Status code, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  char full[1200];
  snprintf(full, sizeof(full), "bootstrap (rank %d of %d): %s", rank_, nRanks_, text);
  WEFT_WARN("%s", full);
  failureText_ = full;
  return code;
}

// ---------------------------------------------------------------------------------------------
// Event loop

Status Messenger::progress(int timeoutMs, int extraFd, short extraEvents, short* extraRevents) {
  std::vector<pollfd> fds;
  fds.reserve(incoming_.size() + 2);
  if (listener_.valid()) fds.push_back(pollfd{listener_.get(), POLLIN, 0});
  size_t firstIn = fds.size();
  for (auto& in : incoming_) fds.push_back(pollfd{in->fd.get(), POLLIN, 0});
  if (extraFd >= 0) fds.push_back(pollfd{extraFd, extraEvents, 0});
  int rc = ::poll(fds.data(), fds.size(), timeoutMs);
  if (rc < 0) {
    if (errno == EINTR) return ncclSuccess;
    return fail(ncclSystemError, "poll() failed: %s", strerror(errno));
  }
  if (extraRevents != nullptr) *extraRevents = extraFd >= 0 ? fds.back().revents : 0;
  if (rc > 0) {
    size_t polled = incoming_.size();
    if (listener_.valid() && fds[0].revents != 0) acceptAll();  // appends after the polled ones
    for (size_t i = 0; i < polled; ++i) {
      if (fds[firstIn + i].revents != 0 && !incoming_[i]->dead) drain(*incoming_[i]);
    }
  }
  expireStrangers();
  for (size_t i = 0; i < incoming_.size();) {
    if (incoming_[i]->dead) incoming_.erase(incoming_.begin() + i);
    else ++i;
  }
  return ncclSuccess;
}

void Messenger::acceptAll() {
  for (int n = 0; n < kAcceptsPerProgress; ++n) {
    auto in = std::make_unique<Incoming>(jobKey_);
    int err = acceptOne(listener_.get(), &in->fd, &in->from);
    if (err == EAGAIN) return;
    if (err != 0) {
      WEFT_INFO(log::kBootstrap, "bootstrap: rank %d: accept failed: %s", rank_, strerror(err));
      return;
    }
    incoming_.push_back(std::move(in));
  }
}

void Messenger::drain(Incoming& in) {
  while (!in.dead) {
    FrameReader::Event e = in.reader.pump(in.fd.get());
    switch (e) {
      case FrameReader::Event::kNeedMore:
        return;
      case FrameReader::Event::kFrame:
        if (!onFrame(in)) in.dead = true;
        break;
      case FrameReader::Event::kClosed:
        onGone(in, in.reader.midFrame() || in.assembling
                       ? "closed the connection in the middle of a message" +
                             (in.reader.why().empty() ? std::string() : " (" + in.reader.why() + ")")
                       : std::string("closed the connection"));
        return;
      case FrameReader::Event::kInvalid:
        onGone(in, "sent an invalid frame: " + in.reader.why());
        return;
      case FrameReader::Event::kFailed:
        onGone(in, "lost the connection (" + in.reader.why() + ")");
        return;
    }
  }
}

void Messenger::onGone(Incoming& in, const std::string& why) {
  in.dead = true;
  if (in.peer < 0) {
    if (in.reader.midFrame() || !in.reader.why().empty()) {
      rejects_.reject(in.from.toString(), in.reader.why().empty() ? why : in.reader.why());
    } else {
      WEFT_INFO(log::kBootstrap, "bootstrap: rank %d: connection from %s closed without a hello", rank_,
                in.from.toString().c_str());
    }
    return;
  }
  Peer& p = peers_[in.peer];
  p.in = nullptr;
  p.inClosed = true;
  p.inClosedWhy = why;
  WEFT_INFO(log::kBootstrap, "bootstrap: rank %d: %s %s", rank_, peerText(in.peer).c_str(), why.c_str());
}

bool Messenger::onPeerHello(Incoming& in) {
  const wire::FrameHeader& h = in.reader.header();
  if (h.type != (uint16_t)FrameType::kPeerHello || h.length != sizeof(wire::PeerHello)) {
    rejects_.reject(in.from.toString(), "expected a peer hello of " + std::to_string(sizeof(wire::PeerHello)) +
                                            " bytes, got a " + wire::frameTypeName(h.type) + " frame of " +
                                            std::to_string(h.length) + " bytes");
    return false;
  }
  wire::PeerHello hello;
  memcpy(&hello, in.reader.payload().data(), sizeof(hello));
  SocketAddress listen;
  std::string why;
  if (hello.nRanks != nRanks_) why = "it says nranks=" + std::to_string(hello.nRanks) + ", this rank has " + std::to_string(nRanks_);
  else if (h.rank < 0 || h.rank >= nRanks_ || h.rank == rank_) why = "bad sender rank " + std::to_string(h.rank);
  else if (!wire::decodeAddress(hello.listen, &listen, &why)) why = "bad listen address: " + why;
  else if (peers_[h.rank].in != nullptr || peers_[h.rank].inClosed) why = "rank " + std::to_string(h.rank) + " is already connected";
  else if (peers_[h.rank].address.valid() && peers_[h.rank].address != listen)
    why = "it claims to be rank " + std::to_string(h.rank) + " but listens on " + listen.toString() + ", not " +
          peers_[h.rank].address.toString();
  if (!why.empty()) {
    rejects_.reject(in.from.toString(), "invalid peer hello: " + why);
    return false;
  }
  Peer& p = peers_[h.rank];
  in.peer = h.rank;
  p.in = &in;
  p.everConnected = true;
  if (!p.address.valid()) p.address = listen;  // known from the hello before the address exchange ends
  return true;
}

bool Messenger::onFrame(Incoming& in) {
  if (in.peer < 0) return onPeerHello(in);
  const wire::FrameHeader& h = in.reader.header();
  std::vector<char>& payload = in.reader.payload();
  std::string why;
  if (h.rank != in.peer) {
    why = "sent a frame claiming to come from rank " + std::to_string(h.rank);
  } else if (h.type == (uint16_t)FrameType::kFailure) {
    Peer& p = peers_[in.peer];
    p.failed = true;
    p.failedText = printable(payload);
    if (remoteFailure_.empty()) {
      remoteFailure_ = p.failedText;
      remoteFailurePeer_ = in.peer;
    }
    return true;
  } else if (!wire::isDataType(h.type)) {
    why = std::string("sent an unexpected ") + wire::frameTypeName(h.type) + " frame";
  } else if (in.assembling && (h.type != in.type || h.tag != in.tag || h.total != in.total)) {
    why = "interleaved two messages";
  } else if (in.assembling && in.data.size() + h.length > in.total) {
    why = "sent more bytes than its message holds";
  }
  if (!why.empty()) {
    onGone(in, why);
    return false;
  }
  if (!in.assembling) {
    in.assembling = true;
    in.type = h.type;
    in.tag = h.tag;
    in.total = h.total;
    if (h.length == h.total) {
      in.data = std::move(payload);  // the common case: one frame, no copy
    } else {
      in.data.clear();
      in.data.insert(in.data.end(), payload.begin(), payload.end());
    }
  } else {
    in.data.insert(in.data.end(), payload.begin(), payload.end());
  }
  if (in.data.size() == in.total) {
    peers_[in.peer].inbox.push_back(Message{in.type, in.tag, std::move(in.data)});
    in.data = std::vector<char>();
    in.assembling = false;
  }
  return true;
}

void Messenger::expireStrangers() {
  auto now = Clock::now();
  size_t pending = 0;
  for (auto it = incoming_.rbegin(); it != incoming_.rend(); ++it) {  // newest first
    Incoming& in = **it;
    if (in.dead || in.peer >= 0) continue;
    ++pending;
    if (now - in.since > std::chrono::milliseconds(kHelloTimeoutMs)) {
      rejects_.reject(in.from.toString(), "no valid hello within " + std::to_string(kHelloTimeoutMs / 1000) + " s");
      in.dead = true;
    } else if (pending > kMaxPendingConnections && now - in.since > std::chrono::milliseconds(kPendingGraceMs)) {
      rejects_.reject(in.from.toString(), "too many connections waiting for their hello");
      in.dead = true;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Send and receive

Status Messenger::failPeerGone(int peer, Status code, const std::string& what, const char* op) {
  // The peer may have told us why before it went away: a notice names the root cause.
  (void)progress(0);
  if (peers_[peer].failed) {
    return fail(ncclRemoteError, "%s: %s gave up: %s", op, peerText(peer).c_str(), peers_[peer].failedText.c_str());
  }
  if (!remoteFailure_.empty()) {
    return fail(ncclRemoteError, "%s stopped: %s gave up first: %s", op, peerText(remoteFailurePeer_).c_str(),
                remoteFailure_.c_str());
  }
  if (code == ncclRemoteError) {
    return fail(code, "%s %s during %s; it probably exited - check its log", peerText(peer).c_str(), what.c_str(), op);
  }
  return fail(code, "%s: %s: %s", op, peerText(peer).c_str(), what.c_str());
}

void Messenger::forgetFailureNotices() {
  // A notice may come on a connection not accepted yet: one round accepts, the next reads it.
  for (int round = 0; round < 4; ++round) (void)progress(0);
  for (Peer& p : peers_) {
    p.failed = false;
    p.failedText.clear();
  }
  remoteFailure_.clear();
  remoteFailurePeer_ = -1;
}

bool Messenger::takeMessage(int peer, uint16_t type, int tag, Message* out) {
  std::vector<Message>& box = peers_[peer].inbox;
  for (size_t i = 0; i < box.size(); ++i) {
    if (box[i].type == type && box[i].tag == tag) {
      *out = std::move(box[i]);
      box.erase(box.begin() + i);
      return true;
    }
  }
  return false;
}

// What stops a wait other than the awaited event: a peer's failure notice, abort, the deadline.
Status Messenger::waitChecks(int peer, const util::Deadline& deadline, const char* op, const char* waitingFor) {
  if (!remoteFailure_.empty()) {
    return fail(ncclRemoteError, "%s stopped: %s gave up first: %s", op, peerText(remoteFailurePeer_).c_str(),
                remoteFailure_.c_str());
  }
  if (aborted(abort_)) return fail(ncclSystemError, "%s aborted while waiting for %s", op, peerText(peer).c_str());
  if (closing_.load()) {
    return fail(ncclSystemError, "%s stopped while waiting for %s: the communicator is being destroyed (ncclCommAbort "
                "or ncclCommDestroy from another thread)", op, peerText(peer).c_str());
  }
  if (deadline.expired()) {
    return fail(ncclSystemError, "%s timed out after %.1f s %s %s (NCCL_BOOTSTRAP_TIMEOUT=%lld s)", op,
                deadline.elapsedSeconds(), waitingFor, peerText(peer).c_str(), (long long)kBootstrapTimeout.get());
  }
  return ncclSuccess;
}

Status Messenger::recv(int peer, FrameType type, int tag, void* data, size_t bytes, const util::Deadline& deadline,
                       const char* op) {
  if (peer < 0 || peer >= nRanks_) return fail(ncclInvalidArgument, "%s: peer rank %d is out of range", op, peer);
  Message m;
  for (;;) {
    if (takeMessage(peer, (uint16_t)type, tag, &m)) {
      if (m.data.size() != bytes) {
        return fail(ncclInvalidUsage, "%s: %s sent %zu bytes (tag %d) but this rank expected %zu bytes", op,
                    peerText(peer).c_str(), m.data.size(), tag, bytes);
      }
      if (bytes > 0) memcpy(data, m.data.data(), bytes);
      ++traffic_.messagesReceived;
      traffic_.bytesReceived += bytes;
      return ncclSuccess;
    }
    if (peer == rank_) return fail(ncclInvalidUsage, "%s: receive from this rank itself (tag %d) without a matching send", op, tag);
    Peer& p = peers_[peer];
    if (p.failed) {
      return fail(ncclRemoteError, "%s: %s gave up: %s", op, peerText(peer).c_str(), p.failedText.c_str());
    }
    if (p.inClosed) {
      bool exited = p.inClosedWhy.compare(0, 6, "closed") == 0 || p.inClosedWhy.compare(0, 4, "lost") == 0;
      return fail(ncclRemoteError, "%s %s during %s; %s", peerText(peer).c_str(), p.inClosedWhy.c_str(), op,
                  exited ? "it probably exited - check its log" : "is it running the same weft build?");
    }
    WEFT_TRY(waitChecks(peer, deadline, op,
                        p.everConnected ? "waiting for a message from" : "waiting for a connection from"));
    int watchFd = -1;
    if (!p.everConnected) WEFT_TRY(watchSilentPeer(peer, deadline, op, &watchFd));
    short rev = 0;
    WEFT_TRY(progress(deadline.pollMs(kPollSliceMs), watchFd, POLLIN, &rev));
    if (watchFd >= 0 && rev != 0) {
      // This connection only carries our data: anything readable means the peer closed it.
      char byte;
      ssize_t n = ::recv(watchFd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        markOutBroken(peer, "closed the connection");
      }
    }
  }
}

void Messenger::markOutBroken(int peer, const std::string& why) {
  Peer& p = peers_[peer];
  p.out.reset();
  p.outBroken = true;
  p.outBrokenWhy = why;
  p.brokenAt = Clock::now();
}

// For a recv from a peer that has never connected to us: after a short wait, connect to it (a
// refusal means it is gone), then watch that connection; if it closes and the peer still has not
// connected after a grace period, the peer is gone. Without this, a peer that died right after the
// rendezvous would only be noticed at the deadline.
Status Messenger::watchSilentPeer(int peer, const util::Deadline& deadline, const char* op, int* watchFd) {
  Peer& p = peers_[peer];
  if (p.outBroken) {
    if (Clock::now() - p.brokenAt < std::chrono::milliseconds(kGoneGraceMs)) return ncclSuccess;
    return failPeerGone(peer, ncclRemoteError, p.outBrokenWhy + " before sending anything to this rank", op);
  }
  if (!p.out.valid()) {
    if (!p.address.valid() || deadline.elapsedSeconds() * 1000 < kProbeAfterMs) return ncclSuccess;
    WEFT_TRY(ensureConnected(peer, deadline, op));
  }
  *watchFd = p.out.get();
  return ncclSuccess;
}

Status Messenger::writeFrame(int peer, const wire::FrameHeader& h, const void* payload, uint32_t length,
                             const util::Deadline& deadline, const char* op) {
  Peer& p = peers_[peer];
  const size_t total = sizeof(h) + length;
  size_t done = 0;
  while (done < total) {
    iovec iov[2];
    int count = 0;
    if (done < sizeof(h)) iov[count++] = iovec{(char*)&h + done, sizeof(h) - done};
    size_t payloadDone = done > sizeof(h) ? done - sizeof(h) : 0;
    if (length > 0) iov[count++] = iovec{(char*)payload + payloadDone, length - payloadDone};
    ssize_t n = sendSome(p.out.get(), iov, count);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n != -EAGAIN) {
      int err = (int)-n;
      bool closed = ioFromErrno(err) == Io::kClosed;
      markOutBroken(peer, closed ? std::string("closed the connection") : std::string("sending failed: ") + strerror(err));
      return failPeerGone(peer, closed ? ncclRemoteError : ncclSystemError, p.outBrokenWhy, op);
    }
    Status s = waitChecks(peer, deadline, op, "sending to");
    short rev = 0;
    if (!isError(s)) s = progress(deadline.pollMs(kPollSliceMs), p.out.get(), POLLOUT, &rev);
    if (isError(s)) {  // timed out or aborted: a frame cut short leaves the stream unusable
      if (done > 0) markOutBroken(peer, "a message to it was cut short (timed out or aborted while sending)");
      return s;
    }
  }
  return ncclSuccess;
}

Status Messenger::ensureConnected(int peer, const util::Deadline& deadline, const char* op) {
  Peer& p = peers_[peer];
  if (p.out.valid()) return ncclSuccess;
  if (!p.address.valid()) return fail(ncclInternalError, "%s: no address known for %s", op, peerText(peer).c_str());
  int err = startConnect(p.address, &p.out);
  while (err == EINPROGRESS) {
    Status s = waitChecks(peer, deadline, op, "connecting to");
    short rev = 0;
    if (!isError(s)) s = progress(deadline.pollMs(kPollSliceMs), p.out.get(), POLLOUT, &rev);
    if (isError(s)) {
      p.out.reset();  // half open: the next send connects afresh (and says hello) rather than reusing it
      return s;
    }
    if (rev != 0) err = connectResult(p.out.get());
  }
  if (err != 0) {
    // Refused or reset while connecting both mean the peer's process is gone or going (a rank
    // that failed first may exit between accepting and our handshake): that is the peer's fault.
    Io io = ioFromErrno(err);
    bool peerGone = io == Io::kRefused || io == Io::kClosed;
    markOutBroken(peer, io == Io::kRefused ? std::string("refused the connection")
                                           : std::string("cannot connect: ") + strerror(err));
    return failPeerGone(peer, peerGone ? ncclRemoteError : ncclSystemError, p.outBrokenWhy, op);
  }
  wire::PeerHello hello;
  memset(&hello, 0, sizeof(hello));
  hello.nRanks = nRanks_;
  hello.listen = wire::encodeAddress(listenAddress_);
  wire::FrameHeader h = wire::makeHeader(FrameType::kPeerHello, jobKey_, rank_, 0, sizeof(hello), sizeof(hello));
  Status s = writeFrame(peer, h, &hello, sizeof(hello), deadline, op);
  if (isError(s) && !p.outBroken) p.out.reset();  // no hello went out: connect afresh next time
  return s;
}

// A connection this rank only writes to: the peer never writes back, so anything readable on it
// is its end of stream (or a reset): the peer has closed it, most likely by exiting.
bool Messenger::hungUp(int fd) {
  pollfd pfd{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

Status Messenger::send(int peer, FrameType type, int tag, const void* data, size_t bytes,
                       const util::Deadline& deadline, const char* op) {
  if (peer < 0 || peer >= nRanks_) return fail(ncclInvalidArgument, "%s: peer rank %d is out of range", op, peer);
  if (bytes > wire::kMaxMessageBytes) {
    return fail(ncclInvalidArgument, "%s: message of %zu bytes exceeds the bootstrap limit of %llu bytes", op, bytes,
                (unsigned long long)wire::kMaxMessageBytes);
  }
  if (bytes > 0 && data == nullptr) return fail(ncclInvalidArgument, "%s: NULL data for %zu bytes", op, bytes);
  if (peer == rank_) {
    const char* p = static_cast<const char*>(data);
    peers_[rank_].inbox.push_back(Message{(uint16_t)type, tag, std::vector<char>(p, p + bytes)});
    return ncclSuccess;
  }
  Peer& p = peers_[peer];
  if (p.outBroken) {
    return fail(ncclRemoteError, "%s: the connection to %s was lost earlier (%s)", op, peerText(peer).c_str(),
                p.outBrokenWhy.c_str());
  }
  WEFT_TRY(waitChecks(peer, deadline, op, "sending to"));
  if (p.out.valid() && hungUp(p.out.get())) {
    // Written into a socket its peer has closed, the message would vanish without an error.
    markOutBroken(peer, "closed the connection");
    return failPeerGone(peer, ncclRemoteError, p.outBrokenWhy, op);
  }
  WEFT_TRY(ensureConnected(peer, deadline, op));
  const char* bytesPtr = static_cast<const char*>(data);
  size_t offset = 0;
  do {
    uint32_t length = (uint32_t)std::min<size_t>(bytes - offset, wire::kMaxDataFrameBytes);
    wire::FrameHeader h = wire::makeHeader(type, jobKey_, rank_, tag, bytes, length);
    Status s = writeFrame(peer, h, bytesPtr + offset, length, deadline, op);
    if (isError(s)) {  // after whole frames of this message: the receiver would wait for the rest
      if (offset > 0 && !p.outBroken) markOutBroken(peer, "a message to it was cut short (timed out or aborted)");
      return s;
    }
    offset += length;
  } while (offset < bytes);
  ++traffic_.messagesSent;
  traffic_.bytesSent += bytes;
  return ncclSuccess;
}

bool Messenger::quietSend(int peer, FrameType type, const void* payload, uint32_t length) {
  Peer& p = peers_[peer];
  if (p.outBroken || closing()) return false;
  util::Deadline deadline = util::Deadline::afterMs(kNotifyMs);
  int err = 0;
  if (!p.out.valid()) {
    if (!p.address.valid()) return false;
    if (connectBlocking(p.address, deadline, abort_, false, &p.out, &err) != Io::kOk) return false;
    wire::PeerHello hello;
    memset(&hello, 0, sizeof(hello));
    hello.nRanks = nRanks_;
    hello.listen = wire::encodeAddress(listenAddress_);
    wire::FrameHeader h = wire::makeHeader(FrameType::kPeerHello, jobKey_, rank_, 0, sizeof(hello), sizeof(hello));
    if (sendAll(p.out.get(), &h, sizeof(h), deadline, abort_, &err) != Io::kOk ||
        sendAll(p.out.get(), &hello, sizeof(hello), deadline, abort_, &err) != Io::kOk) {
      markOutBroken(peer, "closed the connection");
      return false;
    }
  }
  wire::FrameHeader h = wire::makeHeader(type, jobKey_, rank_, 0, length, length);
  if (sendAll(p.out.get(), &h, sizeof(h), deadline, abort_, &err) != Io::kOk ||
      sendAll(p.out.get(), payload, length, deadline, abort_, &err) != Io::kOk) {
    markOutBroken(peer, "closed the connection");  // a frame may be cut short: the connection is unusable
    return false;
  }
  return true;
}

std::vector<int> Messenger::connectedPeers() const {
  std::vector<int> out;
  for (int p = 0; p < nRanks_; ++p) {
    if (p != rank_ && ((peers_[p].out.valid() && !peers_[p].outBroken) || peers_[p].in != nullptr)) out.push_back(p);
  }
  return out;
}

void Messenger::notifyFailure(int peer, const std::string& text) {
  if (peer < 0 || peer >= nRanks_ || peer == rank_) return;
  std::string t = text.substr(0, wire::kMaxTextBytes - 1);
  bool ok = quietSend(peer, FrameType::kFailure, t.data(), (uint32_t)t.size());
  WEFT_INFO(log::kBootstrap, "bootstrap: rank %d %s %s of its failure", rank_, ok ? "told" : "could not tell",
            peerText(peer).c_str());
}

}  // namespace weft::bootstrap
