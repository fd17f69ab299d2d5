// Where things live in one rank's connection memory. The main allocation (made at creation,
// shared with every peer) holds a counter block per (channel, peer), then a staging buffer per
// receive connection that carries every protocol. The buffers of point-to-point-only receive
// connections (ConnectionPlan::recvP2pOnly) live apart, in one allocation per sender that is made
// when the pair first exchanges point-to-point data (p2p_connections.h): Simple slots, preceded by
// small LL slots where the communicator runs point-to-point LL on them (p2pLLStepBytes); their
// counters stay in the main block. A peer computes the same offsets from the same plan, so one
// mapping of each allocation gives it every remote address it needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/abi.h"
#include "transport/connection_plan.h"

namespace weft::transport {

// Counter block of (channel, peer): the tail of the connection from the peer (written by the
// peer as sender) and, one cache line further, the head of the connection to the peer (written
// by the peer as receiver). Separate 128-byte lines keep a poller from sharing a line with a writer.
constexpr size_t kCounterBlockBytes = 256;
constexpr size_t kTailOffset = 0;
constexpr size_t kHeadOffset = 128;
static_assert(kHeadOffset - kTailOffset >= dev::kCounterLineWords * 8 &&
                  kCounterBlockBytes - kHeadOffset >= dev::kCounterLineWords * 8,
              "each counter starts a line of kCounterLineWords words");
constexpr size_t kBufferAlign = 4096;

// Connection step size of protocol `proto` for a per-connection buffer of buffBytes bytes (the
// value of NCCL_BUFFSIZE / NCCL_LL_BUFFSIZE / NCCL_LL128_BUFFSIZE; <= 0 means the default: 4 MiB,
// 512 KiB, 4,915,200 B). A buffer holds kSteps steps; the step is rounded down to the protocol's
// unit (4096 B Simple, 16 B LL, 128 B LL128) and kept within the device code's bounds
// (device/work_math.h), so that any setting yields a valid layout.
int protoStepBytes(int proto, int64_t buffBytes);

struct ConnLayout {
  int nChannels = 0;
  int nRanks = 0;
  size_t bufferBytes = 0;  // staging buffer per receive connection (all protocols together)
  // Where each protocol's kSteps slots start inside a connection's buffer (4096-aligned).
  size_t protoOffset[dev::kNumProtos] = {};
  // Staging buffer of a point-to-point-only connection (ConnectionPlan::recvP2pOnly): its LL
  // slots (kSteps of p2pLLStepBytes; none when that is 0) at p2pOnlyOffset[kProtoLL], then its
  // Simple slots (as a full connection's) at p2pOnlyOffset[kProtoSimple]. No LL128.
  int p2pLLStepBytes = 0;
  size_t p2pOnlyOffset[dev::kNumProtos] = {};
  size_t p2pOnlyBytes = 0;

  // The layout for these step sizes: LL, then LL128, then Simple, each kSteps steps, in a full
  // connection's buffer; p2pLLStepBytes (0, or a valid LL step) as above.
  static ConnLayout forSteps(int nChannels, int nRanks, const int stepBytes[dev::kNumProtos], int p2pLLStepBytes = 0);

  size_t countersBytes() const { return (size_t)nChannels * nRanks * kCounterBlockBytes; }
  size_t counterBlock(int channel, int peer) const {
    return ((size_t)channel * nRanks + peer) * kCounterBlockBytes;
  }
  size_t buffersStart() const { return (countersBytes() + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }
  // Offset of the staging buffer of the receive connection (channel, from `sender`) in the main
  // allocation of the rank whose plan is `receiverPlan`; -1 when that plan has no such connection
  // or it is point-to-point-only.
  size_t recvBuffer(const ConnectionPlan& receiverPlan, int channel, int sender) const;
  // Size of the main allocation.
  size_t totalBytes(const ConnectionPlan& plan) const;

  // Offset of the point-to-point-only receive connection (channel, from `sender`) in the
  // receiver's allocation for that sender (add p2pOnlyOffset[proto] for a protocol's slots); -1
  // when it is not point-to-point-only.
  size_t p2pOnlyBuffer(const ConnectionPlan& receiverPlan, int channel, int sender) const;
  // Size of the receiver's allocation for `sender`'s point-to-point-only connections (0: none).
  size_t p2pOnlyTotal(const ConnectionPlan& receiverPlan, int sender) const;
};

}  // namespace weft::transport
