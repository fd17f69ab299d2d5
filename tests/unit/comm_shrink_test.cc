// ncclCommShrink and ncclCommRevoke without a GPU: the exclude list's checks, the survivors'
// agreement over a real bootstrap (ranks as processes on loopback) while an excluded rank is dead
// and after the parent failed, disagreement and a dead survivor named to every survivor, and the
// API's rules on a revoked or failed communicator.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "bootstrap/unique_id.h"
#include "bootstrap_fork_harness.h"
#include "core/comm_shrink.h"
#include "core/communicator.h"
#include "test_env.h"

namespace weft::core {
namespace {

using test::ChildResult;
using test::ForkedRanks;
using test::ParentRoot;
using test::RankOutcome;

using test::contains;

std::vector<int> membersOf(int nRanks, int myRank, std::vector<int> exclude) {
  std::vector<int> m;
  EXPECT_EQ(shrinkMembers(nRanks, myRank, exclude.data(), (int)exclude.size(), &m), ncclSuccess)
      << ncclGetLastError(nullptr);
  return m;
}

Status membersStatus(int nRanks, int myRank, const int* exclude, int count) {
  std::vector<int> m;
  return shrinkMembers(nRanks, myRank, exclude, count, &m);
}

TEST(CommShrink, SurvivorsAreTheOtherRanksInOrder) {
  EXPECT_EQ(membersOf(5, 0, {3, 1}), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(membersOf(5, 4, {}), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(membersOf(2, 1, {0}), (std::vector<int>{1}));
}

TEST(CommShrink, BadExcludeListsAreRefusedNamingTheEntry) {
  const int self[] = {2, 1}, twice[] = {3, 3}, outside[] = {0, 9}, negative[] = {-1};
  struct Case {
    const int* list;
    int count;
    const char* says;
  } cases[] = {
      {self, 2, "excludeRanksList[1] is this rank (1)"},
      {twice, 2, "names rank 3 twice"},
      {outside, 2, "excludeRanksList[1] is 9, not a rank of this 4-rank"},
      {negative, 1, "excludeRanksList[0] is -1"},
      {nullptr, 1, "excludeRanksList is NULL but excludeRanksCount is 1"},
      {self, -2, "excludeRanksCount is -2"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(membersStatus(4, 1, c.list, c.count), ncclInvalidArgument) << c.says;
    EXPECT_TRUE(contains(ncclGetLastError(nullptr), c.says)) << ncclGetLastError(nullptr);
  }
  const int all[] = {0, 2, 3, 4};
  EXPECT_EQ(membersStatus(4, 1, all, 4), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "leaves none of the 4 ranks")) << ncclGetLastError(nullptr);
}

TEST(CommShrink, FingerprintDependsOnTheSurvivorsNotTheListOrder) {
  const uint64_t a = membersFingerprint(6, membersOf(6, 0, {4, 2}));
  EXPECT_EQ(a, membersFingerprint(6, membersOf(6, 5, {2, 4})));
  EXPECT_NE(a, membersFingerprint(6, membersOf(6, 0, {2})));
  EXPECT_NE(a, membersFingerprint(7, membersOf(7, 0, {4, 2, 6})));  // same survivors, another parent size
}

TEST(CommShrink, ChildRootIgnoresNcclCommId) {
  test::ScopedEnv env;
  env.set("NCCL_COMM_ID", "127.0.0.1:29411");
  ncclUniqueId id;
  bootstrap::UniqueIdInfo info;
  std::string why;
  ASSERT_EQ(bootstrap::createUniqueId(&id), ncclSuccess);
  ASSERT_TRUE(bootstrap::decodeUniqueId(id, &info, &why)) << why;
  EXPECT_TRUE(info.rootStartedByRank);
  const bootstrap::SocketAddress near = bootstrap::SocketAddress::loopback(AF_INET);
  ASSERT_EQ(bootstrap::createRootId(&id, &near), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_TRUE(bootstrap::decodeUniqueId(id, &info, &why)) << why;
  EXPECT_FALSE(info.rootStartedByRank) << "a child's id must name a root of its own";
  EXPECT_TRUE(info.root.isLoopback()) << info.root.toString();
  EXPECT_NE(info.root.port(), 29411);
}

// ---------------------------------------------------------------------------------------------
// The agreement, ranks as processes

std::string idText(const ncclUniqueId& id) {
  char buf[40];
  uint64_t a, b;
  memcpy(&a, id.internal, 8);
  memcpy(&b, id.internal + 8, 8);
  snprintf(buf, sizeof(buf), "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
  return buf;
}

// The first survivor's ids: distinct per process and per call, so equal texts prove one source.
Status fakeId(ncclUniqueId* id) {
  static uint64_t calls = 0;
  memset(id, 0, sizeof(*id));
  const uint64_t a = (uint64_t)getpid(), b = ++calls;
  memcpy(id->internal, &a, 8);
  memcpy(id->internal + 8, &b, 8);
  return ncclSuccess;
}

// Rank 3 gives up on an allgather nobody else joins (its failure notice reaches the others) and
// exits; the survivors raise the parent's abort flag (as the watchdog does when a peer dies), then
// shrink twice without it.
RankOutcome survivorsAfterAFailure(int rank, const ncclUniqueId& id) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::atomic<bool> abortFlag{false};
  std::unique_ptr<bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 4, &abortFlag, &b));
  if (rank == 3) {
    test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "1");
    char bytes[4] = {};  // one byte per rank (ASan found this test passing a single byte)
    const Status s = b->allGather(bytes, 1);
    return test::outcome(s == ncclSuccess ? ncclInternalError : ncclSuccess, "rank 3 gave up as planned");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // rank 3 has given up and exited
  abortFlag.store(true);
  const std::vector<int> members = {0, 1, 2};
  std::string text;
  for (int round = 0; round < 2; ++round) {
    ncclUniqueId child;
    WEFT_CHILD_TRY(agreeOnShrink(*b, members, fakeId, &child));
    text += idText(child) + " ";
  }
  WEFT_CHILD_CHECK(b->abortFlag() == &abortFlag, "the bootstrap's abort flag was not given back");
  return RankOutcome{ncclSuccess, 0, text};
}

// Four ranks as processes, each running body; their results.
std::vector<ChildResult> runFourRanks(const ForkedRanks::Body& body) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2, 3}, body);
  ParentRoot root(30);
  ranks.sendId(root.id);
  return ranks.wait(40000);
}

