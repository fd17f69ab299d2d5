// The harness both live network proxy targets share (fuzz_net_proxy.cc: Simple steps;
// fuzz_net_lines.cc: LL lines mixed with Simple steps).
//
// A live NetProxy (rank 0 of 2) with one connection on channel 0, to or from rank 1, which the
// harness plays over a raw loopback socket and plain host memory standing in for rank 0's GPU. The
// harness writes the input as the peer's half of the stream (data frames to a receive side,
// credits to a send side) and predicts, with the wire checks, what the proxy must do: move every
// step that is valid, byte for byte, into its slot and nowhere else, then either take the peer's
// bye quietly or fail exactly once, as the peer's error, through onFailure. Timing is taken out of
// the prediction: the harness only writes a frame once the window rules say its fate no longer
// depends on the race (unless kUngated, which leaves the race in and checks only what holds
// whatever its outcome). Every wait is bounded (kHang); running into the bound is a hang.
//
// netProxyStream's input: a flags byte, a byte of sizes, then the stream's bytes (taken as they
// are, or each frame XORed onto the next one of a peer moving one step at a time).
#pragma once

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.h"
#include "device/work_math.h"
#include "fuzz_common.h"
#include "proxy/net_proxy.h"
#include "proxy/net_wire.h"
#include "util/deadline.h"

