#include "bootstrap/bootstrap.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "bootstrap/frame_reader.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/limits.h"
#include "bootstrap/wire.h"
#include "core/log.h"

namespace weft::bootstrap {

using wire::FrameType;

// Marks the Bootstrap in use for one call; a second thread entering meanwhile is refused.
class Bootstrap::Busy {
 public:
  explicit Busy(std::atomic<bool>& flag) : flag_(flag), owned_(!flag.exchange(true)) {}
  ~Busy() {
    if (owned_) flag_.store(false);
  }
  bool owned() const { return owned_; }

 private:
  std::atomic<bool>& flag_;
  bool owned_;
};

// A refused call touches nothing of the bootstrap's state (the thread inside may be writing it,
// its failure text too): it only warns, which sets this thread's last error.
#define WEFT_BOOTSTRAP_ENTER(op)                                                                     \
  Busy busy_guard_(busy_);                                                                           \
  if (!busy_guard_.owned()) {                                                                        \
    WEFT_WARN("bootstrap (rank %d of %d): %s: another thread is using this bootstrap; calls on one " \
              "communicator's bootstrap must be serialized", rank_, nRanks_, op);                     \
    return ncclInvalidUsage;                                                                         \
  }                                                                                                  \
  if (messenger_.closing()) {                                                                        \
    WEFT_WARN("bootstrap (rank %d of %d): %s: the communicator is being destroyed (ncclCommAbort or " \
              "ncclCommDestroy from another thread)", rank_, nRanks_, op);                            \
    return ncclSystemError;                                                                          \
  }

Bootstrap::Bootstrap(int rank, int nRanks, uint64_t jobKey, const std::atomic<bool>* abort)
    : rank_(rank), nRanks_(nRanks), abort_(abort), messenger_(rank, nRanks, jobKey, abort) {}

Bootstrap::~Bootstrap() = default;  // ownRoot_ (if still serving) is stopped and joined by its destructor

util::Deadline Bootstrap::operationDeadline() const { return util::Deadline::afterSeconds(kBootstrapTimeout.get()); }

std::string Bootstrap::peerAddress(int rank) const {
  if (rank < 0 || rank >= nRanks_) return "invalid rank " + std::to_string(rank);
  const SocketAddress& a = messenger_.peerAddress(rank);
  return a.valid() ? a.toString() : std::string("address unknown");
}

Status Bootstrap::init(const ncclUniqueId& id, int rank, int nRanks, const std::atomic<bool>* abort,
                       std::unique_ptr<Bootstrap>* out) {
  return init(&id, 1, rank, nRanks, abort, out);
}

Status Bootstrap::init(const ncclUniqueId* ids, int nIds, int rank, int nRanks, const std::atomic<bool>* abort,
                       std::unique_ptr<Bootstrap>* out) {
  WEFT_CHECK_ARG(out != nullptr, "bootstrap init: output pointer is NULL");
  WEFT_CHECK_ARG(ids != nullptr, "bootstrap init: unique id array is NULL");
  WEFT_CHECK_ARG(nRanks >= 1 && nRanks <= wire::kMaxRanks, "bootstrap init: nranks %d is out of range (1..%d)",
                 nRanks, wire::kMaxRanks);
  WEFT_CHECK_ARG(rank >= 0 && rank < nRanks, "bootstrap init: rank %d is out of range for nranks %d", rank, nRanks);
  WEFT_CHECK_ARG(nIds >= 1 && nIds <= nRanks && nIds <= wire::kMaxRoots,
                 "bootstrap init: %d unique ids for %d ranks; need 1 <= nId <= nranks", nIds, nRanks);
  std::vector<UniqueIdInfo> infos(nIds);
  std::unordered_map<std::string, int> roots;
  for (int i = 0; i < nIds; ++i) {
    std::string why;
    WEFT_CHECK_ARG(decodeUniqueId(ids[i], &infos[i], &why), "bootstrap init (rank %d): unique id %d of %d: %s",
                   rank, i, nIds, why.c_str());
    auto [it, fresh] = roots.emplace(infos[i].root.toString(), i);
    WEFT_CHECK_ARG(fresh,
                   "bootstrap init: unique ids %d and %d name the same root %s; each id needs its own "
                   "ncclGetUniqueId call (and NCCL_COMM_ID gives one root only)",
                   it->second, i, it->first.c_str());
  }

  util::Deadline deadline = util::Deadline::afterSeconds(kBootstrapTimeout.get());
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nRanks, infos[0].jobKey, abort));
  int group = wire::rootOfRank(nRanks, nIds, rank);
  int lo, hi;
  wire::rootRange(nRanks, nIds, group, &lo, &hi);
  const UniqueIdInfo& mine = infos[group];
  if (mine.rootStartedByRank && rank == lo) {
    // NCCL_COMM_ID: nobody runs this root yet; the group's first rank does, on a thread it owns.
    WEFT_TRY(Root::create(mine.root, mine.jobKey, &b->ownRoot_));
    b->ownRoot_->start(abort);
    WEFT_INFO(log::kBootstrap, "bootstrap: rank %d started the root at %s (NCCL_COMM_ID)", rank,
              mine.root.toString().c_str());
  }
  Interface itf;
  WEFT_TRY(chooseInterface(&mine.root, &itf));
  WEFT_TRY(b->messenger_.listen(itf.address));
  Status met = b->rendezvous(infos, deadline);
  if (isError(met)) {
    // A root of this process must not wait for this rank any more (a no-op for roots elsewhere).
    for (const UniqueIdInfo& id : infos) {
      Root::abandonDetached(id.jobKey, rank, aborted(abort) ? "aborted" : "its rendezvous failed");
    }
    return met;
  }
  auto metAt = std::chrono::steady_clock::now();
  Status s = b->exchangeAddresses(deadline);
  if (isError(s)) {
    b->spreadFailure(b->doublingPeers());
    return s;
  }
  if (b->ownRoot_) {
    // Every rank of its group has been answered by now (their addresses all reached us).
    (void)b->ownRoot_->join();
    b->ownRoot_.reset();
  }
  auto ms = [](auto a, auto z) { return std::chrono::duration<double, std::milli>(z - a).count(); };
  WEFT_INFO(log::kBootstrap, "bootstrap: rank %d of %d listening on %s (%s); root rendezvous %.1f ms, address exchange %.1f ms",
            rank, nRanks, b->messenger_.listenAddress().toString().c_str(), itf.name.c_str(), ms(start, metAt),
            ms(metAt, std::chrono::steady_clock::now()));
  *out = std::move(b);
  return ncclSuccess;
}

