#include "transport/connection_plan.h"

#include <gtest/gtest.h>

using weft::transport::planConnections;

namespace {
std::vector<std::vector<int>> rankOrderRings(int n, int channels) {
  std::vector<int> ring;
  for (int r = 0; r < n; ++r) ring.push_back(r);
  return std::vector<std::vector<int>>(channels, ring);
}
}  // namespace

TEST(ConnectionPlan, SendSideOfOneRankIsReceiveSideOfItsPeer) {
  for (int n : {2, 3, 5, 8}) {
    // Rings in different orders on different channels.
    std::vector<std::vector<int>> rings = rankOrderRings(n, 4);
    std::reverse(rings[1].begin(), rings[1].end());
    std::rotate(rings[2].begin(), rings[2].begin() + 1, rings[2].end());
    std::vector<weft::transport::ConnectionPlan> plans;
    for (int r = 0; r < n; ++r) plans.push_back(planConnections(r, rings, 2));
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        EXPECT_EQ(plans[a].sendChannels(b), plans[b].recvChannels(a)) << a << "->" << b << " n=" << n;
        for (int c = 0; c < 4; ++c) EXPECT_EQ(plans[a].sendOn[c][b], plans[b].recvOn[c][a]);
      }
    }
  }
}

TEST(ConnectionPlan, RingNeighboursOnEveryChannelOthersOnP2pChannelsOnly) {
  auto plan = planConnections(1, rankOrderRings(4, 6), 2);
  EXPECT_EQ(plan.sendChannels(2), (std::vector<int>{0, 1, 2, 3, 4, 5}));  // next in ring
  EXPECT_EQ(plan.recvChannels(0), (std::vector<int>{0, 1, 2, 3, 4, 5}));  // previous in ring
  EXPECT_EQ(plan.sendChannels(3), (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.recvChannels(3), (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.sendChannels(1), (std::vector<int>{0, 1, 2, 3, 4, 5}));  // self: local copies on every channel
  EXPECT_EQ(plan.recvConnectionCount(), 6 + 2 * 2);
}

TEST(ConnectionPlan, SingleRankHasNoConnections) {
  auto plan = planConnections(0, rankOrderRings(1, 3), 2);
  EXPECT_EQ(plan.recvConnectionCount(), 0);
}