namespace weft::fuzz::net {

using namespace proxy;
using Clock = std::chrono::steady_clock;
constexpr uint64_t kJob = 0x5eed00000f022f02ULL;
constexpr uint64_t kSteps = dev::kSteps;
constexpr char kCanary = (char)0xEE;
constexpr auto kHang = std::chrono::seconds(3);
constexpr auto kQuiet = std::chrono::milliseconds(20);  // past the proxy's last byte: it reads no more

enum Flags : uint8_t {
  kSendSide = 1,       // else a receive side
  kXorFrames = 2,      // frames XORed onto well-behaved ones; else raw bytes after valid frames
  kStallGpu = 4,       // receive side: the GPU never consumes, so the window closes after kSteps
  kDestroyOpen = 8,    // destroy the proxy with the connection still open (orderly goodbye)
  kAbortHalfway = 16,  // set the abort flag halfway through the stream
  kUngated = 128       // write without waiting for the window
};
// Bytes per write (bits 5-6 of the flags), so that frames arrive torn anywhere; but no more than
// kMaxWrites writes per input, to keep large inputs fast.
constexpr size_t kPieces[4] = {1, 5, 64, 1 << 20};
constexpr size_t kMaxWrites = 64;
// netProxyStream's sizes byte: bits 0-1 the step size (64 << 2n bytes), bit 2 a small socket buffer on rank 1
// that it reads lazily (send side), bits 3-7 the steps the GPU sends (send side) or the valid
// frames before a raw stream (receive side).
constexpr uint8_t kTightBuffer = 4;

inline uint64_t loadAcq(const volatile uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeRel(volatile uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

template <typename Done>
bool within(Clock::duration d, Done done) {
  const auto end = Clock::now() + d;
  while (!done() && Clock::now() < end) std::this_thread::sleep_for(std::chrono::microseconds(200));
  return done();
}

// Rank 0: the proxy under test, listening on loopback.
struct Rank {
  Rank() {
    cfg.jobKey = kJob;
    cfg.rank = 0;
    cfg.nRanks = 2;
    cfg.abortRequested = &abort;
    cfg.onFailure = [this](ncclResult_t code) {
      last = code;
      failures.fetch_add(1);
    };
    cfg.setupTimeoutSec = 3;
    require(NetProxy::listen(cfg, bootstrap::SocketAddress::loopback(AF_INET), &proxy) == ncclSuccess,
            "the proxy listens (out of file descriptors?)");
  }
  // Failing is the peer's fault here (the GPU's counters are right), and happens once at most.
  void requireFailures(int atLeast) const {
    const int n = failures.load();
    require(n <= 1, "onFailure is called at most once");
    require(n == 0 || last.load() == ncclRemoteError, "a failure caused by the peer is a remote error");
    require(n >= atLeast, "a bad or cut stream fails the proxy");
  }
  NetProxyConfig cfg;
  std::atomic<bool> abort{false};
  std::atomic<int> failures{0};
  std::atomic<int> last{ncclSuccess};
  std::unique_ptr<NetProxy> proxy;  // last member: destroyed before what its callback writes
};

// Rank 1's socket, non-blocking; never raises SIGPIPE.
inline ssize_t sendPiece(int fd, const char* p, size_t n) {
  iovec iov{const_cast<char*>(p), n};
  return bootstrap::sendSome(fd, &iov, 1);
}

// Sleeps up to a millisecond, less when the socket has bytes (or room, with `out`).
inline void nap(int fd, bool out) {
  pollfd p{fd, (short)(POLLIN | (out ? POLLOUT : 0)), 0};
  (void)::poll(&p, 1, 1);
}

// Writes the stream in pieces while `tick(starving)` keeps the simulated GPU and the reader going
// (starving: the gate is shut); `gate(at)` bounds how far the stream may go now. Stops early where
// the proxy closed or stopped reading after byte `stop` (the last it reads; 0: unknown), after an
// abort or a failure; stopping anywhere else is a hang.
template <typename Tick, typename Gate>
void writeStream(int fd, const std::vector<char>& stream, size_t piece, size_t stop, Rank& rank, bool abortHalfway,
                 Tick tick, Gate gate) {
  piece = std::max(piece, stream.size() / kMaxWrites);
  size_t at = 0;
  bool starving = false;
  auto moved = Clock::now();
  while (at < stream.size()) {
    if (abortHalfway && at >= stream.size() / 2) rank.abort = true;
    bool progress = tick(starving);
    const size_t n = std::min(piece, gate(at) - at);
    starving = n == 0;
    const ssize_t sent = n > 0 ? sendPiece(fd, stream.data() + at, n) : -EAGAIN;
    const bool done = at >= stop || rank.abort || rank.failures.load() > 0;
    if (sent < 0 && sent != -EAGAIN) {
      require(done, "the proxy closes only after the byte that decides it");
      return;
    }
    if (sent > 0) at += (size_t)sent;
    progress = progress || sent > 0;
    const auto now = Clock::now();
    if (progress) {
      moved = now;
      continue;
    }
    if (done && now - moved > kQuiet) return;
    require(now - moved < kHang, "the proxy keeps reading and publishing (hang?)");
    nap(fd, n > 0);
  }
}

// Connects rank 1 to rank 0's proxy for the receive side: the hello goes out before start() (the
// kernel queues the connection), start() admits it, and the echo must be the hello.
inline bootstrap::Fd connectAsSender(Rank& rank, NetRecvSide side) {
  bootstrap::SocketAddress address;
  std::string why;
  require(checkListenerDesc(rank.proxy->desc(), kJob, 0, "fuzz", &address, &why) == ncclSuccess,
          "the proxy publishes a valid descriptor");
  bootstrap::Fd fd;
  int err = 0;
  const util::Deadline deadline = util::Deadline::afterSeconds(3);
  require(bootstrap::connectBlocking(address, deadline, nullptr, false, &fd, &err) == bootstrap::Io::kOk,
          "the proxy's listener takes a connection");
  const Hello hello = makeHello(kJob, 1, 0, 0, side.stepBytes, side.llStepBytes);
  require(bootstrap::sendAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk,
          "the hello goes out");
  require(rank.proxy->start({}, {side}, std::vector<ListenerDesc>(2, rank.proxy->desc())) == ncclSuccess,
          "start() admits the expected hello");
  Hello echo;
  require(bootstrap::recvAll(fd.get(), &echo, sizeof(echo), deadline, nullptr, &err) == bootstrap::Io::kOk &&
              memcmp(&echo, &hello, sizeof(hello)) == 0, "the proxy echoes the hello");
  return fd;
}

// Rank 0's send side (channel 0, to rank 1) over a simulated sending GPU's memory `mem` (its tail,
// step-size words, Simple slots and head), with LL slots when llStepBytes > 0.
template <typename Mem>
NetSendSide sendSideOver(Mem& mem, char* llSlots = nullptr, uint64_t llStepBytes = 0) {
  NetSendSide side;
  side.channel = 0;
  side.peer = 1;
  side.gpuTail = &mem.tail;
  side.stepSizes = mem.sizes;
  side.slots = mem.slots.data();
  side.head = &mem.head;
  side.stepBytes = mem.stepBytes;
  side.llSlots = llSlots;
  side.llStepBytes = llStepBytes;
  return side;
}

// Rank 1's end of a send side's connection: it listens (with a small receive buffer when `tight`),
// rank 0's proxy starts with `side` and connects, and rank 1 answers the expected hello.
inline bootstrap::Fd acceptSender(Rank& rank, const NetSendSide& side, bool tight) {
  bootstrap::Fd listener;
  bootstrap::SocketAddress bound;
  require(bootstrap::listenOn(bootstrap::SocketAddress::loopback(AF_INET), &listener, &bound) == ncclSuccess,
          "rank 1 listens");
  // Less than a window of 4 KiB steps, so that the proxy's frames back up behind a slow reader; any
  // smaller and loopback TCP crawls on zero-window probes. Accepted sockets inherit it.
  const int small = 4096;
  if (tight) (void)setsockopt(listener.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::vector<ListenerDesc> peers = {rank.proxy->desc(), makeListenerDesc(kJob, 1, bound)};
  Status started = ncclInternalError;
  std::thread starter([&] { started = rank.proxy->start({side}, {}, peers); });  // waits for the echo
  bootstrap::Fd fd;
  bootstrap::SocketAddress from;
  const auto end = Clock::now() + kHang;
  while (bootstrap::acceptOne(listener.get(), &fd, &from) != 0) {
    require(Clock::now() < end, "the proxy connects to its peer");
    nap(listener.get(), false);
  }
  Hello hello;
  const Hello want = makeHello(kJob, 0, 1, 0, side.stepBytes, side.llStepBytes);
  int err = 0;
  const util::Deadline deadline = util::Deadline::afterSeconds(3);
  require(bootstrap::recvAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk &&
              memcmp(&hello, &want, sizeof(hello)) == 0, "the proxy says the expected hello");
  require(bootstrap::sendAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk,
          "the echo goes out");
  starter.join();
  require(started == ncclSuccess, "start() takes the echo");
  return fd;
}

// How the proxy must read a credit stream: the frames rank 1 must have read before credit i goes
// out (then the proxy has sent them, so the credit's fate is fixed), the last credit it accepts,
// its last byte read. Before the last credit (a bye, or one to refuse) rank 1 reads every frame
// the window allows, so that nothing is on its way and "past the steps sent" is tested at its edge.
struct SendPlan {
  std::vector<uint64_t> need;
  uint64_t head = 0;
  size_t stop = 0;
  bool bye = false;
};

// The proxy cannot have sent more than `total` steps, nor more than the credits' window allows.
inline bool creditAccepted(const Credit& c, uint64_t head, uint64_t total) {
  std::string why;
  return checkCredit(c, 0, head, std::min(total, head + kSteps), "fuzz", &why) == ncclSuccess;
}

inline SendPlan planSend(const std::vector<char>& s, uint64_t total) {
  SendPlan p;
  for (size_t at = 0;; at += sizeof(Credit)) {
    p.stop = s.size();
    if (s.size() - at < sizeof(Credit)) return p;  // the end: mid-credit or between credits
    Credit c;
    memcpy(&c, s.data() + at, sizeof(c));
    if (!creditAccepted(c, p.head, total) || isBye(c) || isFail(c)) {  // a fail frame fails it
      p.stop = at + sizeof(c);
      p.bye = isBye(c) && creditAccepted(c, p.head, total);
      p.need.push_back(std::min(total, p.head + kSteps));
      return p;
    }
    p.need.push_back(c.head);
    p.head = c.head;
  }
}

// The input as it is, or each 16 bytes XORed onto the next credit of a receiver that consumes one
// step at a time: zeros take all `total` steps, then claim one more (refused at the edge).
inline std::vector<char> sendStream(Cursor in, bool xorFrames, uint64_t total) {
  if (!xorFrames) return std::vector<char>(in.at, in.at + in.left);
  std::vector<char> s;
  uint64_t head = 0;
  while (in.left > 0) {
    const Credit c = in.over(makeCredit(0, head + 1), true);
    const size_t n = std::min(in.left, sizeof(c));
    s.insert(s.end(), reinterpret_cast<const char*>(&c), reinterpret_cast<const char*>(&c) + n);
    in.at += n;
    in.left -= n;
    if (n == sizeof(c) && creditAccepted(c, head, total) && !isBye(c) && !isFail(c)) head = c.head;
  }
  return s;
}

// Rank 1's receive proxy reading rank 0's data frames off the socket, torn anywhere: a bye only
// from an orderly destroy (byeAllowed), a fail frame naming a rank of this pair, nothing after
// either. A target checks the rest: each other header once whole (header()), each payload byte
// (payloadByte(), the byte's place in payloadGot) and each whole frame (frameDone()).
struct DataFrameReader {
  virtual ~DataFrameReader() = default;
  // Reads what the socket has; whether anything came.
  bool pump(int fd, bool byeAllowed) {
    bool got = false;
    char buf[4096];
    while (!eof) {
      const ssize_t n = bootstrap::recvSome(fd, buf, sizeof(buf));
      if (n == -EAGAIN) break;
      if (n <= 0) {
        eof = true;
        break;
      }
      got = true;
      for (size_t i = 0; i < (size_t)n;) {
        require(!ended, "nothing follows a bye or a fail frame");
        if (!inPayload) {
          const size_t k = std::min(sizeof(h) - hdrGot, (size_t)n - i);
          memcpy(reinterpret_cast<char*>(&h) + hdrGot, buf + i, k);
          i += k;
          hdrGot += k;
          if (hdrGot < sizeof(h)) continue;
          hdrGot = 0;
          if (isBye(h) || isFail(h)) {  // a failed proxy's onFailure may come just after its fail frame
            require(h.channel == 0 && (isBye(h) ? byeAllowed : h.step <= 1),
                    "a bye only from an orderly destroy, a fail frame naming a rank of this pair");
            ended = true;
            continue;
          }
          header();
          inPayload = true;
          payloadGot = 0;
        }
        for (; i < (size_t)n && payloadGot < h.bytes; ++i, ++payloadGot) payloadByte(buf[i]);
        if (payloadGot == h.bytes) {
          inPayload = false;
          frameDone();
        }
      }
    }
    return got;
  }
  virtual void header() = 0;
  virtual void payloadByte(char b) = 0;
  virtual void frameDone() = 0;

  DataHeader h{};
  size_t hdrGot = 0;
  uint64_t payloadGot = 0;
  bool inPayload = false, ended = false, eof = false;
};

// Plays rank 1 against rank 0's send side (started with acceptSender): writes the credit stream,
// each credit once rank 1 has read whole the steps the plan says it needs (stepsRead()), while
// gpu(head) lets the simulated GPU write what the credits allow (whether it wrote anything); then
// ends the stream (or destroys the proxy with the connection open), reads to the end, and checks
// the failures and the head. The caller checks the rest once this returns (the proxy is gone).
template <typename Gpu, typename StepsRead>
void driveSendSide(uint8_t flags, bool tight, const std::vector<char>& stream, const SendPlan& plan, Rank& rank,
                   int fd, const volatile uint64_t* gpuHead, DataFrameReader& reader, Gpu gpu, StepsRead stepsRead) {
  const bool loose = flags & (kDestroyOpen | kAbortHalfway | kUngated);
  uint64_t headSeen = 0;
  size_t ready = 0;  // credits whose steps rank 1 has read
  auto tick = [&](bool starving) {
    const uint64_t head = loadAcq(gpuHead);
    require(head >= headSeen && head <= plan.head, "the head only grows, and only to accepted credits");
    headSeen = head;
    const bool wrote = gpu(head);
    if (wrote) rank.proxy->wake();  // as a launch does
    // With a tight buffer rank 1 reads only when it must, so that the proxy's frames back up.
    return ((!tight || starving) && reader.pump(fd, false)) || wrote;
  };
  writeStream(fd, stream, kPieces[flags >> 5 & 3], flags & kUngated ? 0 : plan.stop, rank, flags & kAbortHalfway, tick,
              [&](size_t) {
                while (ready < plan.need.size() && plan.need[ready] <= stepsRead()) ++ready;
                const bool open = (flags & kUngated) || ready == plan.need.size();
                return open ? stream.size() : ready * sizeof(Credit);
              });
  if (!(flags & kDestroyOpen) && !rank.abort) {
    ::shutdown(fd, SHUT_WR);
    require(within(kHang, [&] { return rank.failures.load() > 0 || (plan.bye && loadAcq(gpuHead) == plan.head); }),
            "the proxy takes a bye after the credits before it, or fails a cut or bad stream promptly");
  }
  // Destroyed on another thread while rank 1 keeps reading: an orderly destroy first sends what
  // the GPU published, which may need rank 1 to make room.
  std::thread destroyer([&] { rank.proxy.reset(); });
  const auto closing = Clock::now() + kHang;
  while (!reader.eof) {  // the proxy drained or gave up, then closed its end
    if (!reader.pump(fd, rank.failures.load() == 0)) nap(fd, false);
    require(Clock::now() < closing, "a destroyed proxy closes its connections");
  }
  destroyer.join();
  rank.requireFailures(loose || plan.bye ? 0 : 1);
  if (plan.bye && !loose) require(rank.failures.load() == 0, "a bye is taken quietly");
  if (!loose) require(*gpuHead == plan.head, "every accepted credit reaches the GPU");
}

// Rank 1's send proxy reading the credits of rank 0's receive side: each counts only steps the GPU
// consumed (gpuHead) and grows; a bye comes only from an orderly destroy (byeAllowed), a fail frame
// names a rank of this pair, and nothing follows either. Returns whether anything came.
struct CreditReader {
  bool pump(int fd, uint64_t gpuHead, bool byeAllowed) {
    bool got = false;
    while (!eof) {
      const ssize_t n = bootstrap::recvSome(fd, reinterpret_cast<char*>(&in) + inGot, sizeof(in) - inGot);
      if (n == -EAGAIN) break;
      if (n <= 0) {  // closed or reset (an aborted proxy may leave credits unread): the end either way
        eof = true;
        break;
      }
      got = true;
      inGot += (size_t)n;
      if (inGot < sizeof(in)) continue;
      inGot = 0;
      require(!ended, "nothing follows a bye or a fail frame");
      require(in.channel == 0 && (in.magic == kCreditMagic || in.magic == kByeMagic || in.magic == kFailMagic),
              "a credit is well formed");
      if (isFail(in)) {  // the proxy failed (onFailure may come just after): it names rank 0 or 1
        require(in.head <= 1, "a fail frame names a rank of this pair");
        ended = true;
        continue;
      }
      if (isBye(in)) {
        require(byeAllowed, "a bye only from an orderly destroy");
        ended = true;
        continue;
      }
      require(in.head > credited && in.head <= gpuHead, "a credit grows and counts only consumed steps");
      credited = in.head;
    }
    return got;
  }
  Credit in{};
  size_t inGot = 0;
  uint64_t credited = 0;
  bool ended = false, eof = false;
};

// No file descriptor or thread may outlive its input: libFuzzer runs millions in one process.
inline size_t entries(const char* folder) {
  size_t n = 0;
  if (DIR* d = opendir(folder)) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}
inline void checkNoLeaks() {
  static size_t runs = 0, fds = 0, threads = 0;
  if (++runs == 64) {
    fds = entries("/proc/self/fd");
    threads = entries("/proc/self/task");
  }
  if (runs > 64 && runs % 256 == 0) {
    require(entries("/proc/self/fd") <= fds + 4, "no file descriptor leaks");
    require(entries("/proc/self/task") <= threads, "no thread outlives its input");
  }
}

}  // namespace weft::fuzz::net
