// Coverage-guided fuzzing (libFuzzer, with AddressSanitizer and UndefinedBehaviorSanitizer) of every
// parser that reads bytes or text from outside the process: bootstrap frames off a socket, unique
// ids, addresses (as text too), the topology records and transport rows that ranks exchange, the
// call-check pages other ranks write in /dev/shm, topology XML, the settings' mini-languages
// (NCCL_ALGO, NCCL_PROTO, NCCL_WEFT_TUNING), the network proxy's wire structs, and a live network
// proxy fed a byte stream by a peer played over loopback TCP. User-pains matrix row 16: no crash,
// undefined behaviour, unbounded allocation or hang; what decodes must encode back to the same bytes
// where the format allows it. One executable per target (WEFT_FUZZ_TARGET names it); tools/fuzz.sh
// builds them with clang and runs each for a while. Logging is off (NCCL_DEBUG=NONE) so that the
// refusals do not flood the output; WEFT_FUZZ_LOG=1 keeps the caller's NCCL_DEBUG for a reproducer.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/frame_reader.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/op_ledger.h"
#include "device/work_math.h"
#include "graph/algo_proto_env.h"
#include "graph/rank_record.h"
#include "graph/topo_xml.h"
#include "graph/transport_choice.h"
#include "graph/tuning_constants.h"
#include "graph/xml.h"
#include "proxy/net_proxy.h"
#include "proxy/net_wire.h"

namespace {

using namespace weft;

// A broken promise of a parser: abort, so that libFuzzer keeps the input.
void require(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz invariant broken: %s\n", what);
    abort();
  }
}

constexpr uint64_t kJobKey = 0x1234567890abcdefULL;

// Bootstrap frames: the input goes through a socket in pieces (the first byte picks the piece
// size); every frame the reader hands out must be valid and within its type's caps.
void frames(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t piece = 1 + data[0] % 61;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return;
  bootstrap::FrameReader reader(kJobKey);
  bool done = false;
  for (size_t at = 1; at < size && !done; at += piece) {
    const size_t n = std::min(piece, size - at);
    if (write(fds[1], data + at, n) != (ssize_t)n) break;
    for (;;) {
      const bootstrap::FrameReader::Event e = reader.pump(fds[0]);
      if (e == bootstrap::FrameReader::Event::kFrame) {
        const bootstrap::wire::FrameHeader& h = reader.header();
        std::string why;
        require(bootstrap::wire::validateHeader(h, kJobKey, &why), "a frame handed out has a valid header");
        require(reader.payload().size() == h.length, "the payload is as long as its header says");
        require(h.length <= bootstrap::wire::kMaxDataFrameBytes, "no frame above the data cap");
        continue;
      }
      if (e != bootstrap::FrameReader::Event::kNeedMore) done = true;
      break;
    }
  }
  close(fds[0]);
  close(fds[1]);
}

// Ids: raw bytes when the first byte is odd, else the bytes XORed onto a valid id (random bytes
// almost never pass its magic and check, so the decoder's deeper checks would go unexplored).
void uniqueId(const uint8_t* data, size_t size) {
  if (size == 0) return;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (data[0] & 1) {
    memcpy(&id, data + 1, std::min(size - 1, sizeof(id)));
  } else {
    bootstrap::UniqueIdInfo base;
    base.jobKey = kJobKey;
    base.root = bootstrap::SocketAddress::loopback(data[0] & 2 ? AF_INET6 : AF_INET);
    base.root.setPort(29500);
    bootstrap::encodeUniqueId(base, &id);
    char* bytes = reinterpret_cast<char*>(&id);
    for (size_t i = 1; i < size && i - 1 < sizeof(id); ++i) bytes[i - 1] ^= (char)data[i];
  }
  bootstrap::UniqueIdInfo info;
  std::string why;
  if (!bootstrap::decodeUniqueId(id, &info, &why)) return;
  ncclUniqueId again;
  bootstrap::encodeUniqueId(info, &again);
  bootstrap::UniqueIdInfo twice;
  require(bootstrap::decodeUniqueId(again, &twice, &why), "a decoded id encodes to a valid id");
  require(twice.jobKey == info.jobKey && twice.rootStartedByRank == info.rootStartedByRank, "the id round-trips");
}

void address(const uint8_t* data, size_t size) {
  // As text (NCCL_COMM_ID, NCCL_SOCKET_IFNAME-style settings), without name lookups.
  bootstrap::SocketAddress parsed;
  std::string reason;
  if (bootstrap::SocketAddress::parse(std::string(reinterpret_cast<const char*>(data), size), &parsed, &reason,
                                      false)) {
    require(parsed.valid(), "a parsed address is an address");
  }
  bootstrap::wire::WireAddress w;
  memset(&w, 0, sizeof(w));
  memcpy(&w, data, std::min(size, sizeof(w)));
  bootstrap::SocketAddress a;
  std::string why;
  if (!bootstrap::wire::decodeAddress(w, &a, &why)) return;
  bootstrap::SocketAddress b;
  require(bootstrap::wire::decodeAddress(bootstrap::wire::encodeAddress(a), &b, &why),
          "a decoded address encodes back");
  require(a.toString() == b.toString(), "the address round-trips");
}

