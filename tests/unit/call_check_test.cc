// Collective calls compared between ranks (core/call_check.h): the sentences, the choice of
// neighbors, the ledger's call records read by another process, the race of two neighbors calling
// at once (at least one of them must see the other's call), and the API refusing a call that
// differs from a neighbor's, failing the communicator and telling the other rank's watchdog.
#include "core/call_check.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "core/communicator.h"
#include "core/peer_info.h"
#include "ledger_test_util.h"
#include "test_env.h"

namespace weft::core {
namespace {

using test::contains;
constexpr auto freshHash = test::freshCommHash;
template <typename... Args>
CallSignature allReduce(Args... args) { return test::allReduceCall(args...); }

CallSignature broadcast(uint64_t count, int root) {
  CallSignature c;
  c.call = kCallBroadcast;
  c.dataType = ncclFloat32;
  c.redOp = kNoRedOp;
  c.root = root;
  c.count = count;
  return c;
}

TEST(CallCheck, SentencesNameTheCallsAndWhatDiffers) {
  EXPECT_EQ(describeCall(allReduce(1024)), "ncclAllReduce(count 1024, ncclFloat32, ncclSum)");
  EXPECT_EQ(describeCall(broadcast(8, 3)), "ncclBroadcast(count 8, ncclFloat32, root 3)");
  EXPECT_EQ(describeCall(allReduce(4, ncclBfloat16, kUserRedOp)),
            "ncclAllReduce(count 4, ncclBfloat16, an op of ncclRedOpCreatePreMulSum)");
  EXPECT_EQ(callDifference(allReduce(4), allReduce(4)), "");
  EXPECT_EQ(callDifference(allReduce(4), allReduce(5)), "the count");
  EXPECT_EQ(callDifference(allReduce(4), allReduce(5, ncclInt32)), "the count and the datatype");
  EXPECT_EQ(callDifference(allReduce(4, ncclInt8, ncclMax), allReduce(5, ncclInt32, ncclMin)),
            "the count, the datatype and the reduction");
  EXPECT_EQ(callDifference(broadcast(4, 0), broadcast(4, 1)), "the root");
  EXPECT_EQ(callDifference(broadcast(4, 0), allReduce(4)), "the collective");
  // A call that only moves data may name other types on other ranks when the bytes agree (NCCL
  // gets it right); a reduction may not.
  CallSignature bytes16 = broadcast(16, 0);
  bytes16.dataType = ncclInt8;
  EXPECT_EQ(callDifference(broadcast(4, 0), bytes16), "");
  bytes16.count = 8;
  EXPECT_EQ(callDifference(broadcast(4, 0), bytes16), "the count and the datatype");
  EXPECT_EQ(callDifference(broadcast(4, 0), broadcast(2, 0)), "the count");
  EXPECT_EQ(callDifference(allReduce(4), allReduce(16, ncclInt8)), "the count and the datatype");
  const std::string f = describeFinding(57, 1, allReduce(2048), 0, allReduce(1024));
  EXPECT_EQ(f, "collective #57 on this communicator differs between ranks: rank 1 called ncclAllReduce(count 2048, "
               "ncclFloat32, ncclSum), rank 0 called ncclAllReduce(count 1024, ncclFloat32, ncclSum) (the count differs)");
  EXPECT_TRUE(contains(describeFinding(2, 0, allReduce(1, ncclInt8), 1, allReduce(2)), "(the count and the datatype differ)"));
}

TEST(CallCheck, NeighborsAreTheRanksOfTheHostBeforeAndAfter) {
  EXPECT_EQ(callCheckNeighbors({7}, 0), std::vector<int>{});
  EXPECT_EQ(callCheckNeighbors({7, 7}, 0), std::vector<int>({1}));
  EXPECT_EQ(callCheckNeighbors({7, 7}, 1), std::vector<int>({0}));
  EXPECT_EQ(callCheckNeighbors({7, 7, 7, 7}, 2), std::vector<int>({1, 3}));
  // Two hosts, interleaved: only ranks of the same host, in rank order.
  const std::vector<uint64_t> hosts = {1, 2, 1, 2, 1, 2};
  EXPECT_EQ(callCheckNeighbors(hosts, 0), std::vector<int>({2}));
  EXPECT_EQ(callCheckNeighbors(hosts, 2), std::vector<int>({0, 4}));
  EXPECT_EQ(callCheckNeighbors(hosts, 5), std::vector<int>({3}));
  EXPECT_EQ(callCheckNeighbors({1, 2, 3}, 1), std::vector<int>{});
}

TEST(CallCheck, AnotherProcessReadsTheCallsAndTheFinding) {
  const uint64_t hash = freshHash();
  auto mine = OpLedger::create(hash, 0);
  if (!mine) GTEST_SKIP() << "no POSIX shared memory on this machine";
  for (uint64_t i = 1; i <= 3; ++i) EXPECT_EQ(mine->publish(allReduce(100 * i)), i);
  mine->postFinding(3, "the first finding");
  mine->postFinding(4, "a later one, dropped");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto peer = PeerLedger::open(hash, 0);
    CallSignature c;
    uint64_t seq = 0;
    std::string text;
    const bool ok = peer && peer->collectives() == 3 && peer->recent(2, &c) && c == allReduce(200) &&
                    !peer->recent(4, &c) && !peer->recent(0, &c) && peer->finding(&seq, &text) && seq == 3 &&
                    text == "the first finding";
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "another process read other records";
  EXPECT_FALSE(PeerLedger::open(hash, 1)) << "no such rank";
}

TEST(CallCheck, ACallOverwrittenInTheRingIsNotCompared) {
  const uint64_t hash = freshHash();
  auto ahead = OpLedger::create(hash, 1);
  if (!ahead) GTEST_SKIP() << "no POSIX shared memory on this machine";
  auto behind = OpLedger::create(hash, 0);
  ASSERT_TRUE(behind);
  for (uint64_t i = 0; i < OpLedger::kRecentCalls + 5; ++i) ahead->publish(allReduce(7));
  CallChecker checker(hash, 0, {1});
  // Call #3 of rank 1 is gone from its page (the slot holds a later call): no comparison, no
  // finding, though rank 0's call #3 differs from what rank 1 once called.
  for (uint64_t i = 1; i <= 5; ++i) EXPECT_EQ(behind->publish(allReduce(9)), i);
  EXPECT_EQ(checker.check(3, allReduce(9)), "");
  // Call #6 is still there (it is within the last kRecentCalls), and it differs.
  EXPECT_TRUE(contains(checker.check(6, allReduce(9)), "collective #6")) << checker.check(6, allReduce(9));
  EXPECT_EQ(checker.check(6, allReduce(7)), "");
}

// Both neighbors publish call i and then look at each other's call i, at the same moment, many
// times. When the calls differ, at least one of them must see it (the fences of publish), and
// when they agree neither may report anything. (Without the fence, x86 may let each load pass its
// own store; that window is narrow, and on a machine of two cores this test may pass without it:
// it guards the comparison logic under contention more than it proves the fence.)
TEST(CallCheck, OfTwoNeighborsCallingAtOnceOneSeesTheOther) {
  const uint64_t hash = freshHash();
  auto page0 = OpLedger::create(hash, 0);
  if (!page0) GTEST_SKIP() << "no POSIX shared memory on this machine";
  auto page1 = OpLedger::create(hash, 1);
  ASSERT_TRUE(page1);
  constexpr int kCalls = 20000;
  std::atomic<int> arrived[2] = {{0}, {0}};
  std::vector<char> found[2] = {std::vector<char>(kCalls + 1), std::vector<char>(kCalls + 1)};
  auto side = [&](int rank, OpLedger* page) {
    CallChecker checker(hash, rank, {1 - rank});
    for (int i = 1; i <= kCalls; ++i) {
      arrived[rank].store(i, std::memory_order_release);  // a two-party barrier: start call i together
      while (arrived[1 - rank].load(std::memory_order_acquire) < i) {
      }
      const bool differ = i % 3 == 0;
      const CallSignature call = allReduce(differ && rank == 1 ? 2 : 1);
      const uint64_t seq = page->publish(call);
      found[rank][i] = !checker.check(seq, call).empty();
    }
  };
  std::thread t0(side, 0, page0.get());
  std::thread t1(side, 1, page1.get());
  t0.join();
  t1.join();
  int missed = 0, falseAlarms = 0;
  for (int i = 1; i <= kCalls; ++i) {
    const bool any = found[0][i] || found[1][i];
    if (i % 3 == 0 && !any) ++missed;
    if (i % 3 != 0 && any) ++falseAlarms;
  }
  EXPECT_EQ(missed, 0) << "calls that differed and neither neighbor saw";
  EXPECT_EQ(falseAlarms, 0);
}

// Two ranks without GPU state: rank 0 publishes its call as ncclAllReduce would; rank 1's
// ncclAllReduce with another count is refused before anything is launched, fails its communicator,
// and rank 0's watchdog side reads the finding.
struct FakeRank {
  ncclComm comm;
  FakeRank(uint64_t hash, int rank, int nRanks = 2) {
    comm.rank = rank;
    comm.nRanks = nRanks;
    comm.commHash = hash;
    comm.peers.resize(nRanks);
    for (PeerInfo& p : comm.peers) p.hostHash = 42;
    comm.ledger = OpLedger::create(hash, rank, nRanks);
  }
};

TEST(CallCheck, TheApiRefusesACallThatDiffersAndFailsTheCommunicator) {
  const uint64_t hash = freshHash();
  FakeRank r0(hash, 0), r1(hash, 1);
  if (!r0.comm.ledger || !r1.comm.ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  ASSERT_EQ(noteCollectiveCall(&r0.comm, allReduce(1024)), ncclSuccess);
  float x[4] = {};
  EXPECT_EQ(ncclAllReduce(x, x, 2048, ncclFloat32, ncclSum, &r1.comm, nullptr), ncclInvalidUsage);
  const std::string error = ncclGetLastError(&r1.comm);
  EXPECT_TRUE(contains(error, "rank 1 called ncclAllReduce(count 2048, ncclFloat32, ncclSum), rank 0 called "
                              "ncclAllReduce(count 1024, ncclFloat32, ncclSum) (the count differs)")) << error;
  EXPECT_TRUE(contains(error, "Nothing was launched")) << error;
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(&r1.comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclInvalidUsage);
  EXPECT_TRUE(r1.comm.abortRequested.load()) << "its kernels must stop";
  EXPECT_EQ(ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, &r1.comm, nullptr), ncclInvalidUsage)
      << "a failed communicator takes no more calls";

  FindingWatch watch(hash, sameHostPeers(&r0.comm));
  int finder = -1;
  std::string text;
  ASSERT_TRUE(watch.poll(&finder, &text));
  EXPECT_EQ(finder, 1);
  EXPECT_TRUE(contains(text, "collective #1 on this communicator differs")) << text;
}

TEST(CallCheck, AGroupWithADifferentCallIsDroppedWhole) {
  const uint64_t hash = freshHash();
  FakeRank r0(hash, 0), r1(hash, 1);
  if (!r0.comm.ledger || !r1.comm.ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  CallSignature root0 = broadcast(16, 0);
  ASSERT_EQ(noteCollectiveCall(&r0.comm, root0), ncclSuccess);
  float x[16] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(x, x, 16, ncclFloat32, 1, &r1.comm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the group fails as a whole";
  EXPECT_TRUE(r1.comm.tasks.empty());
  EXPECT_TRUE(contains(ncclGetLastError(&r1.comm), "(the root differs)")) << ncclGetLastError(&r1.comm);
}

// A group that fails as a whole (here: a later call's buffers overlap) takes its calls back out of
// the ledger: the neighbor's different call in that place is no finding, and the calls made
// instead are compared from the same number on.
TEST(CallCheck, AFailedGroupTakesItsCallsBack) {
  const uint64_t hash = freshHash();
  FakeRank r0(hash, 0), r1(hash, 1);
  if (!r0.comm.ledger || !r1.comm.ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  float x[64] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, &r0.comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x + 1, 16, ncclFloat32, ncclSum, &r0.comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(r0.comm.ledger->collectives(), 0u) << "the first all_reduce never ran";
  EXPECT_EQ(noteCollectiveCall(&r1.comm, broadcast(16, 0)), ncclSuccess) << ncclGetLastError(&r1.comm);
  EXPECT_EQ(noteCollectiveCall(&r0.comm, broadcast(16, 0)), ncclSuccess) << ncclGetLastError(&r0.comm);
  EXPECT_EQ(r0.comm.ledger->collectives(), 1u);
  // The same through ncclAlltoAll, whose call is published before its sends are queued.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAlltoAll(x, x + 32, 4, ncclFloat32, &r0.comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x + 1, 16, ncclFloat32, ncclSum, &r0.comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(r0.comm.ledger->collectives(), 1u);
  EXPECT_FALSE(r0.comm.abortRequested.load()) << "refused arguments do not fail the communicator";
}

// A call whose launch fails before anything reaches a stream (here: a stand-in with no channels,
// which the planner refuses; in life a CUDA graph capture invalidated earlier) takes its call back,
// alone or in a group: the rank's next call must be compared with the peers' same-numbered one.
TEST(CallCheck, ACallThatNeverReachedAStreamIsTakenBack) {
  const uint64_t hash = freshHash();
  FakeRank r0(hash, 0);
  if (!r0.comm.ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  float x[16] = {};
  EXPECT_NE(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, &r0.comm, nullptr), ncclSuccess);
  EXPECT_EQ(r0.comm.ledger->collectives(), 0u);
  EXPECT_NE(ncclSend(x, 16, ncclFloat32, 1, &r0.comm, nullptr), ncclSuccess);
  EXPECT_EQ(r0.comm.ledger->p2pOps(1, P2pDirection::kSend), 0u);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, &r0.comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(x, x, 16, ncclFloat32, 0, &r0.comm, nullptr), ncclSuccess);
  EXPECT_NE(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(r0.comm.ledger->collectives(), 0u);
}

// ncclCommAbort inside a group raises the flag at once and destroys at ncclGroupEnd (after every
// abort of the group has raised its own) unless the group failed; the aborted communicator's
// queued work and published calls of the group go, and it takes no more calls meanwhile.
TEST(CallCheck, AbortsInAGroupRaiseTheirFlagsFirstAndDestroyAtTheEnd) {
  const uint64_t hash = freshHash();
  auto* doomed = new ncclComm();
  doomed->rank = 0;
  doomed->nRanks = 2;
  doomed->commHash = hash;
  doomed->peers.resize(2);
  for (PeerInfo& p : doomed->peers) p.hostHash = 42;
  doomed->ledger = OpLedger::create(hash, 0, 2);
  if (!doomed->ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  float x[16] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, doomed, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(doomed), ncclSuccess);
  EXPECT_TRUE(doomed->looksValid()) << "destroyed only at ncclGroupEnd";
  EXPECT_TRUE(doomed->abortRequested.load()) << "the flag is up at once";
  EXPECT_EQ(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, doomed, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommAbort(doomed), ncclSuccess) << "twice in one group";
  // The group fails (the refused call): as NCCL, none of it runs, the abort neither; the handle
  // stays valid, its flag up, for the caller's clean-up.
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  ASSERT_TRUE(doomed->looksValid());
  EXPECT_TRUE(doomed->tasks.empty());
  EXPECT_EQ(ncclCommAbort(doomed), ncclSuccess);
  EXPECT_EQ(OpLedger::readPeer(hash, 0), -1) << "its ledger page went with it";
}

TEST(CallCheck, AlltoAllIsPublishedAsOneCallOfItsOwn) {
  const uint64_t hash = freshHash();
  FakeRank r0(hash, 0), r1(hash, 1);
  if (!r0.comm.ledger || !r1.comm.ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  // AlltoAll is published once, as itself: rank 1's AllGather of the same count differs.
  CallSignature a2a;
  a2a.call = kCallAlltoAll;
  a2a.dataType = ncclInt32;
  a2a.redOp = kNoRedOp;
  a2a.count = 4;
  ASSERT_EQ(noteCollectiveCall(&r0.comm, a2a), ncclSuccess);
  int x[8] = {};
  EXPECT_EQ(ncclAllGather(x + 4, x, 4, ncclInt32, &r1.comm, nullptr), ncclInvalidUsage);  // in place: rank 1's block
  EXPECT_TRUE(
      contains(ncclGetLastError(&r1.comm), "rank 0 called ncclAlltoAll(count 4, ncclInt32) (the collective differs)"))
      << ncclGetLastError(&r1.comm);
}

P2pSignature p2p(uint64_t count, uint8_t type = ncclFloat32) {
  P2pSignature op;
  op.count = count;
  op.dataType = type;
  return op;
}

TEST(CallCheck, SendsMeetTheReceiveOfTheSameNumberOnTheirPairOnly) {
  EXPECT_EQ(hostRanksOf({1, 2, 1, 2, 1}, 4), std::vector<int>({0, 2, 4}));
  EXPECT_EQ(describeP2pFinding(3, 0, p2p(1024), 2, p2p(1, ncclInt8)),
            "send #3 from rank 0 to rank 2 and the receive that meets it differ in size: rank 0 called "
            "ncclSend(count 1024, ncclFloat32, 4096 bytes), rank 2 called ncclRecv(count 1, ncclInt8, 1 byte)");
  const uint64_t hash = freshHash();
  FakeRank r0(hash, 0, 3), r1(hash, 1, 3), r2(hash, 2, 3);
  if (!r0.comm.ledger || !r1.comm.ledger || !r2.comm.ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  // Rank 0 sends 4 floats to rank 1, then 8 to rank 2; zero-byte sends are not numbered.
  EXPECT_EQ(noteP2pCall(&r0.comm, 1, P2pDirection::kSend, p2p(4)), ncclSuccess);
  EXPECT_EQ(noteP2pCall(&r0.comm, 1, P2pDirection::kSend, p2p(0)), ncclSuccess);
  EXPECT_EQ(noteP2pCall(&r0.comm, 2, P2pDirection::kSend, p2p(8)), ncclSuccess);
  // Rank 1's first receive from rank 0 has the same bytes in another type: it passes.
  EXPECT_EQ(noteP2pCall(&r1.comm, 0, P2pDirection::kRecv, p2p(16, ncclUint8)), ncclSuccess);
  // Rank 2's receive #1 from rank 0 meets send #1 on ITS pair (8 floats), not rank 1's.
  EXPECT_EQ(noteP2pCall(&r2.comm, 0, P2pDirection::kRecv, p2p(8)), ncclSuccess);
  // Rank 1's second receive comes first; rank 0's send #2 to it then finds the difference.
  EXPECT_EQ(noteP2pCall(&r1.comm, 0, P2pDirection::kRecv, p2p(6)), ncclSuccess);
  EXPECT_EQ(noteP2pCall(&r0.comm, 1, P2pDirection::kSend, p2p(5)), ncclInvalidUsage);
  const std::string error = ncclGetLastError(&r0.comm);
  EXPECT_TRUE(contains(error, "send #2 from rank 0 to rank 1 and the receive that meets it differ in size: rank 0 "
                              "called ncclSend(count 5, ncclFloat32, 20 bytes), rank 1 called ncclRecv(count 6, "
                              "ncclFloat32, 24 bytes)")) << error;
  EXPECT_TRUE(r0.comm.abortRequested.load());
  // The other ranks' watchdog side reads it, with what to do about it.
  FindingWatch watch(hash, sameHostPeers(&r2.comm));
  int finder = -1;
  std::string text;
  ASSERT_TRUE(watch.poll(&finder, &text));
  EXPECT_EQ(finder, 0);
  EXPECT_TRUE(contains(text, "must match the peer's n-th ncclRecv")) << text;
  // A rank whose call failed when the finder went away takes the finding as its error, read from
  // the pages mapped when its communicator was made: the finder may have removed its own by now.
  EXPECT_FALSE(adoptHostFinding(&r2.comm)) << "no pages mapped";
  r2.comm.findings = std::make_unique<FindingWatch>(hash, sameHostPeers(&r2.comm));
  r0.comm.ledger.reset();
  EXPECT_FALSE(PeerLedger::open(hash, 0)) << "the finder's page is gone";
  EXPECT_TRUE(adoptHostFinding(&r2.comm));
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(&r2.comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(&r2.comm), "rank 2: rank 0 found that send #2 from rank 0 to rank 1"))
      << ncclGetLastError(&r2.comm);
}

TEST(CallCheck, TheApiRefusesAReceiveOfAnotherSize) {
  const uint64_t hash = freshHash();
  FakeRank r0(hash, 0), r1(hash, 1);
  if (!r0.comm.ledger || !r1.comm.ledger) GTEST_SKIP() << "no POSIX shared memory on this machine";
  ASSERT_EQ(noteP2pCall(&r0.comm, 1, P2pDirection::kSend, p2p(64)), ncclSuccess);
  float x[64] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclRecv(x, 32, ncclFloat32, 0, &r1.comm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_TRUE(r1.comm.tasks.empty());
  EXPECT_TRUE(contains(ncclGetLastError(&r1.comm), "rank 1 called ncclRecv(count 32, ncclFloat32, 128 bytes)"))
      << ncclGetLastError(&r1.comm);
  {
    test::ScopedEnv env;
    env.set("NCCL_WEFT_CALL_CHECK", "0");
    const uint64_t other = freshHash();
    FakeRank q0(other, 0), q1(other, 1);
    ASSERT_EQ(noteP2pCall(&q0.comm, 1, P2pDirection::kSend, p2p(64)), ncclSuccess);
    EXPECT_EQ(noteP2pCall(&q1.comm, 0, P2pDirection::kRecv, p2p(32)), ncclSuccess) << "the check is off";
    EXPECT_EQ(q1.comm.ledger->p2pOps(0, P2pDirection::kRecv), 1u) << "still published for the hang report";
  }
}

}  // namespace
}  // namespace weft::core
