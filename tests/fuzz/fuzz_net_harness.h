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