void rankRecord(const uint8_t* data, size_t size) {
  graph::RankRecord record;
  if (isError(graph::decodeRankRecord(data, size, &record))) return;
  const std::vector<uint8_t> again = graph::encodeRankRecord(record);
  graph::RankRecord twice;
  require(!isError(graph::decodeRankRecord(again.data(), again.size(), &twice)), "a decoded record encodes back");
  require(graph::encodeRankRecord(twice) == again, "the record round-trips");
}

void transportRow(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const int nRanks = 1 + data[0] % 64;
  graph::TransportRow row;
  if (isError(graph::decodeTransportRow(data + 1, size - 1, nRanks, &row))) return;
  require((int)row.size() == nRanks, "a row holds one entry per rank");
  require(graph::encodeTransportRow(row) == std::vector<uint8_t>(data + 1, data + size), "the row round-trips");
}

void topologyXml(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  graph::XmlNode root;
  (void)graph::parseXml(text, &root);
  graph::Topology topo;
  (void)graph::parseTopologyXml(text, &topo);
}

// Another rank's call-check page in /dev/shm: the bytes of a real page (two host ranks, some calls
// published) with the input XORed onto them, cut to a length the input picks; whatever opens
// must read back without going past the mapping.
void ledgerPage(const uint8_t* data, size_t size) {
  static const uint64_t hash = 0x5eed000000000000ULL ^ (uint64_t)getpid();
  static const std::vector<uint8_t> base = [] {
    auto real = core::OpLedger::create(hash, 1, 2);
    std::vector<uint8_t> bytes;
    if (!real) return bytes;
    core::CallSignature call;
    call.count = 77;
    real->publish(call);
    core::P2pSignature op;
    op.count = 5;
    real->publishP2p(0, core::P2pDirection::kRecv, op);
    const int fd = shm_open(core::OpLedger::pageName(hash, 1).c_str(), O_RDONLY, 0);
    const off_t length = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    bytes.resize(length > 0 ? (size_t)length : 0);
    if (fd >= 0 && pread(fd, bytes.data(), bytes.size(), 0) != (ssize_t)bytes.size()) bytes.clear();
    if (fd >= 0) close(fd);
    return bytes;  // the real page goes with `real`; its bytes are the base
  }();
  if (base.empty() || size < 2) return;
  std::vector<uint8_t> page = base;
  const size_t cut = (size_t)(data[0] | data[1] << 8) * 64;  // 0: the whole page
  if (cut > 0 && cut < page.size()) page.resize(cut);
  for (size_t i = 2; i < size && i - 2 < page.size(); ++i) page[i - 2] ^= data[i];
  const std::string name = core::OpLedger::pageName(hash, 1);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0) return;
  const bool written = write(fd, page.data(), page.size()) == (ssize_t)page.size();
  close(fd);
  if (written) {
    if (auto peer = core::PeerLedger::open(hash, 1)) {
      core::CallSignature call;
      core::P2pSignature op;
      for (uint64_t seq = 0; seq < 4; ++seq) {
        (void)peer->recent(seq, &call);
        for (int hostPeer = -1; hostPeer < 4; ++hostPeer) {
          (void)peer->recentP2p(hostPeer, core::P2pDirection::kSend, seq, &op);
          (void)peer->p2pOps(hostPeer, core::P2pDirection::kRecv);
        }
      }
      uint64_t findingSeq = 0;
      std::string text;
      if (peer->finding(&findingSeq, &text)) require(text.size() < 4096, "a finding's text is bounded");
      (void)peer->collectives();
    }
  }
  shm_unlink(name.c_str());
}

void settings(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  uint8_t masks[graph::kNumCollFuncs] = {};
  bool named[graph::kNumCollFuncs] = {};
  std::string why;
  (void)graph::parseAlgoList(text, masks, &why);
  (void)graph::parseProtoList(text, masks, &why, named);
  graph::TuningConstants k;
  (void)graph::parseTuningText(text, &k, &why);
}

// ---------------------------------------------------------------------------------------------
// Network proxy

