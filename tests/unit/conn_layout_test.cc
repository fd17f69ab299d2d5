#include "transport/p2p/conn_layout.h"

#include "device/work_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace weft::transport;

TEST(ConnLayout, BuffersAndCountersNeverOverlapAndPeersAgree) {
  const int n = 4, channels = 3;
  std::vector<std::vector<int>> rings(channels, {0, 1, 2, 3});
  std::reverse(rings[2].begin(), rings[2].end());
  ConnLayout layout{channels, n, 1 << 20};
  for (int r = 0; r < n; ++r) {
    ConnectionPlan plan = planConnections(r, rings, 1);
    std::set<size_t> starts;
    for (int c = 0; c < channels; ++c) {
      for (int p = 0; p < n; ++p) {
        if (!plan.recvOn[c][p]) {
          EXPECT_EQ(layout.recvBuffer(plan, c, p), (size_t)-1);
          continue;
        }
        size_t off = layout.recvBuffer(plan, c, p);
        EXPECT_GE(off, layout.countersBytes());
        EXPECT_EQ(off % kBufferAlign, 0u);
        EXPECT_LE(off + layout.bufferBytes, layout.totalBytes(plan));
        EXPECT_TRUE(starts.insert(off).second) << "two connections share a buffer";
      }
    }
    EXPECT_EQ(starts.size(), (size_t)plan.recvConnectionCount());
  }
  EXPECT_EQ(layout.counterBlock(2, 3) + kCounterBlockBytes, layout.countersBytes());
}

TEST(ConnLayout, ProtocolsGetDisjointAlignedSlotsInEveryBuffer) {
  int steps[weft::dev::kNumProtos];
  for (int p = 0; p < weft::dev::kNumProtos; ++p) steps[p] = protoStepBytes(p, 0);
  EXPECT_EQ(steps[weft::dev::kProtoSimple], 512 * 1024);
  EXPECT_EQ(steps[weft::dev::kProtoLL], 64 * 1024);       // NCCL_LL_BUFFSIZE 512 KiB
  EXPECT_EQ(steps[weft::dev::kProtoLL128], 614400);      // NCCL_LL128_BUFFSIZE 4,915,200 B
  ConnLayout layout = ConnLayout::forSteps(2, 3, steps);
  size_t total = 0;
  for (int p = 0; p < weft::dev::kNumProtos; ++p) {
    EXPECT_EQ(layout.protoOffset[p] % kBufferAlign, 0u);
    size_t end = layout.protoOffset[p] + (size_t)weft::dev::kSteps * steps[p];
    EXPECT_LE(end, layout.bufferBytes);
    for (int q = 0; q < weft::dev::kNumProtos; ++q) {
      if (q == p) continue;
      size_t qEnd = layout.protoOffset[q] + (size_t)weft::dev::kSteps * steps[q];
      EXPECT_TRUE(end <= layout.protoOffset[q] || qEnd <= layout.protoOffset[p]) << p << " overlaps " << q;
    }
    total += (size_t)weft::dev::kSteps * steps[p];
  }
  EXPECT_LT(layout.bufferBytes, total + 3 * kBufferAlign);
  // Buffers of different connections stay apart with the combined size.
  std::vector<std::vector<int>> rings(2, {0, 1, 2});
  ConnectionPlan plan = planConnections(0, rings, 1);
  size_t a = layout.recvBuffer(plan, 0, 2), b = layout.recvBuffer(plan, 1, 2);
  EXPECT_GE(b > a ? b - a : a - b, layout.bufferBytes);
}

