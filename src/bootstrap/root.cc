#include "bootstrap/root.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bootstrap/frame_reader.h"
#include "bootstrap/limits.h"
#include "bootstrap/wire.h"
#include "core/log.h"

namespace weft::bootstrap {

using wire::FrameType;
using Clock = std::chrono::steady_clock;

namespace {
std::atomic<int> gDetachedRunning{0};
constexpr int kReplySendMs = 2000;
// How long a failed rendezvous keeps answering late ranks with its error before the root ends.
constexpr int kFailedLingerMs = 10000;
constexpr int kAcceptRetryMs = 20;  // the pause after a failed accept (out of descriptors)

// The detached roots serving now, by job key (abandonDetached finds them there).
std::mutex gDetachedMutex;
std::unordered_map<uint64_t, Root*>& detachedRoots() {
  static auto* roots = new std::unordered_map<uint64_t, Root*>();  // never freed: threads may outlive exit
  return *roots;
}
}  // namespace

struct Root::Conn {
  explicit Conn(uint64_t key) : reader(key) {}
  Fd fd;
  SocketAddress from;
  FrameReader reader;
  Clock::time_point since = Clock::now();
  int slot = -1;  // set by a valid hello
  bool dead = false;
};

// The state of one rendezvous; lives for one call of serve().
class Root::Session {
 public:
  Session(Root& root, const std::atomic<bool>* stop)
      : root_(root), stop_(stop), rejects_("root " + root.address_.toString()), where_(root.address_.toString()) {}
  Status run();

 private:
  enum SlotState { kEmpty, kArrived, kAnswered };

  bool stopRequested() const { return aborted(stop_) || root_.stopSelf_.load(std::memory_order_relaxed); }
  void acceptAll();
  void handle(Conn& c);
  bool onHello(Conn& c);
  void onLeft(Conn& c, const std::string& how);
  void fail(Status code, const std::string& text);
  void answerError(Conn& c);
  void sendReplies();
  void expireStrangers();
  bool sendFrame(Conn& c, FrameType type, int tag, const void* payload, uint32_t length);
  int slotOf(int rank) const;
  int rankOfSlot(int slot) const { return slot < hi_ - lo_ ? lo_ + slot : head_; }
  std::string rankText(int slot) const {
    auto it = slots_.find(slot);
    return "rank " + std::to_string(rankOfSlot(slot)) + " (" +
           (it == slots_.end() ? std::string("?") : it->second.addr.toString()) + ")";
  }