// Reads the input front to back, as zeros once it runs out, so that every input means something.
struct Cursor {
  const uint8_t* at;
  size_t left;
  template <typename T>
  T take() {
    T value{};
    const size_t n = std::min(left, sizeof(T));
    memcpy(&value, at, n);
    at += n;
    left -= n;
    return value;
  }
  // The rest of the input as a struct: raw bytes, or XORed onto `base` (a valid one) so that
  // zeros keep it valid and the checks past the magic get explored.
  template <typename T>
  T over(const T& base, bool xorOnto) {
    T value = base;
    if (!xorOnto) memset(&value, 0, sizeof(value));
    char* bytes = reinterpret_cast<char*>(&value);
    for (size_t i = 0; i < sizeof(T) && i < left; ++i) bytes[i] = xorOnto ? bytes[i] ^ (char)at[i] : (char)at[i];
    return value;
  }
};

// The proxy's wire structs through their checks, with the checks' parameters also from the input.
// Input: a mode byte (bits 0-1 the struct, bit 2 XORed onto a valid one), four 64-bit parameters,
// the struct's bytes.
void netWire(const uint8_t* data, size_t size) {
  using namespace proxy;
  Cursor in{data, size};
  const uint8_t mode = in.take<uint8_t>();
  const uint64_t p0 = in.take<uint64_t>(), p1 = in.take<uint64_t>(), p2 = in.take<uint64_t>(),
                 p3 = in.take<uint64_t>();
  const bool xorOnto = mode & 4;
  std::string why;
  auto accepted = [&](Status s) {
    if (s == ncclSuccess) return true;
    require(s == ncclRemoteError, "a refused frame is the peer's error");
    require(why.rfind("fuzz: ", 0) == 0, "a refusal's text starts with where the frame came from");
    return false;
  };
  switch (mode & 3) {
    case 0: {
      const uint64_t job = p0;
      const int rank = (int)(p1 % 9) - 1;
      bootstrap::SocketAddress real = bootstrap::SocketAddress::loopback(p2 & 1 ? AF_INET6 : AF_INET);
      real.setPort((uint16_t)(p2 >> 1 | 1));
      const ListenerDesc good = makeListenerDesc(job, rank, real);
      bootstrap::SocketAddress got;
      require(accepted(checkListenerDesc(good, job, rank, "fuzz", &got, &why)) && got == real,
              "a made descriptor is accepted with its address");
      const ListenerDesc d = in.over(good, xorOnto);
      bootstrap::SocketAddress out = bootstrap::SocketAddress::loopback(AF_INET);
      out.setPort(7);
      const bootstrap::SocketAddress before = out;
      if (!accepted(checkListenerDesc(d, job, rank, "fuzz", &out, &why))) {
        require(out == before, "a refused descriptor leaves the address alone");
        break;
      }
      require(d.magic == kListenerMagic && d.jobKey == job && d.rank == rank, "an accepted descriptor is rank's");
      require(out.valid() && out.port() != 0, "an accepted descriptor has an address with a port");
      const bootstrap::wire::WireAddress back = bootstrap::wire::encodeAddress(out);
      require(memcmp(&back, &d.address, sizeof(back)) == 0, "the accepted address is the one on the wire");
      bool wildcard = true;
      for (uint8_t b : back.bytes) wildcard = wildcard && b == 0;
      require(!wildcard, "no wildcard address is accepted");
      break;
    }
    case 1: {
      const int nRanks = (int)(p1 % 9), receiver = (int)(p0 % 9) - 1;
      const int sender = nRanks > 0 ? (int)((p1 >> 8) % (uint64_t)nRanks) : 0;
      const int channel = (int)((p0 >> 8) % dev::kMaxChannels);
      const Hello good = makeHello(p2, sender, receiver, channel, p3);
      require(accepted(checkHello(good, p2, receiver, nRanks, "fuzz", &why)) == (nRanks > 0 && p3 != 0),
              "a made hello is accepted when it names a rank and a step size");
      const Hello h = in.over(good, xorOnto);
      if (!accepted(checkHello(h, p2, receiver, nRanks, "fuzz", &why))) break;
      require(h.magic == kHelloMagic && h.version == kNetWireVersion && h.jobKey == p2, "an accepted hello is ours");
      require(h.reserved0 == 0 && h.receiver == receiver, "an accepted hello is for us");
      require(h.llStepBytes == 0 || dev::llStepBytesValid(h.llStepBytes), "an accepted hello has a valid LL step size");
      require(h.sender >= 0 && h.sender < nRanks && h.channel >= 0 && h.channel < dev::kMaxChannels,
              "an accepted hello names a sender and channel in range");
      require(h.stepBytes != 0, "an accepted hello has a step size");
      break;
    }
    case 2: {
      // The receiver consumed `start` steps; Simple steps from `next` on; LL slots or none.
      const int channel = (int)(p0 % dev::kMaxChannels);
      const uint64_t next = p1 >> 2, start = next + 4 - std::min<uint64_t>(next + 4, p2 & 15);
      const uint64_t stepBytes = p3 >> (p3 & 63);  // all magnitudes
      const uint64_t llStepBytes = (p0 >> 8 & 1) ? dev::kLLMinStepBytes << (p0 >> 9 & 7) : 0;
      const RecvWindow w{next, start, stepBytes, llStepBytes};
      const bool free = next >= start && next < start + dev::kSteps;
      const DataHeader good = makeDataHeader(channel, next, std::min(p2 >> 8, std::min<uint64_t>(stepBytes, ~0u)));
      require(accepted(checkDataHeader(good, channel, w, "fuzz", &why)) == free,
              "a made header is accepted when its slot is free");
      const DataHeader lines = makeLinesHeader(channel, next, 0, dev::kLLLineBytes);
      require(accepted(checkDataHeader(lines, channel, w, "fuzz", &why)) == (free && llStepBytes != 0),
              "made LL lines are accepted when their slot is free, on a connection with LL");
      require(accepted(checkDataHeader(makeByeData(channel), channel, w, "fuzz", &why)),
              "a bye is accepted on its channel");
      const DataHeader h = in.over(p0 >> 12 & 1 ? lines : good, xorOnto);
      if (!accepted(checkDataHeader(h, channel, w, "fuzz", &why))) break;
      require(h.channel == channel, "an accepted header is for this channel");
      if (isBye(h) || isFail(h)) break;
      require(h.step >= start && h.step < start + dev::kSteps, "an accepted step has a free slot, not yet consumed");
      if (isLines(h)) {
        require(llStepBytes != 0 && h.bytes > 0 && h.bytes % dev::kLLLineBytes == 0 &&
                    h.offset % dev::kLLLineBytes == 0 && (uint64_t)h.offset + h.bytes <= llStepBytes,
                "accepted LL lines are whole lines within their slot");
        break;
      }
      require(h.magic == kDataMagic && h.offset == 0 && h.bytes <= stepBytes, "an accepted step fits its slot");
      require(llStepBytes != 0 ? h.step >= next : h.step == next, "an accepted Simple step comes in order");
      break;
    }
    default: {
      const int channel = (int)(p0 % dev::kMaxChannels);
      const uint64_t lastHead = p1, stepsSent = p1 + (p2 >> (p2 & 63));  // may wrap below lastHead
      const uint64_t span = stepsSent - lastHead;
      const Credit good = makeCredit(channel, lastHead + (span == UINT64_MAX ? p3 : p3 % (span + 1)));
      require(accepted(checkCredit(good, channel, lastHead, stepsSent, "fuzz", &why)) == (stepsSent >= lastHead),
              "a made credit is accepted when it is within the steps sent");
      require(accepted(checkCredit(makeByeCredit(channel), channel, lastHead, stepsSent, "fuzz", &why)),
              "a bye is accepted on its channel");
      const Credit c = in.over(good, xorOnto);
      if (!accepted(checkCredit(c, channel, lastHead, stepsSent, "fuzz", &why))) break;
      require(c.channel == channel, "an accepted credit is for this channel");
      if (isBye(c) || isFail(c)) break;
      require(c.magic == kCreditMagic && c.head >= lastHead, "an accepted credit never goes backwards");
      require(c.head <= stepsSent, "an accepted credit never passes the steps sent");
      break;
    }
  }
}

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
// Input: a flags byte, a byte of sizes, then the stream's bytes (taken as they are, or each frame
// XORed onto the next one of a peer moving one step at a time).
namespace net {

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
// The sizes byte: bits 0-1 the step size (64 << 2n bytes), bit 2 a small socket buffer on rank 1
// that it reads lazily (send side), bits 3-7 the steps the GPU sends (send side) or the valid
// frames before a raw stream (receive side).
constexpr uint8_t kTightBuffer = 4;

uint64_t loadAcq(const volatile uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void storeRel(volatile uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

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
ssize_t sendPiece(int fd, const char* p, size_t n) {
  iovec iov{const_cast<char*>(p), n};
  return bootstrap::sendSome(fd, &iov, 1);
}

// Sleeps up to a millisecond, less when the socket has bytes (or room, with `out`).
void nap(int fd, bool out) {
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
bootstrap::Fd connectAsSender(Rank& rank, NetRecvSide side) {
  bootstrap::SocketAddress address;
  std::string why;
  require(checkListenerDesc(rank.proxy->desc(), kJob, 0, "fuzz", &address, &why) == ncclSuccess,
          "the proxy publishes a valid descriptor");
  bootstrap::Fd fd;
  int err = 0;
  const util::Deadline deadline = util::Deadline::afterSeconds(3);
  require(bootstrap::connectBlocking(address, deadline, nullptr, false, &fd, &err) == bootstrap::Io::kOk,
          "the proxy's listener takes a connection");
  const Hello hello = makeHello(kJob, 1, 0, 0, side.stepBytes);
  require(bootstrap::sendAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk,
          "the hello goes out");
  require(rank.proxy->start({}, {side}, std::vector<ListenerDesc>(2, rank.proxy->desc())) == ncclSuccess,
          "start() admits the expected hello");
  Hello echo;
  require(bootstrap::recvAll(fd.get(), &echo, sizeof(echo), deadline, nullptr, &err) == bootstrap::Io::kOk &&
              memcmp(&echo, &hello, sizeof(hello)) == 0, "the proxy echoes the hello");
  return fd;
}

// ---- Receive side: the input is the data stream from rank 1.

// Slots with guard zones either side, all canary until the proxy writes.
struct RecvMem {
  static constexpr size_t kGuard = 256;
  explicit RecvMem(uint64_t bytes) : stepBytes(bytes), buf(2 * kGuard + kSteps * bytes, kCanary) {}
  char* slot(uint64_t step) { return buf.data() + kGuard + (step % kSteps) * stepBytes; }
  uint64_t stepBytes;
  std::vector<char> buf;
  uint64_t tail = 0, head = 0;
};

// How the proxy must read a data stream: the headers it reads (the last may be refused, a bye, or
// cut short), the payload of each step it accepts, how many it publishes, and its last byte read.
struct RecvPlan {
  std::vector<size_t> header, payload;
  std::vector<uint64_t> bytes;
  uint64_t steps = 0;
  size_t stop = 0;
  bool bye = false;
};

// With a consuming GPU the harness writes step s's header only once the GPU freed slot s - kSteps,
// so the window never refuses; with a stalled one steps >= kSteps are always refused.
bool headerAccepted(const DataHeader& h, uint64_t step, bool stall, uint64_t stepBytes) {
  std::string why;
  const RecvWindow w{step, stall || step + 1 < kSteps ? 0 : step + 1 - kSteps, stepBytes, 0};
  return checkDataHeader(h, 0, w, "fuzz", &why) == ncclSuccess;
}

RecvPlan planRecv(const std::vector<char>& s, bool stall, uint64_t stepBytes) {
  RecvPlan p;
  for (size_t at = 0;;) {
    p.header.push_back(at);
    p.stop = s.size();
    if (s.size() - at < sizeof(DataHeader)) return p;  // the end: mid-header or between frames
    DataHeader h;
    memcpy(&h, s.data() + at, sizeof(h));
    if (!headerAccepted(h, p.steps, stall, stepBytes) || isBye(h) || isFail(h)) {  // a fail frame fails it
      p.stop = at + sizeof(h);
      p.bye = isBye(h) && headerAccepted(h, p.steps, stall, stepBytes);
      return p;
    }
    require(h.step == p.steps && h.bytes <= stepBytes, "an accepted step is the next one and fits its slot");
    p.payload.push_back(at + sizeof(h));
    p.bytes.push_back(h.bytes);
    if (s.size() - at - sizeof(h) < h.bytes) return p;  // cut in the payload
    ++p.steps;
    at += sizeof(h) + h.bytes;
  }
}

// Valid frames with pattern payloads (raw mode's prefix), or the input's frames XORed onto the
// headers a well-behaved sender would write next (empty steps), payload bytes taken as they are.
std::vector<char> recvStream(Cursor in, bool xorFrames, int prefix, bool stall, uint64_t stepBytes) {
  std::vector<char> s;
  auto append = [&](const void* p, size_t n) { s.insert(s.end(), (const char*)p, (const char*)p + n); };
  if (!xorFrames) {
    for (int i = 0; i < prefix; ++i) {
      const uint64_t bytes = (uint64_t)i * 977 % (stepBytes + 1);
      const DataHeader h = makeDataHeader(0, (uint64_t)i, bytes);
      append(&h, sizeof(h));
      for (uint64_t b = 0; b < bytes; ++b) s.push_back((char)(i * 31 + b));
    }
    append(in.at, in.left);
    return s;
  }
  for (uint64_t step = 0; in.left > 0; ++step) {
    const DataHeader h = in.over(makeDataHeader(0, step, 0), true);
    const size_t n = std::min(in.left, sizeof(h));
    append(&h, n);
    in.at += n;
    in.left -= n;
    if (n < sizeof(h) || !headerAccepted(h, step, stall, stepBytes) || isBye(h)) break;
    const size_t payload = (size_t)std::min<uint64_t>(h.bytes, in.left);
    append(in.at, payload);
    in.at += payload;
    in.left -= payload;
  }
  append(in.at, in.left);  // past the proxy's last byte: it must not read it
  return s;
}

// A slot holds exactly its step's payload, the canary after it.
bool slotHolds(const char* slot, const char* payload, uint64_t bytes, uint64_t stepBytes) {
  if (memcmp(slot, payload, bytes) != 0) return false;
  for (uint64_t i = bytes; i < stepBytes; ++i) {
    if (slot[i] != kCanary) return false;
  }
  return true;
}

void recvSide(uint8_t flags, uint64_t stepBytes, int prefix, Cursor body) {
  const bool stall = flags & kStallGpu, loose = flags & (kDestroyOpen | kAbortHalfway | kUngated);
  const std::vector<char> stream = recvStream(body, flags & kXorFrames, prefix, stall, stepBytes);
  const RecvPlan plan = planRecv(stream, stall, stepBytes);
  RecvMem mem(stepBytes);  // before the rank: outlives the proxy
  Rank rank;
  NetRecvSide side;
  side.channel = 0;
  side.peer = 1;
  side.slots = mem.slot(0);
  side.tail = &mem.tail;
  side.gpuHead = &mem.head;
  side.stepBytes = stepBytes;
  bootstrap::Fd fd = connectAsSender(rank, side);

  uint64_t tailSeen = 0, credited = 0;
  bool byeCredit = false, eof = false;
  Credit in{};
  size_t inGot = 0;
  // The GPU: checks each published step's bytes, refills the slot with the canary, frees it.
  auto consume = [&] {
    const uint64_t tail = loadAcq(&mem.tail);
    require(tail >= tailSeen && tail <= plan.steps, "the tail only grows, and only over accepted steps");
    tailSeen = tail;
    if (stall) return false;
    const uint64_t head = mem.head;
    for (uint64_t s = head; s < tail; ++s) {
      require(slotHolds(mem.slot(s), stream.data() + plan.payload[s], plan.bytes[s], stepBytes),
              "a published step holds its payload, the rest of its slot untouched");
      memset(mem.slot(s), kCanary, stepBytes);
    }
    storeRel(&mem.head, tail);
    return tail > head;
  };
  // Rank 1's send proxy: reads the credits, which must count steps the GPU consumed, and grow.
  auto readCredits = [&] {
    bool got = false;
    while (!eof) {
      const ssize_t n = bootstrap::recvSome(fd.get(), reinterpret_cast<char*>(&in) + inGot, sizeof(in) - inGot);
      if (n == -EAGAIN) break;
      if (n <= 0) {  // closed or reset (an aborted proxy may leave credits unread): the end either way
        eof = true;
        break;
      }
      got = true;
      inGot += (size_t)n;
      if (inGot < sizeof(in)) continue;
      inGot = 0;
      require(!byeCredit, "nothing follows a bye or a fail frame");
      require(in.channel == 0 && (in.magic == kCreditMagic || in.magic == kByeMagic || in.magic == kFailMagic),
              "a credit is well formed");
      if (isFail(in)) {  // the proxy failed (onFailure may come just after): it names rank 0 or 1
        require(in.head <= 1, "a fail frame names a rank of this pair");
        byeCredit = true;
        continue;
      }
      if (isBye(in)) {
        require(rank.proxy == nullptr && rank.failures.load() == 0, "a bye only from an orderly destroy");
        byeCredit = true;
        continue;
      }
      require(in.head > credited && in.head <= mem.head, "a credit grows and counts only consumed steps");
      credited = in.head;
    }
    return got;
  };
  writeStream(fd.get(), stream, kPieces[flags >> 5 & 3], flags & kUngated ? 0 : plan.stop, rank,
              flags & kAbortHalfway,
              [&](bool) {
                const bool consumed = consume();
                return readCredits() || consumed;
              },
              [&](size_t) {  // step s's header waits until slot s - kSteps is free
                const uint64_t next = mem.head + kSteps;
                const bool open = stall || (flags & kUngated) || next >= plan.header.size();
                return open ? stream.size() : plan.header[next];
              });
  if (!(flags & kDestroyOpen) && !rank.abort) {
    ::shutdown(fd.get(), SHUT_WR);
    require(within(kHang, [&] { return rank.failures.load() > 0 || (plan.bye && loadAcq(&mem.tail) == plan.steps); }),
            "the proxy takes a bye after the steps before it, or fails a cut or bad stream promptly");
  }
  rank.proxy.reset();
  const auto end = Clock::now() + kHang;
  while (!eof) {  // the proxy closed its end: the rest of the credits, then the end of the stream
    consume();
    if (!readCredits()) nap(fd.get(), false);
    require(Clock::now() < end, "a destroyed proxy closes its connections");
  }
  rank.requireFailures(loose || plan.bye ? 0 : 1);
  if (plan.bye && !loose) require(rank.failures.load() == 0, "a bye is taken quietly");
  if (!loose) require(mem.tail == plan.steps, "every valid step before the end is published");
  // Every slot: an unconsumed step's payload, a prefix of the step in progress, or the canary.
  for (uint64_t i = 0; i < kSteps; ++i) {
    const uint64_t step = mem.head + (i + kSteps - mem.head % kSteps) % kSteps;  // the step slot i holds next
    const char* slot = mem.slot(i);
    if (step < mem.tail) {
      require(slotHolds(slot, stream.data() + plan.payload[step], plan.bytes[step], stepBytes),
              "an unconsumed step still holds its payload");
      continue;
    }
    for (uint64_t b = 0; b < stepBytes; ++b) {
      const bool partial = step == mem.tail && step < plan.payload.size() && b < plan.bytes[step] &&
                           plan.payload[step] + b < stream.size() && slot[b] == stream[plan.payload[step] + b];
      require(slot[b] == kCanary || partial, "no slot is written but the one of the step in progress");
    }
  }
  for (size_t i = 0; i < RecvMem::kGuard; ++i) {
    require(mem.buf[i] == kCanary && mem.buf[mem.buf.size() - 1 - i] == kCanary, "nothing is written around slots");
  }
}

// ---- Send side: the input is the credit stream from rank 1.

// The GPU's step sizes: mostly full (so that a window's frames fill the socket buffers), one empty
// and one in between per window; its bytes follow a pattern.
uint64_t stepSize(uint64_t s, uint64_t stepBytes) {
  return s % kSteps == 0 ? 0 : s % kSteps == 1 ? s * 37 % stepBytes : stepBytes;
}
char patternByte(uint64_t s, uint64_t i) { return (char)(s * 131 + i * 7 + 1); }

struct SendMem {
  explicit SendMem(uint64_t bytes) : stepBytes(bytes), slots(kSteps * bytes) {}
  void publish() {  // the sending kernel writes its next step, then the tail
    const uint64_t s = published++;
    const uint64_t n = stepSize(s, stepBytes);
    for (uint64_t i = 0; i < n; ++i) slots[(s % kSteps) * stepBytes + i] = patternByte(s, i);
    sizes[s % kSteps] = dev::stepSizeWord(s, n);
    storeRel(&tail, published);
  }
  uint64_t stepBytes;
  std::vector<char> slots;
  uint64_t tail = 0, sizes[kSteps] = {}, head = 0;
  uint64_t published = 0;
};

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
bool creditAccepted(const Credit& c, uint64_t head, uint64_t total) {
  std::string why;
  return checkCredit(c, 0, head, std::min(total, head + kSteps), "fuzz", &why) == ncclSuccess;
}

SendPlan planSend(const std::vector<char>& s, uint64_t total) {
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
std::vector<char> sendStream(Cursor in, bool xorFrames, uint64_t total) {
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

// Rank 1's receive proxy reading rank 0's data frames: each must be the next step the GPU
// published, header and bytes; a bye only from an orderly destroy, and last.
struct FrameReader {
  bool pump(int fd, const SendMem& mem, bool byeAllowed) {
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
        require(!bye, "nothing follows a bye");
        if (!inPayload) {
          const size_t k = std::min(sizeof(h) - hdrGot, (size_t)n - i);
          memcpy(reinterpret_cast<char*>(&h) + hdrGot, buf + i, k);
          i += k;
          hdrGot += k;
          if (hdrGot < sizeof(h)) continue;
          hdrGot = 0;
          if (isBye(h)) {
            require(byeAllowed && h.channel == 0, "a bye only from an orderly destroy");
            bye = true;
            continue;
          }
          if (isFail(h)) {  // the proxy failed (its onFailure may come just after)
            require(h.channel == 0 && h.step <= 1, "a fail frame names a rank of this pair");
            bye = true;  // nothing follows it either
            continue;
          }
          const DataHeader want = makeDataHeader(0, frames, stepSize(frames, mem.stepBytes));
          require(frames < mem.published && memcmp(&h, &want, sizeof(h)) == 0,
                  "each frame is the next step the GPU published, with its size");
          inPayload = true;
          payloadGot = 0;
        }
        for (; i < (size_t)n && payloadGot < h.bytes; ++i, ++payloadGot) {
          require(buf[i] == patternByte(frames, payloadGot), "a frame carries its step's bytes");
        }
        if (payloadGot == h.bytes) {
          inPayload = false;
          ++frames;
        }
      }
    }
    return got;
  }
  DataHeader h{};
  size_t hdrGot = 0;
  uint64_t payloadGot = 0;
  bool inPayload = false, bye = false, eof = false;
  uint64_t frames = 0;
};

void sendSide(uint8_t flags, uint64_t stepBytes, bool tight, uint64_t total, Cursor body) {
  const bool loose = flags & (kDestroyOpen | kAbortHalfway | kUngated);
  const std::vector<char> stream = sendStream(body, flags & kXorFrames, total);
  const SendPlan plan = planSend(stream, total);
  SendMem mem(stepBytes);  // before the rank: outlives the proxy
  Rank rank;
  bootstrap::Fd listener;  // rank 1's proxy listener
  bootstrap::SocketAddress bound;
  require(bootstrap::listenOn(bootstrap::SocketAddress::loopback(AF_INET), &listener, &bound) == ncclSuccess,
          "rank 1 listens");
  // Less than a window of 4 KiB steps, so that the proxy's frames back up behind a slow reader; any
  // smaller and loopback TCP crawls on zero-window probes. Accepted sockets inherit it.
  const int small = 4096;
  if (tight) (void)setsockopt(listener.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  NetSendSide side;
  side.channel = 0;
  side.peer = 1;
  side.gpuTail = &mem.tail;
  side.stepSizes = mem.sizes;
  side.slots = mem.slots.data();
  side.head = &mem.head;
  side.stepBytes = stepBytes;
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
  const Hello want = makeHello(kJob, 0, 1, 0, stepBytes);
  int err = 0;
  const util::Deadline deadline = util::Deadline::afterSeconds(3);
  require(bootstrap::recvAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk &&
              memcmp(&hello, &want, sizeof(hello)) == 0, "the proxy says the expected hello");
  require(bootstrap::sendAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk,
          "the echo goes out");
  starter.join();
  require(started == ncclSuccess, "start() takes the echo");

  FrameReader reader;
  uint64_t headSeen = 0;
  size_t ready = 0;  // credits whose frames rank 1 has read
  auto tick = [&](bool starving) {
    const uint64_t head = loadAcq(&mem.head);
    require(head >= headSeen && head <= plan.head, "the head only grows, and only to accepted credits");
    headSeen = head;
    bool moved = false;
    while (mem.published < total && mem.published < head + kSteps) {
      mem.publish();
      rank.proxy->wake();  // as a launch does
      moved = true;
    }
    // With a tight buffer rank 1 reads only when it must, so that the proxy's frames back up.
    return ((!tight || starving) && reader.pump(fd.get(), mem, false)) || moved;
  };
  writeStream(fd.get(), stream, kPieces[flags >> 5 & 3], flags & kUngated ? 0 : plan.stop, rank,
              flags & kAbortHalfway, tick,
              [&](size_t) {
                while (ready < plan.need.size() && plan.need[ready] <= reader.frames) ++ready;
                const bool open = (flags & kUngated) || ready == plan.need.size();
                return open ? stream.size() : ready * sizeof(Credit);
              });
  if (!(flags & kDestroyOpen) && !rank.abort) {
    ::shutdown(fd.get(), SHUT_WR);
    require(within(kHang, [&] { return rank.failures.load() > 0 || (plan.bye && loadAcq(&mem.head) == plan.head); }),
            "the proxy takes a bye after the credits before it, or fails a cut or bad stream promptly");
  }
  // Destroyed on another thread while rank 1 keeps reading: an orderly destroy first drains the
  // published steps, which may need rank 1 to make room.
  std::thread destroyer([&] { rank.proxy.reset(); });
  const auto closing = Clock::now() + kHang;
  while (!reader.eof) {  // the proxy drained or gave up, then closed its end
    if (!reader.pump(fd.get(), mem, rank.failures.load() == 0)) nap(fd.get(), false);
    require(Clock::now() < closing, "a destroyed proxy closes its connections");
  }
  destroyer.join();
  rank.requireFailures(loose || plan.bye ? 0 : 1);
  if (plan.bye && !loose) require(rank.failures.load() == 0, "a bye is taken quietly");
  if (!loose) require(mem.head == plan.head, "every accepted credit reaches the GPU");
  if ((flags & kDestroyOpen) && !rank.abort && rank.failures.load() == 0) {
    require(reader.frames == mem.published, "an orderly destroy first sends every published step");
  }
}

// No file descriptor or thread may outlive its input: libFuzzer runs millions in one process.
size_t entries(const char* folder) {
  size_t n = 0;
  if (DIR* d = opendir(folder)) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

}  // namespace net

void netProxyStream(const uint8_t* data, size_t size) {
  static size_t runs = 0, fds = 0, threads = 0;
  Cursor in{data, size};
  const uint8_t flags = in.take<uint8_t>(), sizes = in.take<uint8_t>();
  const uint64_t stepBytes = 64ull << 2 * (sizes & 3);
  if (flags & net::kSendSide) net::sendSide(flags, stepBytes, sizes & net::kTightBuffer, sizes >> 3, in);
  else net::recvSide(flags, stepBytes, (sizes >> 3) % (net::kSteps + 4), in);
  if (++runs == 64) {
    fds = net::entries("/proc/self/fd");
    threads = net::entries("/proc/self/task");
  }
  if (runs > 64 && runs % 256 == 0) {
    require(net::entries("/proc/self/fd") <= fds + 4, "no file descriptor leaks");
    require(net::entries("/proc/self/task") <= threads, "no thread outlives its input");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (getenv("WEFT_FUZZ_LOG") == nullptr) setenv("NCCL_DEBUG", "NONE", 1);  // read once, at the first line
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  WEFT_FUZZ_TARGET(data, size);
  return 0;
}
