// Tree edges in the connection plan: both directions between every rank and its tree parent and
// children, the same connections seen from both ends, nothing when no trees are given.
#include <gtest/gtest.h>

#include <vector>

#include "transport/connection_plan.h"

using weft::transport::ConnectionPlan;
using weft::transport::planConnections;
using weft::transport::TreePeers;

TEST(TreeConnections, BothDirectionsOnEveryTreeEdgeAgreedByBothEnds) {
  const int n = 5;
  std::vector<std::vector<int>> rings(2, {0, 1, 2, 3, 4});
  // Channel 0: chain 0-1-2-3-4; channel 1: 2 -> {0, 4, 1}, 0 -> {3}.
  std::vector<std::vector<TreePeers>> trees(2, std::vector<TreePeers>(n));
  for (int r = 0; r < n; ++r) {
    trees[0][r].up = r - 1;
    trees[0][r].down[0] = r + 1 < n ? r + 1 : -1;
  }
  trees[1][2] = TreePeers{-1, {0, 4, 1}};
  trees[1][0] = TreePeers{2, {3, -1, -1}};
  trees[1][4] = TreePeers{2, {-1, -1, -1}};
  trees[1][1] = TreePeers{2, {-1, -1, -1}};
  trees[1][3] = TreePeers{0, {-1, -1, -1}};
  std::vector<ConnectionPlan> plans, ringOnly;
  for (int r = 0; r < n; ++r) {
    plans.push_back(planConnections(r, rings, 0, trees));
    ringOnly.push_back(planConnections(r, rings, 0));
  }
  for (int c = 0; c < 2; ++c) {
    for (int r = 0; r < n; ++r) {
      const TreePeers& t = trees[c][r];
      for (int peer : {t.up, t.down[0], t.down[1], t.down[2]}) {
        if (peer < 0) continue;
        EXPECT_TRUE(plans[r].sendOn[c][peer] && plans[r].recvOn[c][peer]) << "channel " << c << " " << r << "<->" << peer;
      }
      for (int p = 0; p < n; ++p) {
        EXPECT_EQ(plans[r].sendOn[c][p], plans[p].recvOn[c][r]) << "channel " << c << " " << r << "->" << p;
        if (ringOnly[r].sendOn[c][p]) EXPECT_TRUE(plans[r].sendOn[c][p]) << "ring connections stay";
      }
    }
  }
  // Ring-only plans have just next/prev; chain trees add the reverse direction.
  EXPECT_FALSE(ringOnly[1].sendOn[0][0]);
  EXPECT_TRUE(plans[1].sendOn[0][0]);
  EXPECT_EQ(plans[3].recvConnectionCount(), 2 /* channel 0: 2, 4 */ + 1 /* channel 1: 0 */ + 1 /* ring prev on ch 1 */);
}
