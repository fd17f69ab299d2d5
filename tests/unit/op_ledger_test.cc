// The per-rank shared-memory ledgers that a hang report reads: counts cross processes, a page that
// is not the asked rank's is never believed, and the report sentence names the ranks behind.
#include "core/op_ledger.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include <gtest/gtest.h>

#include "ledger_test_util.h"

using weft::core::OpLedger;
using weft::core::P2pDirection;
using weft::core::P2pSignature;
using weft::core::PeerLedger;
using weft::core::describeLaggards;

namespace {

constexpr auto freshHash = weft::test::freshCommHash;

}  // namespace

TEST(OpLedger, CountsAreReadByAnotherProcessAndVanishWithTheLedger) {
  const uint64_t hash = freshHash();
  auto mine = OpLedger::create(hash, 3);
  if (!mine) GTEST_SKIP() << "no POSIX shared memory on this machine";
  EXPECT_EQ(OpLedger::readPeer(hash, 3), 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(mine->publish({}), (uint64_t)i + 1);
  EXPECT_EQ(mine->collectives(), 5u);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(OpLedger::readPeer(hash, 3) == 5 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "another process read another count";
  EXPECT_EQ(OpLedger::readPeer(hash, 4), -1);      // no such rank
  EXPECT_EQ(OpLedger::readPeer(hash + 1, 3), -1);  // no such communicator
  mine.reset();
  EXPECT_EQ(OpLedger::readPeer(hash, 3), -1);  // removed with its owner
}

TEST(OpLedger, AForeignOrShortPageIsNotBelieved) {
  const uint64_t hash = freshHash();
  // A file under the name of (hash, rank 1) holding garbage, then one too short.
  const std::string name = OpLedger::pageName(hash, 1);
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) GTEST_SKIP() << "no POSIX shared memory on this machine";
  std::vector<char> junk(4096, 7);
  ASSERT_EQ(write(fd, junk.data(), junk.size()), (ssize_t)junk.size());
  EXPECT_EQ(OpLedger::readPeer(hash, 1), -1);
  ASSERT_EQ(ftruncate(fd, 3), 0);
  EXPECT_EQ(OpLedger::readPeer(hash, 1), -1);
  close(fd);
  // The rank's own ledger replaces a stale page left under its name.
  auto fresh = OpLedger::create(hash, 1);
  ASSERT_TRUE(fresh);
  fresh->publish({});
  EXPECT_EQ(OpLedger::readPeer(hash, 1), 1);
}

TEST(OpLedger, APageShorterThanItsSendLanesIsNotBelieved) {
  const uint64_t hash = freshHash();
  auto mine = OpLedger::create(hash, 2, 4);
  if (!mine) GTEST_SKIP() << "no POSIX shared memory on this machine";
  P2pSignature op;
  op.count = 9;
  EXPECT_EQ(mine->publishP2p(3, P2pDirection::kRecv, op), 1u);
  EXPECT_EQ(mine->publishP2p(4, P2pDirection::kRecv, op), 0u) << "no lane for a fifth rank of the host";
  auto whole = PeerLedger::open(hash, 2);
  ASSERT_TRUE(whole);
  P2pSignature got;
  EXPECT_TRUE(whole->recentP2p(3, P2pDirection::kRecv, 1, &got));
  EXPECT_EQ(got.count, 9u);
  EXPECT_FALSE(whole->recentP2p(3, P2pDirection::kSend, 1, &got)) << "the other direction has none";
  EXPECT_FALSE(whole->recentP2p(4, P2pDirection::kRecv, 1, &got));
  // Cut the file short of its last lane: the header's count of lanes no longer fits.
  struct stat st {};
  const int fd = shm_open(OpLedger::pageName(hash, 2).c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fstat(fd, &st), 0);
  ASSERT_EQ(ftruncate(fd, st.st_size - 64), 0);
  close(fd);
  EXPECT_FALSE(PeerLedger::open(hash, 2));
}

// Calls of a group that failed as a whole are taken back: peers no longer see them, and the calls
// made instead get their numbers.
TEST(OpLedger, RetractedCallsVanishAndTheirNumbersAreReused) {
  const uint64_t hash = freshHash();
  auto mine = OpLedger::create(hash, 0, 2);
  if (!mine) GTEST_SKIP() << "no POSIX shared memory on this machine";
  weft::core::CallSignature call;
  call.count = 10;
  mine->publish(call);
  P2pSignature op;
  op.count = 4;
  mine->publishP2p(1, P2pDirection::kSend, op);
  const OpLedger::Mark mark = mine->mark();
  call.count = 20;
  EXPECT_EQ(mine->publish(call), 2u);
  EXPECT_EQ(mine->publish(call), 3u);
  EXPECT_EQ(mine->publishP2p(1, P2pDirection::kSend, op), 2u);
  auto peer = PeerLedger::open(hash, 0);
  ASSERT_TRUE(peer);
  weft::core::CallSignature seen;
  ASSERT_TRUE(peer->recent(2, &seen));
  mine->retract(mark);
  EXPECT_EQ(mine->collectives(), 1u);
  EXPECT_EQ(mine->p2pOps(1, P2pDirection::kSend), 1u);
  EXPECT_FALSE(peer->recent(2, &seen)) << "a retracted call reads as not made";
  EXPECT_FALSE(peer->recent(3, &seen));
  P2pSignature sent;
  EXPECT_FALSE(peer->recentP2p(1, P2pDirection::kSend, 2, &sent));
  ASSERT_TRUE(peer->recent(1, &seen)) << "calls before the mark stay";
  EXPECT_EQ(seen.count, 10u);
  call.count = 30;
  EXPECT_EQ(mine->publish(call), 2u) << "the next call takes the retracted number";
  ASSERT_TRUE(peer->recent(2, &seen));
  EXPECT_EQ(seen.count, 30u);
  // More calls than the ring holds, then taken back: every slot after the mark reads empty.
  const OpLedger::Mark again = mine->mark();
  for (uint64_t i = 0; i < OpLedger::kRecentCalls + 5; ++i) mine->publish(call);
  mine->retract(again);
  EXPECT_EQ(mine->collectives(), 2u);
  for (uint64_t seq = 3; seq < 3 + OpLedger::kRecentCalls + 5; ++seq) EXPECT_FALSE(peer->recent(seq, &seen)) << seq;
}

// The page is shared: its owner (or anyone who can write it) may change the header after a reader
// checked it. The reader keeps the count of lanes it checked against the mapping.
TEST(OpLedger, AHeaderRewrittenAfterOpenCannotMakeTheReaderOverrun) {
  const uint64_t hash = freshHash();
  auto mine = OpLedger::create(hash, 1, 2);
  if (!mine) GTEST_SKIP() << "no POSIX shared memory on this machine";
  P2pSignature op;
  op.count = 3;
  mine->publishP2p(1, P2pDirection::kSend, op);
  auto peer = PeerLedger::open(hash, 1);
  ASSERT_TRUE(peer);
  const int fd = shm_open(OpLedger::pageName(hash, 1).c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  const uint64_t huge = 1u << 19;  // lanes far past the mapping
  ASSERT_EQ(pwrite(fd, &huge, sizeof(huge), 24), (ssize_t)sizeof(huge)) << "hostRanks sits at byte 24";
  close(fd);
  P2pSignature got;
  EXPECT_TRUE(peer->recentP2p(1, P2pDirection::kSend, 1, &got));
  EXPECT_FALSE(peer->recentP2p(400000, P2pDirection::kSend, 1, &got)) << "beyond the lanes checked at open";
  EXPECT_EQ(peer->p2pOps(400000, P2pDirection::kRecv), -1);
}

TEST(OpLedger, TheReportNamesThePeersWhoseSendsOrReceivesFallShort) {
  using weft::core::P2pTally;
  using weft::core::describeP2pLaggards;
  P2pTally even{1, 3, 2, 2, 3};  // rank 1: as many sends and receives as this rank's
  P2pTally unknown{2, 5, 5, -1, -1};
  EXPECT_EQ(describeP2pLaggards({even, unknown}), "");
  P2pTally shortSends{3, 0, 4, 3, 0};  // this rank waits for a 4th send from rank 3
  P2pTally shortRecvs{5, 2, 0, 0, 1};  // rank 5 has posted 1 receive against this rank's 2 sends
  EXPECT_EQ(describeP2pLaggards({even, shortSends, shortRecvs}),
            "rank 3 has posted 3 sends to this rank against this rank's 4 receives from it; rank 5 has posted 1 "
            "receives from this rank against this rank's 2 sends to it (zero-byte ones not counted): a send or "
            "receive this rank waits for is missing");
}

TEST(OpLedger, TheReportNamesOnlyTheRanksBehind) {
  EXPECT_EQ(describeLaggards(0, 7, {7, 7, 7}), "");
  EXPECT_EQ(describeLaggards(0, 7, {-1, 9, -1}), "");  // unknown and ahead are not behind
  const std::string text = describeLaggards(1, 7, {6, 7, 5, -1});
  EXPECT_NE(text.find("rank 0 has issued 6 collectives"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 has issued 5 collectives"), std::string::npos) << text;
  EXPECT_EQ(text.find("rank 1 "), std::string::npos) << text;
  EXPECT_EQ(text.find("rank 3 "), std::string::npos) << text;
  EXPECT_NE(text.find("has not made the call"), std::string::npos) << text;
}

TEST(OpLedger, TheReportNamesThePeersWithoutTheGraphReplay) {
  using weft::core::describeReplayLaggards;
  EXPECT_EQ(describeReplayLaggards({}), "");
  EXPECT_EQ(describeReplayLaggards({2}), "rank 2 runs no kernel of a graph replay on this communicator while this "
                                         "rank's waits: the replay was not launched there (skipped, or stuck before it)");
  const std::string many = describeReplayLaggards({1, 4, 6});
  EXPECT_EQ(many.rfind("ranks 1, 4 and 6 run no kernel", 0), 0u) << many;
}

TEST(OpLedger, ReplaysPublishedAreReadByPeersAndBounded) {
  const uint64_t hash = weft::test::freshCommHash();
  auto mine = OpLedger::create(hash, 0, 1);
  if (!mine) GTEST_SKIP() << "no POSIX shared memory on this machine";
  auto peer = PeerLedger::open(hash, 0);
  ASSERT_NE(peer, nullptr);
  int64_t since = -1;
  EXPECT_EQ(peer->replayChannels(&since), 0) << "a new page runs no replay";
  mine->publishReplays(3, 12345);
  EXPECT_EQ(peer->replayChannels(&since), 3);
  EXPECT_EQ(since, 12345);
  mine->publishReplays(0, 12999);
  EXPECT_EQ(peer->replayChannels(nullptr), 0);
}
