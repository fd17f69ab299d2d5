// What net_proxy.cc (the progress thread) and net_proxy_setup.cc (making connections) share: the
// per-connection state and a few helpers. Not for use outside src/proxy.
#pragma once

#include <cstdarg>
#include <string>
#include <vector>

#include "device/work_math.h"
#include "proxy/net_proxy.h"

namespace weft::proxy::detail {

using ull = unsigned long long;
constexpr uint64_t kSteps = dev::kSteps;

// The GPU's counters live in host memory shared with a kernel: plain loads and stores with the
// ordering the protocol needs (data before the counter on the writer's side, and after on the reader's).
inline uint64_t loadAcquire(const volatile uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeRelease(volatile uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// A (channel, peer) pair as one number, for lookups.
inline int64_t key(int channel, int peer) { return (int64_t)channel << 32 | (uint32_t)peer; }

// An LL line is {data, flag, data, flag} in 32-bit words, stored by the GPU in one 16-byte store.
// What another agent sees of it is only promised in aligned 8-byte parts, each a {data, flag} pair:
// the line is here once both parts carry the flag.
constexpr uint64_t kLine = dev::kLLLineBytes;
inline bool lineCarries(const char* line, uint32_t flag) {
  const uint64_t lo = __atomic_load_n(reinterpret_cast<const uint64_t*>(line), __ATOMIC_ACQUIRE);
  const uint64_t hi = __atomic_load_n(reinterpret_cast<const uint64_t*>(line + 8), __ATOMIC_ACQUIRE);
  return (uint32_t)(lo >> 32) == flag && (uint32_t)(hi >> 32) == flag;
}
// Lines of `slot` from `from` on that carry `flag`, up to the first that does not (or `lines`).
inline uint64_t flaggedRunEnd(const char* slot, uint64_t from, uint64_t lines, uint32_t flag) {
  uint64_t end = from;
  while (end < lines && lineCarries(slot + end * kLine, flag)) ++end;
  return end;
}
// Checked lines into a receiving GPU's slot: each {data, flag} pair in one 8-byte store, so that the
// GPU never sees a flag with the data of an earlier step.
void storeLines(char* dst, const char* lines, uint64_t bytes);
// The receiving GPU rewrites its slot's flags after step s where llWipeAfter(s), so that no line
// keeps a flag long enough (2^32 steps) to pass for a later step's; the sender's slot, which a proxy
// reads, gets the same from that proxy, before the credit that lets the GPU write it again.
void wipeLLSlot(char* slot, uint64_t bytes, uint64_t step);

// The proxies' failure WARN: the text, then "; this rank's network transfers stop".
void warnStop(const char* fmt, va_list args);

std::string ioWhy(bootstrap::Io io, int err);
Status codeOf(bootstrap::Io io);

}  // namespace weft::proxy::detail

namespace weft::proxy {

// A frame queued for the socket: its header, then hdr.bytes of payload straight from the slot.
struct OutFrame {
  DataHeader hdr;
  const char* payload;
};

// One connection this rank sends on. The GPU's steps up to `prepared` are sorted: a Simple step
// (its size word tagged with the step) is queued as one frame; the others are LL steps, whose
// lines the proxy finds by their flags (scanLines) and queues as they appear, a run of lines per
// frame. At most kSteps Simple frames wait (the GPU stays within the credit window, and credits
// never pass what was sent), and lines are looked for only when no lines wait: the queue holds 2 x kSteps.
struct NetProxy::SendConn {
  NetSendSide side;
  std::string what;  // "net proxy (rank 0), channel 3, sending to rank 1 (...)"
  bootstrap::Fd fd;
  Hello hello{};  // as sent: the echo must match it
  Hello echo{};
  size_t echoGot = 0;
  bool confirmed = false;

  OutFrame out[2 * dev::kSteps] = {};  // a ring: out[(outFirst + i) % size] for i < outCount
  size_t outFirst = 0, outCount = 0;
  uint64_t offset = 0;    // bytes of the first queued frame already written
  uint64_t prepared = 0;  // the GPU's tail as last read
  uint64_t sentEnd = 0;   // 1 + the last step whose frame (or one of whose LL runs) was wholly written
  int linesQueued = 0;    // LL frames in the queue
  // LL, per slot: the step whose lines were looked for last, and how many of its lines are queued.
  uint64_t lineStep[dev::kSteps] = {};
  uint64_t linesTaken[dev::kSteps] = {};
  uint64_t head = 0;      // the last credit, as stored into side.head
  Credit in{};
  size_t inGot = 0;
  bool peerGone = false;  // the receiver closed in order (bye)
};

// One connection this rank receives on. One made on first use waits, unconnected, for its hello.
struct NetProxy::RecvConn {
  NetRecvSide side;
  std::string what;
  bootstrap::Fd fd;
  bool connected = false;

  uint64_t received = 0;  // 1 + the last Simple step whose bytes are in: the tail published
  uint64_t arrivedEnd = 0;  // 1 + the last step any of whose bytes are in (Simple or LL)
  std::vector<char> lines;  // LL payload, checked here before it lands in the slot
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
  bootstrap::Fd fd;
  bootstrap::SocketAddress from;
  Hello hello{};
  size_t got = 0;
  bool done = false;  // refused, closed, or handed to its RecvConn
};

}  // namespace weft::proxy
