#include "transport/p2p/conn_layout.h"

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
