#include "core/comm_split.h"
#include "core/peer_info.h"

#include <gtest/gtest.h>

using namespace weft::core;

TEST(CommSplit, MembersOrderedByKeyThenParentRank) {
  std::vector<SplitEntry> all = {{1, 5, 0}, {0, 0, 1}, {1, 2, 2}, {1, 5, 3}, {NCCL_SPLIT_NOCOLOR, 0, 4}, {0, -1, 5}};
  EXPECT_EQ(splitMembers(all, 1), (std::vector<int>{2, 0, 3}));
  EXPECT_EQ(splitMembers(all, 0), (std::vector<int>{5, 1}));
  EXPECT_TRUE(splitMembers(all, 7).empty());
}

TEST(PeerTable, TwoRanksOnOneGpuAreRefusedNamingBoth) {
  std::vector<PeerInfo> peers(3);
  for (int r = 0; r < 3; ++r) {
    peers[r].rank = r;
    peers[r].hostHash = 42;
    snprintf(peers[r].busId, sizeof(peers[r].busId), "0000:%02x:00.0", r);
  }
  EXPECT_EQ(checkPeerTable(peers, false), ncclSuccess);
  snprintf(peers[2].busId, sizeof(peers[2].busId), "0000:00:00.0");
  EXPECT_EQ(checkPeerTable(peers, false), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ranks 0 and 2"), std::string::npos);
  EXPECT_EQ(checkPeerTable(peers, true), ncclSuccess);
  peers[2].hostHash = 43;  // same bus id on another host is fine
  EXPECT_EQ(checkPeerTable(peers, false), ncclSuccess);
  peers[1].rank = 7;  // a corrupt entry
  EXPECT_EQ(checkPeerTable(peers, false), ncclInternalError);
}