// Where LL128 cannot run (PCIe, host memory) the communicator asks for no LL128 slots: each
// connection's buffer is then LL and Simple only, about half the size, and Simple is unchanged.
TEST(ConnLayout, NoLL128SlotsWhereItsStepIsZero) {
  int steps[weft::dev::kNumProtos];
  for (int p = 0; p < weft::dev::kNumProtos; ++p) steps[p] = protoStepBytes(p, 0);
  const ConnLayout full = ConnLayout::forSteps(4, 2, steps);
  steps[weft::dev::kProtoLL128] = 0;
  const ConnLayout lean = ConnLayout::forSteps(4, 2, steps);
  const size_t simple = (size_t)weft::dev::kSteps * steps[weft::dev::kProtoSimple];
  const size_t ll = (size_t)weft::dev::kSteps * steps[weft::dev::kProtoLL];
  EXPECT_EQ(lean.bufferBytes, ll + simple);
  EXPECT_EQ(full.bufferBytes - lean.bufferBytes, (size_t)weft::dev::kLL128DefaultBuffBytes);
  EXPECT_EQ(lean.protoOffset[weft::dev::kProtoLL], 0u);
  EXPECT_EQ(lean.protoOffset[weft::dev::kProtoSimple], ll);
  EXPECT_EQ(lean.p2pOnlyBytes, full.p2pOnlyBytes);
  std::vector<std::vector<int>> rings(4, {0, 1});
  ConnectionPlan plan = planConnections(0, rings, 1);
  EXPECT_LT(lean.totalBytes(plan), full.totalBytes(plan) * 55 / 100);
}

TEST(ConnLayout, StepSizesFollowTheBufferSettingsWithinTheDeviceBounds) {
  using namespace weft::dev;
  EXPECT_EQ(protoStepBytes(kProtoLL, 1 << 20), 128 * 1024);
  EXPECT_EQ(protoStepBytes(kProtoLL, 1000), (int)kLLMinStepBytes);   // too small: the minimum
  EXPECT_EQ(protoStepBytes(kProtoLL, 8 * 1000 + 8 * 20), 1008);      // rounded down to 16 B lines
  EXPECT_EQ(protoStepBytes(kProtoLL128, 8 * 100000), 99968);         // rounded down to 128 B lines
  EXPECT_EQ(protoStepBytes(kProtoLL128, -2), 614400);
  for (int64_t b : {int64_t(1), int64_t(12345), int64_t(1) << 22, int64_t(1) << 40}) {
    EXPECT_TRUE(llStepBytesValid(protoStepBytes(kProtoLL, b))) << b;
    EXPECT_TRUE(ll128StepBytesValid(protoStepBytes(kProtoLL128, b))) << b;
  }
}

TEST(ConnLayout, P2pOnlyConnectionsLiveInAnAllocationPerSenderOutsideTheMainOne) {
  int steps[weft::dev::kNumProtos];
  for (int p = 0; p < weft::dev::kNumProtos; ++p) steps[p] = protoStepBytes(p, 0);
  const int n = 4, channels = 6;
  std::vector<std::vector<int>> rings(channels, {0, 1, 2, 3});
  std::reverse(rings[5].begin(), rings[5].end());
  ConnLayout layout = ConnLayout::forSteps(channels, n, steps);
  EXPECT_EQ(layout.p2pOnlyBytes, (size_t)weft::dev::kSteps * steps[weft::dev::kProtoSimple]);
  EXPECT_EQ(layout.p2pOnlyBytes % kBufferAlign, 0u);
  for (int r = 0; r < n; ++r) {
    ConnectionPlan plan = planConnections(r, rings, 1, {}, 4);
    // The main allocation: every full connection's buffer, disjoint, nothing of the point-to-point-only ones.
    std::vector<std::pair<size_t, size_t>> ranges;
    // Per sender: the point-to-point-only connections tile its own allocation in channel order.
    std::vector<size_t> p2pOnlyEnd(n, 0);
    int p2pOnly = 0;
    for (int c = 0; c < channels; ++c) {
      for (int p = 0; p < n; ++p) {
        if (!plan.recvOn[c][p]) {
          EXPECT_EQ(layout.recvBuffer(plan, c, p), (size_t)-1);
          EXPECT_EQ(layout.p2pOnlyBuffer(plan, c, p), (size_t)-1);
          continue;
        }
        if (plan.recvP2pOnly[c][p]) {
          ++p2pOnly;
          EXPECT_EQ(layout.recvBuffer(plan, c, p), (size_t)-1) << "a point-to-point-only buffer in the main allocation";
          EXPECT_EQ(layout.p2pOnlyBuffer(plan, c, p), p2pOnlyEnd[p]) << "rank " << r << " channel " << c;
          p2pOnlyEnd[p] += layout.p2pOnlyBytes;
          continue;
        }
        EXPECT_EQ(layout.p2pOnlyBuffer(plan, c, p), (size_t)-1);
        const size_t off = layout.recvBuffer(plan, c, p);
        EXPECT_EQ(off % kBufferAlign, 0u);
        ranges.push_back({off, off + layout.bufferBytes});
      }
    }
    EXPECT_GT(p2pOnly, 0) << "rank " << r;
    for (int p = 0; p < n; ++p) EXPECT_EQ(layout.p2pOnlyTotal(plan, p), p2pOnlyEnd[p]) << "rank " << r;
    std::sort(ranges.begin(), ranges.end());
    EXPECT_GE(ranges.front().first, layout.countersBytes());
    for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "overlap, rank " << r;
    EXPECT_EQ(ranges.back().second, layout.totalBytes(plan));
    EXPECT_EQ(layout.totalBytes(plan), layout.buffersStart() + ranges.size() * layout.bufferBytes);
  }
}

