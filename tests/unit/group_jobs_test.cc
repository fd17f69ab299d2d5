// Communicator jobs deferred to ncclGroupEnd (enqueue/group.h): destroys wait for the group's end,
// an abort takes the jobs that need its communicator with it, jobs that never run tell their
// communicators why, jobs over one bootstrap keep their order, and no exception or bad argument
// leaves a group half open. Stand-in communicators (no GPU, no bootstrap) throughout.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/communicator.h"
#include "enqueue/group.h"
#include "test_env.h"

namespace weft::enqueue {
namespace {

using test::contains;

ncclComm* standIn(int rank = 0, int nRanks = 1) {
  auto* comm = new ncclComm();
  comm->rank = rank;
  comm->nRanks = nRanks;
  return comm;
}

// A job that only notes that it ran.
std::function<Status()> noting(bool* ran, Status result = ncclSuccess) {
  return [ran, result]() -> Status {
    *ran = true;
    return result;
  };
}

// What ran, in order, from any thread.
struct Trace {
  std::mutex mutex;
  std::vector<std::string> steps;
  void add(const std::string& step) {
    std::lock_guard<std::mutex> lock(mutex);
    steps.push_back(step);
  }
};

TEST(GroupJobs, DestroyInAGroupRunsLastAtTheGroupsEnd) {
  ncclComm* comm = standIn();
  bool validAtFinalize = false;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  deferFinalize([&]() -> Status {
    validAtFinalize = comm->looksValid();
    return ncclSuccess;
  }, true, comm);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_TRUE(comm->looksValid()) << "freed only at ncclGroupEnd";
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << "twice in one group: once is enough";
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_TRUE(validAtFinalize) << "the group's finalization ran before the destroy";

  // The order of the group's steps, and a destroy that runs although the group failed.
  Trace trace;
  ncclComm stay;
  ASSERT_EQ(groupStart(), ncclSuccess);
  deferDestroy(&stay, [&] { trace.add("destroy"); });
  deferFinalize([&]() -> Status {
    trace.add("finalize");
    return ncclSuccess;
  }, true, &stay);
  deferInit([&]() -> Status {
    trace.add("init");
    return ncclSuccess;
  }, true, nullptr);
  EXPECT_EQ(groupEnd(), ncclSuccess);
  EXPECT_EQ(trace.steps, std::vector<std::string>({"init", "finalize", "destroy"}));
  // A group that fails on a call runs none of its jobs, as NCCL: the handles of its destroys and
  // aborts stay valid for the caller's clean-up. One that fails on a job still destroys.
  trace.steps.clear();
  ASSERT_EQ(groupStart(), ncclSuccess);
  deferDestroy(&stay, [&] { trace.add("destroy"); });
  deferAbort(&stay, [&] { trace.add("abort"); });
  failGroup(ncclInvalidArgument);
  EXPECT_EQ(groupEnd(), ncclInvalidArgument);
  EXPECT_TRUE(trace.steps.empty());
  ASSERT_EQ(groupStart(), ncclSuccess);
  deferDestroy(&stay, [&] { trace.add("destroy"); });
  deferInit([]() -> Status { return ncclSystemError; }, true, nullptr);
  EXPECT_EQ(groupEnd(), ncclSystemError);
  EXPECT_EQ(trace.steps, std::vector<std::string>({"destroy"}));
}

// ncclCommAbort in a group drops the communicator's deferred jobs (its finalization, windows) and
// those over its bootstrap (a split of it, whose child is told why), and replaces its destroy.
TEST(GroupJobs, AnAbortTakesTheJobsThatNeedItsCommunicator) {
  ncclComm parent, child;
  child.asyncError.store(ncclInProgress);  // as a split's child until its job runs
  bool finalized = false, split = false, other = false;
  int destroyed = 0, aborted = 0;
  ASSERT_EQ(groupStart(), ncclSuccess);
  deferFinalize(noting(&finalized), true, &parent);
  deferInit(noting(&split), true, &child, &parent);
  deferInit(noting(&other), true, nullptr);
  deferDestroy(&parent, [&] { ++destroyed; });
  deferAbort(&parent, [&] { ++aborted; });
  EXPECT_EQ(groupEnd(), ncclSuccess);
  EXPECT_FALSE(finalized);
  EXPECT_FALSE(split);
  EXPECT_TRUE(other) << "jobs of other communicators run";
  EXPECT_EQ(aborted, 1);
  EXPECT_EQ(destroyed, 0) << "the abort frees it once";
  EXPECT_EQ(child.asyncError.load(), ncclInvalidUsage) << "nobody polls an ncclInProgress that never ends";
  EXPECT_TRUE(contains(ncclGetLastError(&child), "aborted")) << ncclGetLastError(&child);

  // Through the API: a finalize queued before the abort never touches the freed communicator.
  ncclComm* doomed = standIn();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  bool ranOnDoomed = false;
  deferFinalize(noting(&ranOnDoomed), true, doomed);
  EXPECT_EQ(ncclCommDestroy(doomed), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(doomed), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_FALSE(ranOnDoomed);
}

// A group that fails before its jobs run: communicators still waiting for a creation or a
// non-blocking finalization of it get the error rather than ncclInProgress for ever.
TEST(GroupJobs, JobsThatNeverRunTellTheirCommunicators) {
  ncclComm created, finalizing, blocking;
  created.asyncError.store(ncclInProgress);
  finalizing.asyncError.store(ncclInProgress);
  bool ran = false;
  ASSERT_EQ(groupStart(), ncclSuccess);
  deferInit(noting(&ran, ncclInProgress), false, &created);
  deferFinalize(noting(&ran), false, &finalizing);
  deferFinalize(noting(&ran), true, &blocking);
  failGroup(ncclInvalidArgument);
  EXPECT_EQ(groupEnd(), ncclInvalidArgument);
  EXPECT_FALSE(ran);
  EXPECT_EQ(created.asyncError.load(), ncclInvalidArgument);
  EXPECT_EQ(finalizing.asyncError.load(), ncclInvalidArgument);
  EXPECT_EQ(blocking.asyncError.load(), ncclSuccess) << "a blocking call was not waiting: untouched";
  EXPECT_TRUE(contains(ncclGetLastError(&created), "never ran")) << ncclGetLastError(&created);

  // A creation that fails: the group's finalizations never run either.
  finalizing.asyncError.store(ncclInProgress);
  ASSERT_EQ(groupStart(), ncclSuccess);
  deferInit([]() -> Status { return ncclSystemError; }, true, nullptr);
  deferFinalize(noting(&ran), false, &finalizing);
  EXPECT_EQ(groupEnd(), ncclSystemError);
  EXPECT_FALSE(ran);
  EXPECT_EQ(finalizing.asyncError.load(), ncclSystemError);
}

// Jobs over one communicator's bootstrap (its splits, windows) run one at a time in call order;
// jobs over different ones run side by side (each waits for its peers).
TEST(GroupJobs, JobsOverOneBootstrapKeepTheirOrder) {
  ncclComm a, b;
  Trace trace;
  std::atomic<int> running{0};
  std::atomic<int> mostAtOnce{0};
  auto job = [&](const std::string& name) {
    return [&, name]() -> Status {
      const int now = ++running;
      mostAtOnce.store(std::max(mostAtOnce.load(), now));
      std::this_thread::sleep_for(std::chrono::milliseconds(name == "a1" ? 300 : 30));
      trace.add(name);
      --running;
      return ncclSuccess;
    };
  };
  ASSERT_EQ(groupStart(), ncclSuccess);
  deferInit(job("a1"), true, nullptr, &a);
  deferInOrder(job("a2"), &a);
  deferInit(job("b1"), true, nullptr, &b);
  EXPECT_EQ(groupEnd(), ncclSuccess);
  ASSERT_EQ(trace.steps.size(), 3u);
  EXPECT_EQ(trace.steps[0], "b1") << "b's lane ran beside a's";
  EXPECT_EQ(trace.steps[1], "a1");
  EXPECT_EQ(trace.steps[2], "a2") << "a2 waited for a1 although a1 was slower";
  EXPECT_EQ(mostAtOnce.load(), 2);
}

TEST(GroupJobs, AnExceptionInAJobFailsTheGroupNotTheProcess) {
  for (int lanes : {1, 2}) {
    ASSERT_EQ(groupStart(), ncclSuccess);
    deferInit([]() -> Status { throw std::bad_alloc(); }, true, nullptr);
    if (lanes == 2) deferInit([]() -> Status { return ncclSuccess; }, true, nullptr);
    EXPECT_EQ(groupEnd(), ncclSystemError) << lanes << " lanes";
  }
}

// A bad argument of a call that may sit in a group fails the group, and ncclGroupSimulateEnd with
// a bad simInfo still closes its level (else every later call would only be queued).
TEST(GroupJobs, BadArgumentsNeverLeaveAGroupHalfOpen) {
  ncclSimInfo_t zeroed{};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&zeroed), ncclInvalidArgument);
  EXPECT_FALSE(inGroup());
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the level was closed";
  // As NCCL: no simInfo means ncclGroupEnd, and only the outermost level reads it.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(nullptr), ncclSuccess);
  EXPECT_FALSE(inGroup());
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&zeroed), ncclSuccess);
  EXPECT_TRUE(inGroup());
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_FALSE(inGroup());
  EXPECT_EQ(ncclGroupSimulateEnd(&zeroed), ncclInvalidUsage) << "no group is open";

  ncclComm_t made = nullptr;
  ncclUniqueId garbled{};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommInitRank(&made, 2, garbled, 0), ncclInvalidArgument);
  EXPECT_NE(ncclGroupEnd(), ncclSuccess) << "as NCCL's group error check";
  ncclComm* parent = standIn();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommSplit(parent, -5, 0, &made, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(parent), ncclSuccess);
}

}  // namespace
}  // namespace weft::enqueue
