#include "transport/p2p/conn_layout.h"

#include <algorithm>

#include "device/work_math.h"

namespace weft::transport {

int protoStepBytes(int proto, int64_t buffBytes) {
  int64_t unit, lo, hi, def;
  switch (proto) {
    case dev::kProtoLL:
      unit = dev::kLLLineBytes, lo = dev::kLLMinStepBytes, hi = dev::kLLMaxStepBytes;
      def = (int64_t)dev::kLLDefaultBuffBytes;
      break;
    case dev::kProtoLL128:
      unit = dev::kLL128LineBytes, lo = dev::kLL128MinStepBytes, hi = dev::kLL128MaxStepBytes;
      def = (int64_t)dev::kLL128DefaultBuffBytes;
      break;
    default:
      unit = 4096, lo = dev::kSimpleMinStepBytes, hi = dev::kSimpleMaxStepBytes / 2;
      def = 4 << 20;
      break;
  }
  if (buffBytes <= 0) buffBytes = def;
  int64_t step = buffBytes / dev::kSteps / unit * unit;
  return (int)std::clamp<int64_t>(step, lo, hi);
}

ConnLayout ConnLayout::forSteps(int nChannels, int nRanks, const int stepBytes[dev::kNumProtos], int p2pLLStepBytes) {
  ConnLayout l;
  l.nChannels = nChannels;
  l.nRanks = nRanks;
  size_t off = 0;
  for (int p : {dev::kProtoLL, dev::kProtoLL128, dev::kProtoSimple}) {
    l.protoOffset[p] = off;
    off += ((size_t)dev::kSteps * (size_t)stepBytes[p] + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  }
  l.bufferBytes = off;
  const size_t simpleBytes = off - l.protoOffset[dev::kProtoSimple];  // Simple comes last
  l.p2pLLStepBytes = p2pLLStepBytes;
  const size_t llSlotBytes = (size_t)dev::kSteps * (size_t)p2pLLStepBytes;
  const size_t llBytes = (llSlotBytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  l.p2pOnlyOffset[dev::kProtoLL] = 0;
  l.p2pOnlyOffset[dev::kProtoLL128] = llBytes;  // empty
  l.p2pOnlyOffset[dev::kProtoSimple] = llBytes;
  l.p2pOnlyBytes = llBytes + simpleBytes;
  return l;
}

namespace {

bool inMainAllocation(const ConnectionPlan& plan, int channel, int sender) {
  return plan.recvOn[channel][sender] && !plan.recvP2pOnly[channel][sender];
}

}  // namespace

size_t ConnLayout::recvBuffer(const ConnectionPlan& receiverPlan, int channel, int sender) const {
  if (!inMainAllocation(receiverPlan, channel, sender)) return (size_t)-1;
  size_t off = buffersStart();
  for (int c = 0; c < receiverPlan.nChannels; ++c) {
    for (int p = 0; p < receiverPlan.nRanks; ++p) {
      if (c == channel && p == sender) return off;
      if (inMainAllocation(receiverPlan, c, p)) off += bufferBytes;
    }
  }
  return (size_t)-1;
}

size_t ConnLayout::totalBytes(const ConnectionPlan& plan) const {
  size_t off = buffersStart();
  for (int c = 0; c < plan.nChannels; ++c)
    for (int p = 0; p < plan.nRanks; ++p)
      if (inMainAllocation(plan, c, p)) off += bufferBytes;
  return off;
}

size_t ConnLayout::p2pOnlyBuffer(const ConnectionPlan& receiverPlan, int channel, int sender) const {
  if (!receiverPlan.recvOn[channel][sender] || !receiverPlan.recvP2pOnly[channel][sender]) return (size_t)-1;
  size_t off = 0;
  for (int c = 0; c < channel; ++c)
    if (receiverPlan.recvP2pOnly[c][sender]) off += p2pOnlyBytes;
  return off;
}

size_t ConnLayout::p2pOnlyTotal(const ConnectionPlan& receiverPlan, int sender) const {
  size_t bytes = 0;
  for (int c = 0; c < receiverPlan.nChannels; ++c)
    if (receiverPlan.recvOn[c][sender] && receiverPlan.recvP2pOnly[c][sender]) bytes += p2pOnlyBytes;
  return bytes;
}

}  // namespace weft::transport
