// Where things live inside one rank's connection memory (one allocation per rank, shared with
// its peers): first a counter block per (channel, peer), then a staging buffer per receive
// connection. A peer computes the same offsets from the same plan, so one mapping of the whole
// allocation gives it every remote address it needs.
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
  // Staging buffer of a Simple-only connection (ConnectionPlan::recvSimpleOnly): Simple slots at 0.
  size_t simpleOnlyBytes = 0;

  // The layout for these step sizes: LL, then LL128, then Simple, each kSteps steps.
  static ConnLayout forSteps(int nChannels, int nRanks, const int stepBytes[dev::kNumProtos]);

  size_t countersBytes() const { return (size_t)nChannels * nRanks * kCounterBlockBytes; }
  size_t counterBlock(int channel, int peer) const {
    return ((size_t)channel * nRanks + peer) * kCounterBlockBytes;
  }
  size_t buffersStart() const { return (countersBytes() + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }
  // Size of the staging buffer of the receive connection (channel, from `sender`) in `plan`.
  size_t bufferBytesOf(const ConnectionPlan& plan, int channel, int sender) const {
    return plan.recvSimpleOnly[channel][sender] ? simpleOnlyBytes : bufferBytes;
  }
  // Offset of protocol `proto`'s slots inside that buffer; -1 when it has none.
  size_t protoOffsetOf(const ConnectionPlan& plan, int channel, int sender, int proto) const {
    if (!plan.recvSimpleOnly[channel][sender]) return protoOffset[proto];
    return proto == dev::kProtoSimple ? 0 : (size_t)-1;
  }
  // Offset of the staging buffer for the receive connection (channel, from `sender`) in the memory
  // of the rank whose plan is `receiverPlan`; -1 when that plan has no such connection.
  size_t recvBuffer(const ConnectionPlan& receiverPlan, int channel, int sender) const;
  size_t totalBytes(const ConnectionPlan& plan) const;
};

}  // namespace weft::transport