TEST(CommShrinkAgreement, SurvivorsAgreeAfterTheExcludedRankFailedAndDied) {
  auto rs = runFourRanks(survivorsAfterAFailure);
  ASSERT_EQ(rs.size(), 4u);
  std::string ids;
  for (const ChildResult& r : rs) {
    ASSERT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
    if (r.rank == 3) continue;
    if (ids.empty()) ids = r.outcome.text;
    EXPECT_EQ(r.outcome.text, ids) << "every survivor gets the first survivor's ids" << test::describe(rs);
    EXPECT_LT(r.outcome.seconds, 5.0) << test::describe(rs);
  }
  const size_t space = ids.find(' ');
  ASSERT_NE(space, std::string::npos);
  EXPECT_NE(ids.substr(0, space), ids.substr(space + 1, space)) << "two shrinks, two ids";
}

// Rank 2 excludes rank 1 as well (so rank 0 is its first survivor too); ranks 0 and 1 exclude
// rank 3 only. Rank 3 takes no part.
RankOutcome disagreeingSurvivors(int rank, const ncclUniqueId& id) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::unique_ptr<bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 4, nullptr, &b));
  if (rank == 3) return test::outcome(ncclSuccess);
  const std::vector<int> members = rank == 2 ? std::vector<int>{0, 2} : std::vector<int>{0, 1, 2};
  ncclUniqueId child;
  return test::outcome(agreeOnShrink(*b, members, fakeId, &child));
}

TEST(CommShrinkAgreement, DifferentListsFailEverySurvivorNamingTheRank) {
  auto rs = runFourRanks(disagreeingSurvivors);
  for (const ChildResult& r : rs) {
    if (r.rank == 3) continue;
    EXPECT_EQ(r.outcome.status, ncclInvalidUsage) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "parent rank 2 passed a different excludeRanksList")) << test::describe(rs);
    EXPECT_LT(r.outcome.seconds, 5.0);
  }
}