// Says hello to our root (and, for the first rank of a group when there are several roots, to the
// previous root, which needs our address for its last rank), then waits for the answers.
Status Bootstrap::rendezvous(const std::vector<UniqueIdInfo>& ids, const util::Deadline& deadline) {
  const int nIds = (int)ids.size();
  const int group = wire::rootOfRank(nRanks_, nIds, rank_);
  int lo, hi;
  wire::rootRange(nRanks_, nIds, group, &lo, &hi);
  struct Link {
    int index;
    Fd fd;
    std::unique_ptr<FrameReader> reader;
    bool done = false;
  };
  std::vector<Link> links;
  links.push_back(Link{group, Fd(), nullptr});
  if (nIds > 1 && rank_ == lo) links.push_back(Link{(group + nIds - 1) % nIds, Fd(), nullptr});

  for (Link& l : links) {
    const UniqueIdInfo& id = ids[l.index];
    std::string where = id.root.toString();
    int err = 0;
    Io io = Io::kTimedOut;
    if (!id.rootStartedByRank) {
      const util::Deadline knock = util::Deadline::earliest(deadline, util::Deadline::afterMs(kEndedRootRetryMs));
      io = connectBlocking(id.root, knock, abort_, /*retry=*/true, &l.fd, &err);
      if (io == Io::kTimedOut && err == ECONNREFUSED) {
        return messenger_.fail(ncclSystemError,
                               "root %s refuses connections: it has ended. A unique id serves one creation (its "
                               "root ends once every rank has arrived), so an id used before must be replaced by a "
                               "new ncclGetUniqueId; or the process that called ncclGetUniqueId has exited",
                               where.c_str());
      }
    }
    if (io == Io::kTimedOut) io = connectBlocking(id.root, deadline, abort_, /*retry=*/true, &l.fd, &err);
    if (io == Io::kAborted) return messenger_.fail(ncclSystemError, "rendezvous with root %s aborted", where.c_str());
    if (io == Io::kTimedOut || io == Io::kRefused) {
      return messenger_.fail(ncclSystemError,
                             "rendezvous with root %s timed out after %.1f s: nothing accepts connections there "
                             "(last error: %s). Is the process that called ncclGetUniqueId still running, and can "
                             "this host reach it (NCCL_SOCKET_IFNAME)?",
                             where.c_str(), deadline.elapsedSeconds(), err ? strerror(err) : "none");
    }
    if (io != Io::kOk) {
      return messenger_.fail(ncclSystemError, "cannot connect to root %s: %s", where.c_str(), strerror(err));
    }
    wire::RootHello hello;
    memset(&hello, 0, sizeof(hello));
    hello.rank = rank_;
    hello.nRanks = nRanks_;
    hello.rootIndex = l.index;
    hello.nRoots = nIds;
    hello.listen = wire::encodeAddress(messenger_.listenAddress());
    char frame[sizeof(wire::FrameHeader) + sizeof(hello)];
    wire::FrameHeader h = wire::makeHeader(FrameType::kRootHello, id.jobKey, rank_, 0, sizeof(hello), sizeof(hello));
    memcpy(frame, &h, sizeof(h));
    memcpy(frame + sizeof(h), &hello, sizeof(hello));
    io = sendAll(l.fd.get(), frame, sizeof(frame), deadline, abort_, &err);
    if (io != Io::kOk) {
      return messenger_.fail(io == Io::kClosed ? ncclRemoteError : ncclSystemError,
                             "sending the hello to root %s failed: %s", where.c_str(),
                             io == Io::kFailed ? strerror(err) : ioText(io));
    }
    l.reader = std::make_unique<FrameReader>(id.jobKey);
  }

  // The root's verdict names the missing ranks; allow it a moment past our own deadline.
  util::Deadline verdict = deadline.extendedByMs(kRootVerdictGraceMs);
  size_t pending = links.size();
  std::vector<pollfd> fds;
  while (pending > 0) {
    fds.clear();
    for (Link& l : links) fds.push_back(pollfd{l.done ? -1 : l.fd.get(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), verdict.pollMs(kPollSliceMs));
    if (rc < 0 && errno != EINTR) return messenger_.fail(ncclSystemError, "poll() failed: %s", strerror(errno));
    for (size_t i = 0; rc > 0 && i < links.size(); ++i) {
      Link& l = links[i];
      if (l.done || fds[i].revents == 0) continue;
      std::string where = ids[l.index].root.toString();
      FrameReader::Event e = l.reader->pump(l.fd.get());
      if (e == FrameReader::Event::kNeedMore) continue;
      if (e == FrameReader::Event::kClosed || e == FrameReader::Event::kFailed) {
        return messenger_.fail(ncclRemoteError,
                               "root %s closed the connection before answering; the process running the root "
                               "(the one that called ncclGetUniqueId, or rank 0 with NCCL_COMM_ID) probably exited "
                               "- check its log",
                               where.c_str());
      }
      if (e == FrameReader::Event::kInvalid) {
        return messenger_.fail(ncclSystemError, "root %s sent an invalid frame: %s", where.c_str(),
                               l.reader->why().c_str());
      }
      const wire::FrameHeader& fh = l.reader->header();
      std::vector<char>& payload = l.reader->payload();
      if (fh.type == (uint16_t)FrameType::kRootError) {
        Status code = (Status)fh.tag;
        if (code != ncclRemoteError && code != ncclInvalidUsage && code != ncclInvalidArgument) code = ncclSystemError;
        std::string text(payload.begin(), payload.end());
        for (char& c : text) c = (c < 0x20 || c > 0x7e) ? '?' : c;
        return messenger_.fail(code, "rendezvous failed: %s", text.c_str());
      }
      wire::RootReply reply;
      SocketAddress succ, pred;
      std::string why;
      bool ok = fh.type == (uint16_t)FrameType::kRootReply && fh.length == sizeof(reply);
      if (ok) memcpy(&reply, payload.data(), sizeof(reply));
      // Our root names our successor (and our predecessor unless another root serves it); the
      // previous root, when we are the first rank of our group, names only our predecessor.
      const int expectSucc = l.index == group ? (rank_ + 1) % nRanks_ : -1;
      const int prevRank = (rank_ + nRanks_ - 1) % nRanks_;
      const bool predElsewhere = nIds > 1 && rank_ == lo;
      const bool predOk = reply.predecessor == prevRank || (reply.predecessor == -1 && l.index == group && predElsewhere);
      const int gotPred = reply.predecessor;
      ok = ok && reply.successor == expectSucc && predOk &&
           (expectSucc < 0 || wire::decodeAddress(reply.successorAddress, &succ, &why)) &&
           (gotPred < 0 || wire::decodeAddress(reply.predecessorAddress, &pred, &why));
      if (!ok) {
        return messenger_.fail(ncclSystemError, "root %s sent an unexpected %s frame (%s)", where.c_str(),
                               wire::frameTypeName(fh.type), why.empty() ? "wrong content" : why.c_str());
      }
      if (expectSucc >= 0) messenger_.setPeerAddress(expectSucc, succ);
      if (gotPred >= 0) messenger_.setPeerAddress(gotPred, pred);
      l.done = true;
      l.fd.reset();
      --pending;
    }
    if (pending == 0) break;
    if (aborted(abort_)) return messenger_.fail(ncclSystemError, "rendezvous with the root aborted");
    if (verdict.expired()) {
      const Link& l = links[links[0].done ? 1 : 0];
      return messenger_.fail(ncclSystemError,
                             "rendezvous with root %s timed out after %.1f s (NCCL_BOOTSTRAP_TIMEOUT=%lld s): not "
                             "every rank arrived; the root's log names the missing ones",
                             ids[l.index].root.toString().c_str(), deadline.elapsedSeconds(),
                             (long long)kBootstrapTimeout.get());
    }
  }
  return ncclSuccess;
}

Status Bootstrap::exchangeAddresses(const util::Deadline& deadline) {
  std::vector<wire::WireAddress> table(nRanks_);
  memset(table.data(), 0, table.size() * sizeof(wire::WireAddress));
  table[rank_] = wire::encodeAddress(messenger_.listenAddress());
  // The root told us only our ring neighbours; the rounds learn the others they need as they go.
  std::vector<std::pair<int, SocketAddress>> learned;
  WEFT_TRY(doublingAllGather(reinterpret_cast<char*>(table.data()), sizeof(wire::WireAddress), deadline,
                             "address exchange", &learned));
  const int next = (rank_ + 1) % nRanks_, prev = (rank_ + nRanks_ - 1) % nRanks_;
  for (int r = 0; r < nRanks_; ++r) {
    SocketAddress a;
    std::string why;
    if (!wire::decodeAddress(table[r], &a, &why)) {
      return messenger_.fail(ncclSystemError, "address exchange: rank %d's address is invalid (%s)", r, why.c_str());
    }
    if ((r == next || r == prev) && a != messenger_.peerAddress(r)) {
      return messenger_.fail(ncclSystemError, "address exchange: rank %d announced %s but the root said %s", r,
                             a.toString().c_str(), messenger_.peerAddress(r).toString().c_str());
    }
    messenger_.setPeerAddress(r, a);
  }
  // What a peer passed on about a third rank must match that rank's own word.
  for (const auto& [r, a] : learned) {
    if (a != messenger_.peerAddress(r)) {
      return messenger_.fail(ncclSystemError, "address exchange: rank %d announced %s but a peer passed on %s", r,
                             messenger_.peerAddress(r).toString().c_str(), a.toString().c_str());
    }
  }
  return ncclSuccess;
}

// Bruck's allgather: ceil(log2 n) rounds where a ring needs n-1 steps, the same bytes per rank.
// Before the round of distance d a rank holds the blocks of the min(d, n) ranks up to itself
// (rank - d + 1 .. rank, mod n); it sends min(d, n - d) of them, the nearest, to rank + d and
// receives as many from rank - d, which extend its run downwards. A run is sent in rank order,
// straight from `data` unless it wraps past rank 0.
//
// With `learned` (the address exchange at init, when each rank knows only its ring neighbours
// from the root) the rounds also double what each rank knows of addresses: the message to rank + d
// carries the address of rank - d, and a second one tells rank - d the address of rank + d, so
// that every rank knows rank +- 2d before the next round. Those are listed in *learned.
Status Bootstrap::doublingAllGather(char* data, size_t bytesPerRank, const util::Deadline& deadline, const char* op,
                                    std::vector<std::pair<int, SocketAddress>>* learned) {
  const int n = nRanks_;
  if (n == 1) return ncclSuccess;
  constexpr size_t kAddr = sizeof(wire::WireAddress);
  constexpr int kBackTag = 1 << 16;  // the address sent back to rank - d (learned only)
  std::vector<char> staging;
  // The run of `count` blocks ending with rank `last`, as one or two pieces of `data`.
  auto pieces = [&](int last, int count, size_t* firstBytes) -> char* {
    const int first = (last - count + 1 + n) % n;
    *firstBytes = (size_t)(first <= last ? count : n - first) * bytesPerRank;
    return data + (size_t)first * bytesPerRank;
  };
  for (int round = 0, dist = 1; dist < n; ++round, dist <<= 1) {
    const int to = (rank_ + dist) % n, from = (rank_ + n - dist) % n;
    const int blocks = std::min(dist, n - dist);
    const size_t body = (size_t)blocks * bytesPerRank;
    // Whether the next round needs rank +- 2d, still unknown (dist < n / 2 exactly).
    const bool pass = learned != nullptr && (int64_t)dist * 2 < n;
    const size_t tail = pass ? kAddr : 0;
    size_t firstBytes = 0;
    char* run = pieces(rank_, blocks, &firstBytes);
    if (firstBytes == body && !pass) {
      WEFT_TRY(messenger_.send(to, FrameType::kAllGather, round, run, body, deadline, op));
    } else {
      staging.resize(body + tail);
      memcpy(staging.data(), run, firstBytes);
      memcpy(staging.data() + firstBytes, data, body - firstBytes);
      if (pass) {
        wire::WireAddress back = wire::encodeAddress(messenger_.peerAddress(from));
        memcpy(staging.data() + body, &back, kAddr);
      }
      WEFT_TRY(messenger_.send(to, FrameType::kAllGather, round, staging.data(), staging.size(), deadline, op));
    }
    if (pass) {
      wire::WireAddress ahead = wire::encodeAddress(messenger_.peerAddress(to));
      WEFT_TRY(messenger_.send(from, FrameType::kAllGather, kBackTag + round, &ahead, kAddr, deadline, op));
    }
    run = pieces(from, blocks, &firstBytes);
    if (firstBytes == body && !pass) {
      WEFT_TRY(messenger_.recv(from, FrameType::kAllGather, round, run, body, deadline, op));
      continue;
    }
    staging.resize(body + tail);
    WEFT_TRY(messenger_.recv(from, FrameType::kAllGather, round, staging.data(), staging.size(), deadline, op));
    memcpy(run, staging.data(), firstBytes);
    memcpy(data, staging.data() + firstBytes, body - firstBytes);
    if (!pass) continue;
    const int behind = (int)(((int64_t)rank_ + 2 * n - 2 * (int64_t)dist) % n);
    const int beyond = (int)(((int64_t)rank_ + 2 * (int64_t)dist) % n);
    WEFT_TRY(learnAddress(from, behind, staging.data() + body, learned));
    wire::WireAddress passed;
    WEFT_TRY(messenger_.recv(to, FrameType::kAllGather, kBackTag + round, &passed, kAddr, deadline, op));
    WEFT_TRY(learnAddress(to, beyond, &passed, learned));
  }
  return ncclSuccess;
}

// An address `sender` passed on for `rank`: used from the next round on, checked against the
// rank's own once the exchange is complete.
Status Bootstrap::learnAddress(int sender, int rank, const void* wireAddress,
                               std::vector<std::pair<int, SocketAddress>>* learned) {
  wire::WireAddress w;
  memcpy(&w, wireAddress, sizeof(w));
  SocketAddress a;
  std::string why;
  if (!wire::decodeAddress(w, &a, &why)) {
    return messenger_.fail(ncclSystemError, "address exchange: %s passed on an invalid address for rank %d (%s)",
                           messenger_.peerText(sender).c_str(), rank, why.c_str());
  }
  const SocketAddress& known = messenger_.peerAddress(rank);
  if (known.valid() && known != a) {
    return messenger_.fail(ncclSystemError, "address exchange: %s passed on %s for rank %d, known as %s",
                           messenger_.peerText(sender).c_str(), a.toString().c_str(), rank, known.toString().c_str());
  }
  if (rank != rank_) messenger_.setPeerAddress(rank, a);
  learned->emplace_back(rank, a);
  return ncclSuccess;
}

std::string Bootstrap::trafficText() const {
  const Messenger::Traffic& t = messenger_.traffic();
  char text[160];
  snprintf(text, sizeof(text), "sent %llu messages (%.1f KiB), received %llu (%.1f KiB), %zu peers connected",
           (unsigned long long)t.messagesSent, t.bytesSent / 1024.0, (unsigned long long)t.messagesReceived,
           t.bytesReceived / 1024.0, connectedPeers());
  return text;
}

void Bootstrap::close() {
  messenger_.close();
  for (int i = 0; i < 1000 && (busy_.load() || uses_.load() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (busy_.load() || uses_.load() > 0) {
    WEFT_WARN("bootstrap (rank %d of %d): another thread is still inside it as it is freed", rank_, nRanks_);
  }
}

void Bootstrap::giveUp(const std::string& why) {
  constexpr int kMaxNotices = 64;
  for (int i = 1; i < nRanks_ && i <= kMaxNotices; ++i) messenger_.notifyFailure((rank_ + i) % nRanks_, why);
}

// The peers told are the ones that wait on this rank in the failed collective plus every peer with
// a live connection, so that the notice travels along existing links to ranks that are stuck
// waiting for someone who never connected. Bounded: each notice has a short deadline, and at most
// kMaxNotices peers are told.
void Bootstrap::spreadFailure(const std::vector<int>& waiting) {
  constexpr size_t kMaxNotices = 64;
  const std::string& cause = messenger_.remoteFailure().empty() ? messenger_.failureText() : messenger_.remoteFailure();
  std::vector<int> peers = waiting;
  for (int p : messenger_.connectedPeers()) {
    if (std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
  }
  if (peers.size() > kMaxNotices) peers.resize(kMaxNotices);
  for (int p : peers) messenger_.notifyFailure(p, cause);
}

Status Bootstrap::allGather(void* data, size_t bytesPerRank) {
  WEFT_BOOTSTRAP_ENTER("allgather");
  char op[48];
  snprintf(op, sizeof(op), "allgather #%llu", (unsigned long long)++allGathers_);
  if (data == nullptr && bytesPerRank > 0) return messenger_.fail(ncclInvalidArgument, "%s: data is NULL", op);
  Status s = doublingAllGather(static_cast<char*>(data), bytesPerRank, operationDeadline(), op, nullptr);
  if (isError(s)) spreadFailure(doublingPeers());
  return s;
}

void Bootstrap::setAbortFlag(const std::atomic<bool>* abort) {
  abort_ = abort;
  messenger_.setAbortFlag(abort);
}

void Bootstrap::forgetFailureNotices() {
  Busy busy(busy_);
  if (busy.owned()) messenger_.forgetFailureNotices();
}

Status Bootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  return sendUntil(peer, tag, data, bytes, operationDeadline());
}

Status Bootstrap::sendUntil(int peer, int tag, const void* data, size_t bytes, const util::Deadline& deadline) {
  WEFT_BOOTSTRAP_ENTER("send");
  char op[64];
  snprintf(op, sizeof(op), "send to rank %d (tag %d)", peer, tag);
  return messenger_.send(peer, FrameType::kData, tag, data, bytes, deadline, op);
}

Status Bootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  return recvUntil(peer, tag, data, bytes, operationDeadline());
}

Status Bootstrap::recvUntil(int peer, int tag, void* data, size_t bytes, const util::Deadline& deadline) {
  WEFT_BOOTSTRAP_ENTER("recv");
  char op[64];
  snprintf(op, sizeof(op), "recv from rank %d (tag %d)", peer, tag);
  if (data == nullptr && bytes > 0) return messenger_.fail(ncclInvalidArgument, "%s: data is NULL", op);
  return messenger_.recv(peer, FrameType::kData, tag, data, bytes, deadline, op);
}

// Dissemination barrier: in round k every rank signals rank + 2^k and waits for rank - 2^k;
// after ceil(log2 n) rounds each rank has transitively heard from all others.
Status Bootstrap::barrier() {
  WEFT_BOOTSTRAP_ENTER("barrier");
  char op[48];
  snprintf(op, sizeof(op), "barrier #%llu", (unsigned long long)++barriers_);
  util::Deadline deadline = operationDeadline();
  Status s = ncclSuccess;
  for (int round = 0, dist = 1; dist < nRanks_ && !isError(s); ++round, dist <<= 1) {
    int to = (rank_ + dist) % nRanks_, from = (rank_ - dist % nRanks_ + nRanks_) % nRanks_;
    s = messenger_.send(to, FrameType::kBarrier, round, nullptr, 0, deadline, op);
    if (!isError(s)) s = messenger_.recv(from, FrameType::kBarrier, round, nullptr, 0, deadline, op);
  }
  if (isError(s)) spreadFailure(doublingPeers());
  return s;
}

// The ranks a doubling round sends to, rank + 2^k for every k (the ones that may wait on this
// rank in a barrier or an allgather), and rank - 2^k (the address exchange's second message).
std::vector<int> Bootstrap::doublingPeers() const {
  std::vector<int> peers;
  auto add = [&](int64_t p) {
    if (std::find(peers.begin(), peers.end(), (int)p) == peers.end()) peers.push_back((int)p);
  };
  for (int64_t dist = 1; dist < nRanks_; dist <<= 1) {
    add((rank_ + dist) % nRanks_);
    add((rank_ + nRanks_ - dist) % nRanks_);
  }
  return peers;
}

}  // namespace weft::bootstrap