  Root& root_;
  const std::atomic<bool>* stop_;
  RejectLog rejects_;
  std::string where_;
  std::vector<std::unique_ptr<Conn>> conns_;
  util::Deadline deadline_ = util::Deadline::never();
  Clock::time_point firstArrival_;
  bool started_ = false;
  int nRanks_ = 0, nRoots_ = 0, rootIndex_ = 0, lo_ = 0, hi_ = 0, head_ = -1, firstRank_ = -1;
  int expected_ = 0, arrived_ = 0, answered_ = 0;
  // Arrived ranks by slot; a map, so that memory follows real arrivals rather than a claimed nranks.
  struct Slot {
    SlotState state = kEmpty;
    Conn* conn = nullptr;
    SocketAddress addr;
  };
  std::unordered_map<int, Slot> slots_;
  SlotState stateOf(int slot) const {
    auto it = slots_.find(slot);
    return it == slots_.end() ? kEmpty : it->second.state;
  }
  Status failCode_ = ncclSuccess;
  std::string failText_;
  util::Deadline linger_ = util::Deadline::never();  // set by the failure
};

int Root::Session::slotOf(int rank) const {
  if (rank >= lo_ && rank < hi_) return rank - lo_;
  if (rank == head_ && !(head_ >= lo_ && head_ < hi_)) return hi_ - lo_;
  return -1;
}

void Root::Session::acceptAll() {
  for (;;) {
    auto c = std::make_unique<Conn>(root_.jobKey_);
    int err = acceptOne(root_.listener_.get(), &c->fd, &c->from);
    if (err == EAGAIN) return;
    if (err != 0) {
      // Out of descriptors or a transient network error: drop the oldest stranger to make room
      // and let the next poll() try again.
      WEFT_INFO(log::kBootstrap, "bootstrap: root %s: accept failed: %s", where_.c_str(), strerror(err));
      for (auto& old : conns_) {
        if (old->slot < 0 && !old->dead) { old->dead = true; break; }
      }
      // The connection stays queued and the listener readable: without a pause the next poll()
      // returns at once and the root spins while descriptors are short.
      std::this_thread::sleep_for(std::chrono::milliseconds(kAcceptRetryMs));
      return;
    }
    conns_.push_back(std::move(c));
    handle(*conns_.back());  // a rank sends its hello as it connects: read it now, not a poll later
  }
}

bool Root::Session::sendFrame(Conn& c, FrameType type, int tag, const void* payload, uint32_t length) {
  std::vector<char> buf(sizeof(wire::FrameHeader) + length);
  wire::FrameHeader h = wire::makeHeader(type, root_.jobKey_, -1, tag, length, length);
  memcpy(buf.data(), &h, sizeof(h));
  if (length > 0) memcpy(buf.data() + sizeof(h), payload, length);
  int err = 0;
  Io io = sendAll(c.fd.get(), buf.data(), buf.size(), util::Deadline::afterMs(kReplySendMs), stop_, &err);
  if (io != Io::kOk) {
    std::string who = c.slot >= 0 ? rankText(c.slot) : c.from.toString();
    WEFT_WARN("bootstrap: root %s could not answer %s: %s%s; it probably exited", where_.c_str(), who.c_str(),
              ioText(io), io == Io::kFailed ? (std::string(" (") + strerror(err) + ")").c_str() : "");
    return false;
  }
  return true;
}

void Root::Session::answerError(Conn& c) {
  std::string text = failText_.substr(0, wire::kMaxTextBytes - 1);
  sendFrame(c, FrameType::kRootError, (int)failCode_, text.data(), (uint32_t)text.size());
  if (c.slot >= 0 && stateOf(c.slot) == kArrived) {
    slots_[c.slot].state = kAnswered;
    ++answered_;
  }
  c.dead = true;
}

void Root::Session::fail(Status code, const std::string& text) {
  if (failCode_ != ncclSuccess) return;  // the first failure is the cause; later ones follow from it
  failCode_ = code;
  failText_ = "bootstrap root " + where_ + ": " + text;
  linger_ = util::Deadline::afterMs(kFailedLingerMs);
  root_.errorText_ = failText_;
  WEFT_WARN("%s", failText_.c_str());
  for (auto& c : conns_) {
    if (!c->dead && c->slot >= 0 && stateOf(c->slot) == kArrived) answerError(*c);
  }
}

void Root::Session::onLeft(Conn& c, const std::string& how) {
  c.dead = true;
  if (c.slot < 0) {
    if (c.reader.midFrame()) rejects_.reject(c.from.toString(), "truncated frame: " + c.reader.why());
    else WEFT_INFO(log::kBootstrap, "bootstrap: root %s: connection from %s closed without a hello", where_.c_str(), c.from.toString().c_str());
    return;
  }
  if (stateOf(c.slot) != kArrived) return;
  slots_[c.slot].state = kAnswered;  // cannot be answered any more; do not wait for it
  ++answered_;
  fail(ncclRemoteError, rankText(c.slot) + " " + how +
                            " before the rendezvous completed; it probably exited - check its log");
}

bool Root::Session::onHello(Conn& c) {
  const wire::FrameHeader& h = c.reader.header();
  if (c.slot >= 0) {
    WEFT_INFO(log::kBootstrap, "bootstrap: root %s: ignoring a %s frame from %s after its hello", where_.c_str(),
              wire::frameTypeName(h.type), rankText(c.slot).c_str());
    return true;
  }
  if (h.type != (uint16_t)FrameType::kRootHello || h.length != sizeof(wire::RootHello)) {
    rejects_.reject(c.from.toString(), "expected a root hello of " + std::to_string(sizeof(wire::RootHello)) +
                                           " bytes, got a " + wire::frameTypeName(h.type) + " frame of " +
                                           std::to_string(h.length) + " bytes");
    return false;
  }
  wire::RootHello hello;
  memcpy(&hello, c.reader.payload().data(), sizeof(hello));
  SocketAddress listen;
  std::string why;
  if (hello.rank != h.rank) why = "header and hello name different ranks";
  else if (hello.nRanks < 1 || hello.nRanks > wire::kMaxRanks) why = "nranks " + std::to_string(hello.nRanks) + " out of range";
  else if (hello.rank < 0 || hello.rank >= hello.nRanks) why = "rank " + std::to_string(hello.rank) + " out of range for nranks " + std::to_string(hello.nRanks);
  else if (hello.nRoots < 1 || hello.nRoots > hello.nRanks || hello.nRoots > wire::kMaxRoots) why = "bad root count " + std::to_string(hello.nRoots);
  else if (hello.rootIndex < 0 || hello.rootIndex >= hello.nRoots) why = "bad root index " + std::to_string(hello.rootIndex);
  else if (!wire::decodeAddress(hello.listen, &listen, &why)) why = "bad listen address: " + why;
  if (!why.empty()) {
    rejects_.reject(c.from.toString(), "invalid hello: " + why);
    return false;
  }
  std::string who = "rank " + std::to_string(hello.rank) + " (" + listen.toString() + ")";
  if (!started_) {
    started_ = true;
    firstArrival_ = Clock::now();
    deadline_ = util::Deadline::afterSeconds(root_.timeoutSeconds_);
    nRanks_ = hello.nRanks;
    nRoots_ = hello.nRoots;
    rootIndex_ = hello.rootIndex;
    firstRank_ = hello.rank;
    wire::rootRange(nRanks_, nRoots_, rootIndex_, &lo_, &hi_);
    head_ = hi_ % nRanks_;
    expected_ = hi_ - lo_ + ((head_ >= lo_ && head_ < hi_) ? 0 : 1);
  }
  bool consistent = hello.nRanks == nRanks_ && hello.nRoots == nRoots_ && hello.rootIndex == rootIndex_;
  if (!consistent) {
    char text[512];
    snprintf(text, sizeof(text),
             "%s says nranks=%d with unique id %d of %d, but rank %d said nranks=%d with unique id %d of %d; "
             "every rank must pass the same nranks and the same unique ids in the same order",
             who.c_str(), hello.nRanks, hello.rootIndex, hello.nRoots, firstRank_, nRanks_, rootIndex_, nRoots_);
    fail(ncclInvalidUsage, text);
  }
  int slot = consistent ? slotOf(hello.rank) : -1;
  if (consistent && slot < 0) {
    fail(ncclInvalidUsage, who + " contacted this root, which serves ranks " + std::to_string(lo_) + "-" +
                               std::to_string(hi_ - 1) + "; the ranks disagree about the unique ids");
  } else if (slot >= 0 && stateOf(slot) != kEmpty) {
    fail(ncclInvalidUsage, who + " arrived twice (first from " + slots_[slot].addr.toString() +
                               "); two processes use the same rank");
    slot = -1;
  }
  if (failCode_ != ncclSuccess) {  // the rendezvous has failed: tell this rank why, now
    if (slot >= 0) {
      slots_[slot].state = kAnswered;
      ++answered_;
    }
    answerError(c);
    return false;
  }
  c.slot = slot;
  slots_[slot] = Slot{kArrived, &c, listen};
  ++arrived_;
  WEFT_TRACE(log::kBootstrap, "bootstrap: root %s: %s arrived (%d of %d)", where_.c_str(), who.c_str(), arrived_, expected_);
  return true;
}

void Root::Session::handle(Conn& c) {
  for (;;) {
    FrameReader::Event e = c.reader.pump(c.fd.get());
    switch (e) {
      case FrameReader::Event::kNeedMore:
        return;
      case FrameReader::Event::kFrame:
        if (!onHello(c)) { c.dead = true; return; }
        if (c.dead) return;
        continue;
      case FrameReader::Event::kClosed:
        onLeft(c, "closed its connection to the root");
        return;
      case FrameReader::Event::kInvalid:
        if (c.slot < 0) {
          rejects_.reject(c.from.toString(), c.reader.why());
          c.dead = true;
        } else {
          onLeft(c, "sent garbage to the root (" + c.reader.why() + ")");
        }
        return;
      case FrameReader::Event::kFailed:
        onLeft(c, "lost its connection to the root (" + c.reader.why() + ")");
        return;
    }
  }
}

void Root::Session::sendReplies() {
  for (int slot = 0; slot < expected_; ++slot) {
    Conn* c = slots_[slot].conn;
    int rank = rankOfSlot(slot);
    wire::RootReply reply;
    memset(&reply, 0, sizeof(reply));
    reply.successor = reply.predecessor = -1;
    if (rank >= lo_ && rank < hi_) {  // the next group's first rank only learns its predecessor here
      reply.successor = (rank + 1) % nRanks_;
      reply.successorAddress = wire::encodeAddress(slots_[slotOf(reply.successor)].addr);
    }
    int pred = (rank + nRanks_ - 1) % nRanks_;
    if (slotOf(pred) >= 0) {  // unknown for our first rank when another root serves its predecessor
      reply.predecessor = pred;
      reply.predecessorAddress = wire::encodeAddress(slots_[slotOf(pred)].addr);
    }
    sendFrame(*c, FrameType::kRootReply, 0, &reply, sizeof(reply));
    slots_[slot].state = kAnswered;
    ++answered_;
    c->dead = true;
  }
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - firstArrival_).count();
  WEFT_INFO(log::kBootstrap, "bootstrap: root %s: %d ranks arrived within %.1f ms and were answered", where_.c_str(),
            expected_, ms);
}