// Every survivor excludes rank 3, but rank 2 (not excluded) dies after init.
RankOutcome deadSurvivor(int rank, const ncclUniqueId& id) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::unique_ptr<bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 4, nullptr, &b));
  if (rank >= 2) _exit(0);
  ncclUniqueId child;
  return test::outcome(agreeOnShrink(*b, {0, 1, 2}, fakeId, &child));
}

TEST(CommShrinkAgreement, ADeadSurvivorIsNamedToEverySurvivorQuickly) {
  auto rs = runFourRanks(deadSurvivor);
  for (const ChildResult& r : rs) {
    if (r.rank >= 2) continue;
    EXPECT_EQ(r.outcome.status, ncclRemoteError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "parent rank 2 could not be reached")) << test::describe(rs);
    EXPECT_LT(r.outcome.seconds, 6.0) << "noticed at the deadline, not at once";
  }
}

// Rank 2, not excluded, is alive but never calls (hung) for longer than the timeout: every
// survivor fails after one timeout naming rank 2 - not the first survivor, whose verdict the others
// wait for a little longer than it waits for the hellos.
RankOutcome hungSurvivor(int rank, const ncclUniqueId& id) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::unique_ptr<bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 4, nullptr, &b));
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "2");
  if (rank == 2) {
    std::this_thread::sleep_for(std::chrono::seconds(8));
    return test::outcome(ncclSuccess);
  }
  ncclUniqueId child;
  const Status s = agreeOnShrink(*b, {0, 1, 2, 3}, fakeId, &child);
  return test::outcome(s, log::lastErrorOfThread());
}

TEST(CommShrinkAgreement, AHungSurvivorIsNamedToEverySurvivorAfterOneTimeout) {
  auto rs = runFourRanks(hungSurvivor);
  for (const ChildResult& r : rs) {
    if (r.rank == 2) continue;
    EXPECT_NE(r.outcome.status, ncclSuccess) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "parent rank 2 could not be reached")) << test::describe(rs);
    EXPECT_LT(r.outcome.seconds, 4.5) << test::describe(rs);
  }
}

// Timeouts that differ between ranks: in the first shrink rank 1 gives up (1 s + the verdict's
// grace) before the first survivor's verdict comes (it waits 8 s for the hung rank 2). Retrying
// without rank 2, rank 1 must pass over that late verdict of the first call and take the new one.
RankOutcome lateVerdictOfAnEarlierCall(int rank, const ncclUniqueId& id) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::unique_ptr<bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 3, nullptr, &b));
  if (rank == 2) {
    std::this_thread::sleep_for(std::chrono::seconds(11));
    return test::outcome(ncclSuccess);
  }
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", rank == 0 ? "8" : "1");
  ncclUniqueId child;
  WEFT_CHILD_CHECK(agreeOnShrink(*b, {0, 1, 2}, fakeId, &child) != ncclSuccess, "the first shrink succeeded");
  const Status s = agreeOnShrink(*b, {0, 1}, fakeId, &child);
  return test::outcome(s, log::lastErrorOfThread());
}

// Three ranks as processes, each running body; their results.
std::vector<ChildResult> runThreeRanks(const ForkedRanks::Body& body) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2}, body);
  ParentRoot root(30);
  ranks.sendId(root.id);
  return ranks.wait(40000);
}

TEST(CommShrinkAgreement, AVerdictOfAnEarlierCallIsPassedOver) {
  auto rs = runThreeRanks(lateVerdictOfAnEarlierCall);
  for (const ChildResult& r : rs) EXPECT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
}

