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
    for (int simple : {0, 3}) {
      std::vector<weft::transport::ConnectionPlan> plans;
      for (int r = 0; r < n; ++r) plans.push_back(planConnections(r, rings, 2, {}, simple));
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          if (a == b) continue;
          EXPECT_EQ(plans[a].sendChannels(b), plans[b].recvChannels(a)) << a << "->" << b << " n=" << n;
          for (int c = 0; c < 4; ++c) EXPECT_EQ(plans[a].sendOn[c][b], plans[b].recvOn[c][a]);
        }
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

TEST(ConnectionPlan, P2pOnlyChannelsGiveEveryPeerAsManyChannelsAsARingNeighbour) {
  // Four ranks over a switch: 32 channels of one ring order, mesh on 4, point-to-point-only on the default.
  const int n = 4, channels = 32, simple = weft::transport::p2pOnlyChannelsFor(channels, n, -1);
  EXPECT_EQ(simple, 24);
  std::vector<weft::transport::ConnectionPlan> plans;
  for (int r = 0; r < n; ++r) plans.push_back(planConnections(r, rankOrderRings(n, channels), 4, {}, simple));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      EXPECT_GE(plans[a].sendChannels(b).size(), 24u) << a << "->" << b;
      EXPECT_EQ(plans[a].sendChannels(b), plans[b].recvChannels(a)) << a << "->" << b;
      for (int c = 0; c < channels; ++c) {
        // Ring edges and the mesh keep every protocol; only the added connections are point-to-point-only.
        const bool ringEdge = b == (a + 1) % n;
        EXPECT_EQ(plans[b].recvP2pOnly[c][a], !ringEdge && c >= 4 && c < simple) << a << "->" << b << " c" << c;
        EXPECT_EQ(plans[a].sendOn[c][b], ringEdge || c < simple) << a << "->" << b << " c" << c;
      }
    }
  }
  // Direct runs where every connection has every protocol: the first 4 channels, as without them.
  EXPECT_EQ(plans[2].meshChannels, planConnections(2, rankOrderRings(n, channels), 4).meshChannels);
  EXPECT_EQ(plans[2].meshChannels, (std::vector<int>{0, 1, 2, 3}));
  // Rank 0 receives from 3 on every channel (ring), from 1 and 2 on the first 24. (Windows that
  // start further for each distance, to spread an all-to-all's peers over every channel, measured
  // worse on 4xH200: alltoall at 1 GiB 277 against 317 GB/s.)
  EXPECT_EQ(plans[0].recvConnectionCount(), 32 + 24 + 24);
}

TEST(ConnectionPlan, P2pOnlyChannelCountKeepsTheMemoryBounded) {
  using weft::transport::p2pOnlyChannelsFor;
  EXPECT_EQ(p2pOnlyChannelsFor(32, 1, -1), 0);
  EXPECT_EQ(p2pOnlyChannelsFor(32, 2, -1), 24);
  EXPECT_EQ(p2pOnlyChannelsFor(16, 4, -1), 16);  // never more than the channels
  EXPECT_EQ(p2pOnlyChannelsFor(32, 8, -1), 13);
  EXPECT_EQ(p2pOnlyChannelsFor(32, 16, -1), 6);
  EXPECT_EQ(p2pOnlyChannelsFor(32, 8, 0), 0);     // NCCL_WEFT_P2P_SIMPLE_NCHANNELS=0: none
  EXPECT_EQ(p2pOnlyChannelsFor(32, 8, 40), 32);
  for (int n = 2; n <= 72; ++n) EXPECT_LE(p2pOnlyChannelsFor(32, n, -1) * (n - 1), 96 + 24) << n;
}