// A communicator with network peers runs point-to-point LL on its point-to-point-only connections
// too: each of their buffers starts with kSteps small LL slots, then the Simple slots as before,
// both 4096-aligned; the main allocation and the full connections do not change.
TEST(ConnLayout, P2pOnlyConnectionsCarryLLSlotsWhenAsked) {
  using weft::dev::kProtoLL;
  using weft::dev::kProtoSimple;
  int steps[weft::dev::kNumProtos];
  for (int p = 0; p < weft::dev::kNumProtos; ++p) steps[p] = protoStepBytes(p, 0);
  const ConnLayout plain = ConnLayout::forSteps(6, 4, steps);
  const ConnLayout withLL = ConnLayout::forSteps(6, 4, steps, 4096);
  const ConnLayout oddLL = ConnLayout::forSteps(6, 4, steps, 272);  // 8 x 272 B: one 4096-byte page
  const size_t simple = (size_t)weft::dev::kSteps * steps[kProtoSimple];
  EXPECT_EQ(plain.p2pLLStepBytes, 0);
  EXPECT_EQ(plain.p2pOnlyOffset[kProtoSimple], 0u);
  EXPECT_EQ(plain.p2pOnlyBytes, simple);
  EXPECT_EQ(withLL.p2pLLStepBytes, 4096);
  EXPECT_EQ(withLL.p2pOnlyOffset[kProtoLL], 0u);
  EXPECT_EQ(withLL.p2pOnlyOffset[kProtoSimple], 8u * 4096);
  EXPECT_EQ(withLL.p2pOnlyBytes, 8u * 4096 + simple);
  EXPECT_EQ(oddLL.p2pOnlyOffset[kProtoSimple], kBufferAlign);
  EXPECT_EQ(oddLL.p2pOnlyBytes, kBufferAlign + simple);
  std::vector<std::vector<int>> rings(6, {0, 1, 2, 3});
  for (int r = 0; r < 4; ++r) {
    ConnectionPlan plan = planConnections(r, rings, 0, {}, 4);
    EXPECT_EQ(withLL.totalBytes(plan), plain.totalBytes(plan));
    EXPECT_EQ(withLL.bufferBytes, plain.bufferBytes);
    for (int p = 0; p < 4; ++p) {
      if (p == r) continue;
      EXPECT_EQ(withLL.p2pOnlyTotal(plan, p) - plain.p2pOnlyTotal(plan, p),
                (plain.p2pOnlyTotal(plan, p) / simple) * 8u * 4096) << r << "<-" << p;
      for (int c = 0; c < 6; ++c) {
        const size_t at = withLL.p2pOnlyBuffer(plan, c, p);
        if (at == (size_t)-1) continue;
        // The connection's LL slots and Simple slots stay inside its own buffer.
        EXPECT_EQ(at % kBufferAlign, 0u);
        EXPECT_LE(at + withLL.p2pOnlyOffset[kProtoSimple] + simple, withLL.p2pOnlyTotal(plan, p));
      }
    }
  }
}