// Rank 1 comes to the first shrink after the first survivor gave up on it (timeouts of 1 s): that
// call fails on every survivor. The retry without rank 2 (another list) must not take the answer
// rank 1 gave in the first call for its answer to the second.
RankOutcome lateHelloOfAnEarlierCall(int rank, const ncclUniqueId& id) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::unique_ptr<bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 3, nullptr, &b));
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "1");
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ncclUniqueId child;
  WEFT_CHILD_CHECK(agreeOnShrink(*b, {0, 1, 2}, fakeId, &child) != ncclSuccess,
                   "the first shrink succeeded although rank 1 came late");
  const std::string said = log::lastErrorOfThread();
  WEFT_CHILD_CHECK(rank != 1 || said.find("came after the first survivor") != std::string::npos,
                   "rank 1 was not told it came late: " + said);
  WEFT_CHILD_CHECK(rank == 1 || said.find("parent rank 1 could not be reached") != std::string::npos,
                   "rank 1 was not named: " + said);
  if (rank == 2) return test::outcome(ncclSuccess);
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "10");
  const Status s = agreeOnShrink(*b, {0, 1}, fakeId, &child);
  if (isError(s)) return test::outcome(s, log::lastErrorOfThread());
  return RankOutcome{ncclSuccess, 0, idText(child)};
}

TEST(CommShrinkAgreement, AnAnswerLeftFromAnEarlierCallIsPassedOver) {
  auto rs = runThreeRanks(lateHelloOfAnEarlierCall);
  std::string ids;
  for (const ChildResult& r : rs) {
    ASSERT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
    if (r.rank == 2) continue;
    if (ids.empty()) ids = r.outcome.text;
    EXPECT_EQ(r.outcome.text, ids) << "both survivors get the first survivor's id" << test::describe(rs);
  }
}

// ---------------------------------------------------------------------------------------------
// The API on a communicator without GPU state: what a revoked or failed one accepts.

struct FakeComm {
  ncclComm comm;
  FakeComm() {
    comm.rank = 1;
    comm.nRanks = 4;
  }
};

TEST(CommRevoke, RevokedCommunicatorTakesOnlySplitShrinkDestroyAndAbort) {
  FakeComm f;
  ncclComm_t c = &f.comm;
  EXPECT_EQ(ncclCommRevoke(nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommRevoke(c, 1), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "revokeFlags is 1")) << ncclGetLastError(nullptr);
  EXPECT_FALSE(f.comm.revoked.load());
  f.comm.asyncError.store(ncclRemoteError);  // a peer died: revoking is how one recovers
  ASSERT_EQ(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_TRUE(f.comm.revoked.load());
  ncclResult_t async = ncclInProgress;
  EXPECT_EQ(ncclCommGetAsyncError(c, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess) << "a revoked communicator is quiescent, as NCCL reports it";
  float x = 0;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "was revoked (ncclCommRevoke)")) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat, 0, c, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommFinalize(c), ncclInvalidUsage);
  EXPECT_EQ(ncclCommRevoke(c, 0), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "revoked already")) << ncclGetLastError(nullptr);
  // Shrink's own argument checks come before any talk with the peers.
  ncclComm_t child = c;
  int self = 1;
  EXPECT_EQ(ncclCommShrink(c, &self, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(child, nullptr) << "*newcomm is cleared on failure";
  int three = 3;
  EXPECT_EQ(ncclCommShrink(c, &three, 1, &child, nullptr, 2), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "shrinkFlags is 2")) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommShrink(c, &three, 1, nullptr, nullptr, 0), ncclInvalidArgument);
}

TEST(CommRevoke, FailedCommunicatorShrinksOnlyWithAbortOrAfterRevoke) {
  FakeComm f;
  ncclComm_t c = &f.comm;
  f.comm.asyncError.store(ncclRemoteError);
  ncclComm_t child = nullptr;
  int three = 3;
  EXPECT_EQ(ncclCommShrink(c, &three, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "pass NCCL_SHRINK_ABORT")) << ncclGetLastError(nullptr);
  EXPECT_FALSE(f.comm.revoked.load()) << "a refused shrink changes nothing";
  EXPECT_EQ(ncclCommSplit(c, 0, 0, &child, nullptr), ncclRemoteError) << "a failed parent cannot be split";
  f.comm.asyncError.store(ncclInProgress);  // still being created
  EXPECT_EQ(ncclCommShrink(c, &three, 1, &child, nullptr, NCCL_SHRINK_ABORT), ncclInvalidUsage);
  EXPECT_EQ(ncclCommRevoke(c, 0), ncclInvalidUsage);
  EXPECT_FALSE(f.comm.revoked.load());
  f.comm.asyncError.store(ncclSuccess);
}

}  // namespace
}  // namespace weft::core
