#include "core/comm_split.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "bootstrap_fork_harness.h"
#include "core/peer_info.h"
#include "test_env.h"

#include <cstring>

#include <gtest/gtest.h>

using namespace weft::core;

TEST(CommSplit, MembersOrderedByKeyThenParentRank) {
  std::vector<SplitEntry> all = {{1, 5, 0}, {0, 0, 1}, {1, 2, 2}, {1, 5, 3}, {NCCL_SPLIT_NOCOLOR, 0, 4}, {0, -1, 5}};
  EXPECT_EQ(splitMembers(all, 1), (std::vector<int>{2, 0, 3}));
  EXPECT_EQ(splitMembers(all, 0), (std::vector<int>{5, 1}));
  EXPECT_TRUE(splitMembers(all, 7).empty());
}

// n ranks on one host, each on a GPU of its own.
static std::vector<PeerInfo> peersOnOneHost(int n) {
  std::vector<PeerInfo> peers(n);
  for (int r = 0; r < n; ++r) {
    peers[r].rank = r;
    peers[r].hostHash = 42;
    snprintf(peers[r].busId, sizeof(peers[r].busId), "0000:%02x:00.0", r);
  }
  return peers;
}

TEST(PeerTable, TwoRanksOnOneGpuAreRefusedNamingBoth) {
  std::vector<PeerInfo> peers = peersOnOneHost(3);
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

// Ranks that share a GPU (tests only) launch without programmatic dependent launch: each sees it.
TEST(PeerTable, SharingAGpuIsSeenByTheRanksThatShareIt) {
  std::vector<PeerInfo> peers = peersOnOneHost(3);
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(sharesGpu(peers, r)) << r;
  snprintf(peers[2].busId, sizeof(peers[2].busId), "%s", peers[0].busId);
  EXPECT_TRUE(sharesGpu(peers, 0));
  EXPECT_FALSE(sharesGpu(peers, 1));
  EXPECT_TRUE(sharesGpu(peers, 2));
  EXPECT_TRUE(anyGpuShared(peers));
  peers[2].hostHash = 43;  // the same bus id on another host is another GPU
  EXPECT_FALSE(sharesGpu(peers, 0));
  EXPECT_FALSE(sharesGpu(peers, 2));
  EXPECT_FALSE(anyGpuShared(peers));
}

// Ranks on one GPU in one process (threads) are named: CUDA queues their kernels together.
TEST(PeerTable, SharingAGpuInOneProcessNamesTheOtherRank) {
  std::vector<PeerInfo> peers = peersOnOneHost(3);
  for (PeerInfo& p : peers) p.processHash = 7;
  EXPECT_EQ(rankSharingGpuInProcess(peers, 0), -1);
  snprintf(peers[2].busId, sizeof(peers[2].busId), "%s", peers[0].busId);
  EXPECT_EQ(rankSharingGpuInProcess(peers, 0), 2);
  EXPECT_EQ(rankSharingGpuInProcess(peers, 2), 0);
  EXPECT_EQ(rankSharingGpuInProcess(peers, 1), -1);
  peers[2].processHash = 8;  // another process on that GPU: its own queues
  EXPECT_EQ(rankSharingGpuInProcess(peers, 0), -1);
  EXPECT_TRUE(sharesGpu(peers, 0));
}

// Names from the network that do not end inside their fields are refused before anything prints them.
TEST(PeerTable, NamesWithoutTheirEndAreCorrupt) {
  std::vector<PeerInfo> peers = peersOnOneHost(2);
  ASSERT_EQ(checkPeerTable(peers, false), ncclSuccess);
  memset(peers[1].hostName, 'h', sizeof(peers[1].hostName));
  EXPECT_EQ(checkPeerTable(peers, false), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("rank 1 is corrupt"), std::string::npos)
      << ncclGetLastError(nullptr);
  peers[1].hostName[0] = '\0';
  memset(peers[0].busId, '1', sizeof(peers[0].busId));
  EXPECT_EQ(checkPeerTable(peers, true), ncclInternalError);
}

// ---------------------------------------------------------------------------------------------
// agreeOnSplit with ranks as processes over a real bootstrap.

namespace {

using weft::test::ChildResult;
using weft::test::ForkedRanks;
using weft::test::ParentRoot;
using weft::test::RankOutcome;

std::vector<ChildResult> runRanks(int n, const ForkedRanks::Body& body) {
  ForkedRanks ranks;
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  ranks.start(all, body);
  ParentRoot root(30);
  ranks.sendId(root.id);
  return ranks.wait(40000);
}

std::string idText(const ncclUniqueId& id) {
  return std::string(id.internal, id.internal + 24);  // the encoded root address and job key
}

// Ranks 0 and 2 pass color 1, ranks 1 and 3 color 0, keys in reverse: each child's ranks are
// ordered by key, and the members of one child hold one id (made by its rank 0).
RankOutcome fourWaySplit(int rank, const ncclUniqueId& id) {
  weft::test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::unique_ptr<weft::bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(weft::bootstrap::Bootstrap::init(id, rank, 4, nullptr, &b));
  int childRank = -1, childRanks = -1;
  ncclUniqueId child;
  auto makeId = [](ncclUniqueId* out) { return weft::bootstrap::createRootId(out); };
  WEFT_CHILD_TRY(agreeOnSplit(*b, rank % 2 == 0 ? 1 : 0, 10 - rank, 0x53000000, makeId, &childRank, &childRanks,
                              &child));
  return weft::test::outcome(ncclSuccess, std::to_string(childRank) + "/" + std::to_string(childRanks) + " " +
                                              idText(child));
}

TEST(SplitAgreement, MembersOrderedByKeyShareTheirRankZerosId) {
  auto rs = runRanks(4, fourWaySplit);
  ASSERT_EQ(rs.size(), 4u);
  std::string text[4];
  for (const ChildResult& r : rs) {
    ASSERT_EQ(r.outcome.status, ncclSuccess) << weft::test::describe(rs);
    text[r.rank] = r.outcome.text;
  }
  EXPECT_EQ(text[2].substr(0, 4), "0/2 ") << "key 8 before key 10";
  EXPECT_EQ(text[0].substr(0, 4), "1/2 ");
  EXPECT_EQ(text[3].substr(0, 4), "0/2 ");
  EXPECT_EQ(text[1].substr(0, 4), "1/2 ");
  EXPECT_EQ(text[0].substr(4), text[2].substr(4));
  EXPECT_EQ(text[1].substr(4), text[3].substr(4));
  EXPECT_NE(text[0].substr(4), text[1].substr(4)) << "two children, two ids";
}

// Rank 2 (a member of rank 0's child) takes part in the exchange of colors, then dies before
// rank 0 hands it the id: rank 0 fails naming it, and the child's root (a thread of rank 0's
// process that no rank will ever join) ends rather than waiting for ever.
RankOutcome memberDiesBeforeTheId(int rank, const ncclUniqueId& id) {
  weft::test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  // Roots of the parent process's earlier tests count here too, but their threads did not come along.
  const int rootsBefore = weft::bootstrap::Root::detachedRunning();
  std::unique_ptr<weft::bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(weft::bootstrap::Bootstrap::init(id, rank, 3, nullptr, &b));
  if (rank == 2) {
    std::vector<SplitEntry> all(3);
    all[2] = {0, 0, 2};
    WEFT_CHILD_TRY(b->allGather(all.data(), sizeof(SplitEntry)));
    _exit(0);
  }
  auto slowMakeId = [](ncclUniqueId* out) {  // rank 2 is gone by the time rank 0 sends
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return weft::bootstrap::createRootId(out);
  };
  int childRank = -1, childRanks = -1;
  ncclUniqueId child;
  weft::log::clearLastError();
  const weft::Status s = agreeOnSplit(*b, rank == 0 ? 0 : NCCL_SPLIT_NOCOLOR, 0, 0x53000000, slowMakeId, &childRank,
                                &childRanks, &child);
  const std::string text = weft::log::lastErrorOfThread();
  if (rank == 0) {
    for (int i = 0; i < 150 && weft::bootstrap::Root::detachedRunning() > rootsBefore; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    WEFT_CHILD_CHECK(weft::bootstrap::Root::detachedRunning() == rootsBefore,
                     "the child's root still runs 15 s later (split: " + std::to_string(s) + " " + text + ")");
  }
  return weft::test::outcome(s, text);
}

TEST(SplitAgreement, AMemberLostBeforeItsIdEndsTheChildsRoot) {
  auto rs = runRanks(3, memberDiesBeforeTheId);
  for (const ChildResult& r : rs) {
    if (r.rank == 2) continue;
    if (r.rank == 1) {
      EXPECT_EQ(r.outcome.status, ncclSuccess) << weft::test::describe(rs);
      continue;
    }
    EXPECT_NE(r.outcome.status, ncclSuccess) << weft::test::describe(rs);
    EXPECT_TRUE(weft::test::contains(r.outcome.text, "rank 2")) << weft::test::describe(rs);
  }
}

}  // namespace
