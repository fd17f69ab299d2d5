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
  EXPECT_EQ(lean.simpleOnlyBytes, full.simpleOnlyBytes);
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

TEST(ConnLayout, SimpleOnlyConnectionsLiveInAnAllocationPerSenderOutsideTheMainOne) {
  int steps[weft::dev::kNumProtos];
  for (int p = 0; p < weft::dev::kNumProtos; ++p) steps[p] = protoStepBytes(p, 0);
  const int n = 4, channels = 6;
  std::vector<std::vector<int>> rings(channels, {0, 1, 2, 3});
  std::reverse(rings[5].begin(), rings[5].end());
  ConnLayout layout = ConnLayout::forSteps(channels, n, steps);
  EXPECT_EQ(layout.simpleOnlyBytes, (size_t)weft::dev::kSteps * steps[weft::dev::kProtoSimple]);
  EXPECT_EQ(layout.simpleOnlyBytes % kBufferAlign, 0u);
  for (int r = 0; r < n; ++r) {
    ConnectionPlan plan = planConnections(r, rings, 1, {}, 4);
    // The main allocation: every full connection's buffer, disjoint, nothing of the Simple-only ones.
    std::vector<std::pair<size_t, size_t>> ranges;
    // Per sender: the Simple-only connections tile its own allocation in channel order.
    std::vector<size_t> simpleOnlyEnd(n, 0);
    int simpleOnly = 0;
    for (int c = 0; c < channels; ++c) {
      for (int p = 0; p < n; ++p) {
        if (!plan.recvOn[c][p]) {
          EXPECT_EQ(layout.recvBuffer(plan, c, p), (size_t)-1);
          EXPECT_EQ(layout.simpleOnlyBuffer(plan, c, p), (size_t)-1);
          continue;
        }
        if (plan.recvSimpleOnly[c][p]) {
          ++simpleOnly;
          EXPECT_EQ(layout.recvBuffer(plan, c, p), (size_t)-1) << "a Simple-only buffer in the main allocation";
          EXPECT_EQ(layout.simpleOnlyBuffer(plan, c, p), simpleOnlyEnd[p]) << "rank " << r << " channel " << c;
          simpleOnlyEnd[p] += layout.simpleOnlyBytes;
          continue;
        }
        EXPECT_EQ(layout.simpleOnlyBuffer(plan, c, p), (size_t)-1);
        const size_t off = layout.recvBuffer(plan, c, p);
        EXPECT_EQ(off % kBufferAlign, 0u);
        ranges.push_back({off, off + layout.bufferBytes});
      }
    }
    EXPECT_GT(simpleOnly, 0) << "rank " << r;
    for (int p = 0; p < n; ++p) EXPECT_EQ(layout.simpleOnlyTotal(plan, p), simpleOnlyEnd[p]) << "rank " << r;
    std::sort(ranges.begin(), ranges.end());
    EXPECT_GE(ranges.front().first, layout.countersBytes());
    for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "overlap, rank " << r;
    EXPECT_EQ(ranges.back().second, layout.totalBytes(plan));
    EXPECT_EQ(layout.totalBytes(plan), layout.buffersStart() + ranges.size() * layout.bufferBytes);
  }
}
