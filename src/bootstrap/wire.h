// The bootstrap's wire format. Every message travels as frames: a fixed 40-byte header (magic,
// version, type, job key, sender rank, tag, lengths) followed by the payload. A frame is checked
// before any of its payload is read or any memory is sized from it (DESIGN.md §1.5): the magic and
// version, the job key (a stranger or a stale job is refused), the type, and per-type length caps.
//
// Integers travel in the host's byte order; weft supports little-endian hosts only (x86-64,
// aarch64), which the static_assert below makes explicit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/socket.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the bootstrap wire format assumes little-endian hosts");

namespace weft::bootstrap::wire {

constexpr uint32_t kFrameMagic = 0x54464557;  // "WEFT" as bytes on the wire
constexpr uint16_t kVersion = 2;  // 2: Bruck allgathers (rounds, not ring steps)

enum class FrameType : uint16_t {
  kRootHello = 1,  // rank -> root: RootHello
  kRootReply = 2,  // root -> rank: RootReply
  kRootError = 3,  // root -> rank: the rendezvous failed; payload = text, tag = ncclResult_t
  kPeerHello = 4,  // first frame on a rank-to-rank connection: PeerHello
  kData = 5,       // Bootstrap::send/recv payload; tag = the user's tag
  kAllGather = 6,  // one round of an allgather; tag = round (+ 1 << 16: an address sent back)
  kBarrier = 7,    // one round of a barrier; tag = round
  kFailure = 8,    // the sender gave up on the job; payload = text of the first failure
};
const char* frameTypeName(uint16_t type);
// Types that carry user-sized data (may span several frames).
inline bool isDataType(uint16_t t) {
  return t == (uint16_t)FrameType::kData || t == (uint16_t)FrameType::kAllGather || t == (uint16_t)FrameType::kBarrier;
}

struct FrameHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint64_t jobKey;
  int32_t rank;       // sender rank; -1 from a root
  int32_t tag;
  uint64_t total;     // bytes of the whole message (data types); equals length for the others
  uint32_t length;    // payload bytes of this frame
  uint32_t reserved;  // zero
};
static_assert(sizeof(FrameHeader) == 40, "wire header size is part of the protocol");

// Limits. A data message may be large; it is cut into frames of at most kMaxDataFrameBytes, so a
// receiver never sizes a buffer larger than that from one header.
constexpr uint32_t kMaxDataFrameBytes = 16u << 20;
constexpr uint64_t kMaxMessageBytes = 1ull << 32;
constexpr uint32_t kMaxHelloBytes = 256;
constexpr uint32_t kMaxTextBytes = 2048;
constexpr int32_t kMaxRanks = 1 << 22;
constexpr int32_t kMaxRoots = 1 << 16;

FrameHeader makeHeader(FrameType type, uint64_t jobKey, int rank, int tag, uint64_t total, uint32_t length);

// True when the first `n` bytes received so far can still start a valid header (n < 4 is
// always fine). Lets a reader drop an HTTP request or a port scanner after four bytes.
bool magicPrefixOk(const void* bytes, size_t n);

// Checks everything a header can say on its own. On failure *why says what is wrong, in words
// fit for a WARN line ("wrong magic 0x20544547", "job key mismatch (a stale or foreign job)").
bool validateHeader(const FrameHeader& h, uint64_t jobKey, std::string* why);

// An address as it travels: family 4 or 6, port, IPv6 scope id, 16 address bytes.
struct WireAddress {
  uint16_t family;
  uint16_t port;
  uint32_t scopeId;
  uint8_t bytes[16];
};
static_assert(sizeof(WireAddress) == 24, "wire address size is part of the protocol");
WireAddress encodeAddress(const SocketAddress& a);
bool decodeAddress(const WireAddress& w, SocketAddress* out, std::string* why);

// Payloads of the fixed-size frames.
struct RootHello {
  int32_t rank;
  int32_t nRanks;
  int32_t rootIndex;  // which of the nRoots unique ids this root came from
  int32_t nRoots;
  WireAddress listen;  // where the rank accepts connections from its peers
};
// The ring neighbours' listen addresses. The successor is where this rank sends; the predecessor
// is whom it waits for, known so that a predecessor that dies before connecting is noticed (its
// listen socket refuses) instead of waited for until the deadline. -1 = not in this reply.
struct RootReply {
  int32_t successor;
  int32_t predecessor;
  WireAddress successorAddress;
  WireAddress predecessorAddress;
};
struct PeerHello {
  int32_t nRanks;
  int32_t reserved;
  WireAddress listen;  // the sender's own listen address
};
static_assert(sizeof(RootHello) == 40 && sizeof(RootReply) == 56 && sizeof(PeerHello) == 32, "fixed payloads");

// The group of ranks a root serves when nRoots roots share nRanks ranks: [lo, hi). Ranks are split
// evenly in order; root j also learns the address of rank hi % nRanks (the first rank of the next
// group) so that it can give its last rank a ring successor (and that rank its predecessor).
void rootRange(int nRanks, int nRoots, int root, int* lo, int* hi);
int rootOfRank(int nRanks, int nRoots, int rank);

}  // namespace weft::bootstrap::wire