void Root::Session::expireStrangers() {
  auto now = Clock::now();
  size_t pending = 0;
  for (auto it = conns_.rbegin(); it != conns_.rend(); ++it) {  // newest first: the oldest are dropped
    Conn& c = **it;
    if (c.dead || c.slot >= 0) continue;
    ++pending;
    if (now - c.since > std::chrono::milliseconds(kHelloTimeoutMs)) {
      rejects_.reject(c.from.toString(), "no valid hello within " + std::to_string(kHelloTimeoutMs / 1000) + " s");
      c.dead = true;
    } else if (pending > kMaxPendingConnections && now - c.since > std::chrono::milliseconds(kPendingGraceMs)) {
      rejects_.reject(c.from.toString(), "too many connections waiting for their hello");
      c.dead = true;
    }
  }
}

Status Root::Session::run() {
  std::vector<pollfd> fds;
  for (;;) {
    if (stopRequested()) {
      fail(ncclSystemError, "stopped before the rendezvous completed (aborted)");
      return failCode_;
    }
    if (root_.abandoned_.load(std::memory_order_acquire)) fail(ncclRemoteError, root_.abandonText_);
    fds.assign(1, pollfd{root_.listener_.get(), POLLIN, 0});
    for (auto& c : conns_) fds.push_back(pollfd{c->fd.get(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), deadline_.pollMs(kPollSliceMs));
    if (rc < 0 && errno != EINTR) {
      fail(ncclSystemError, std::string("poll() failed: ") + strerror(errno));
      return failCode_;
    }
    size_t polled = conns_.size();
    if (rc > 0 && fds[0].revents != 0) acceptAll();
    for (size_t i = 0; rc > 0 && i < polled; ++i) {
      if (fds[i + 1].revents != 0 && !conns_[i]->dead) handle(*conns_[i]);
    }
    if (failCode_ == ncclSuccess && expected_ > 0 && arrived_ == expected_) {
      sendReplies();
      return ncclSuccess;
    }
    if (failCode_ != ncclSuccess && ((expected_ > 0 && answered_ >= expected_) || linger_.expired())) return failCode_;
    if (started_ && deadline_.expired()) {
      std::vector<int> missing;
      for (int s = 0; s < expected_; ++s) {
        if (stateOf(s) == kEmpty) missing.push_back(rankOfSlot(s));
      }
      std::sort(missing.begin(), missing.end());
      char text[1024];
      snprintf(text, sizeof(text),
               "rendezvous timed out after %lld s (NCCL_BOOTSTRAP_TIMEOUT): rank(s) %s (%zu of %d) never arrived; "
               "check that they started and can reach %s",
               (long long)root_.timeoutSeconds_, formatRankList(missing).c_str(), missing.size(), expected_,
               where_.c_str());
      fail(ncclSystemError, text);
      return failCode_;
    }
    expireStrangers();
    for (size_t i = 0; i < conns_.size();) {
      if (conns_[i]->dead) {
        if (conns_[i]->slot >= 0) slots_[conns_[i]->slot].conn = nullptr;
        conns_.erase(conns_.begin() + i);
      } else {
        ++i;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

Status Root::create(const SocketAddress& bindAddress, uint64_t jobKey, std::unique_ptr<Root>* out,
                    int64_t timeoutSeconds) {
  std::unique_ptr<Root> root(new Root());
  root->jobKey_ = jobKey;
  root->timeoutSeconds_ = timeoutSeconds >= 0 ? timeoutSeconds : kBootstrapTimeout.get();
  WEFT_TRY(listenOn(bindAddress, &root->listener_, &root->address_));
  *out = std::move(root);
  return ncclSuccess;
}

Root::~Root() {
  if (thread_.joinable()) {
    stopSelf_.store(true);
    thread_.join();
  }
}

Status Root::serve(const std::atomic<bool>* stop) {
  Session session(*this, stop);
  Status s = session.run();
  listener_.reset();  // late strangers get "connection refused" rather than a silent backlog
  return s;
}

void Root::start(const std::atomic<bool>* stop) {
  stopOther_ = stop;
  thread_ = std::thread([this] { threadResult_ = serve(stopOther_); });
}

Status Root::join() {
  if (thread_.joinable()) thread_.join();
  return threadResult_;
}

void Root::launchDetached(std::unique_ptr<Root> root) {
  gDetachedRunning.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(gDetachedMutex);
    detachedRoots()[root->jobKey_] = root.get();
  }
  std::thread([r = std::move(root)]() mutable {
    (void)r->serve(nullptr);
    {
      std::lock_guard<std::mutex> lock(gDetachedMutex);
      detachedRoots().erase(r->jobKey_);
    }
    r.reset();
    gDetachedRunning.fetch_sub(1);
  }).detach();
}

void Root::abandonDetached(uint64_t jobKey, int rank, const std::string& why) {
  std::lock_guard<std::mutex> lock(gDetachedMutex);
  auto it = detachedRoots().find(jobKey);
  if (it == detachedRoots().end()) return;
  Root* root = it->second;
  if (root->abandoned_.load(std::memory_order_relaxed)) return;
  root->abandonText_ = "rank " + std::to_string(rank) + ", in the process running this root, gave up its creation (" +
                       why + ") before the rendezvous completed";
  root->abandoned_.store(true, std::memory_order_release);
}

int Root::detachedRunning() { return gDetachedRunning.load(); }

}  // namespace weft::bootstrap
