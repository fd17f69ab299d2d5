// ncclCommWindowRegister / ncclCommWindowDeregister without a GPU: the ranks' agreement over a
// real bootstrap (ranks as processes on loopback): a rank whose call failed, a rank that counts
// its windows differently, a malformed record and a dead rank are named to every rank at once;
// and the API on a stand-in communicator (handles, references, groups, refusals).
#include "core/comm_window.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap_fork_harness.h"
#include "core/communicator.h"
#include "core/dev_comm.h"
#include "core/registrations.h"
#include "enqueue/group.h"
#include "test_env.h"

namespace weft::core {
namespace {

using test::ChildResult;
using test::contains;
using test::ForkedRanks;
using test::ParentRoot;
using test::RankOutcome;

std::vector<ChildResult> runFourRanks(const ForkedRanks::Body& body) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2, 3}, body);
  ParentRoot root(30);
  ranks.sendId(root.id);
  return ranks.wait(40000);
}

WindowRecord bufferRecord(int rank) {
  WindowRecord r;
  r.part = (uint32_t)WindowPart::kBuffer;
  r.sequence = 3;
  r.token = 0x7765000000000000ull + (uint64_t)rank;
  r.bytes = 4096u * (uint64_t)(rank + 1);  // sizes may differ between ranks
  r.sharedWithAll = 1;
  return r;
}

// Each rank's body: its own record changed by `edit`, then the agreement; success also checks
// that every rank's record came through as sent.
RankOutcome agree(int rank, const ncclUniqueId& id, void (*edit)(int rank, WindowRecord* mine)) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
  std::unique_ptr<bootstrap::Bootstrap> b;
  WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 4, nullptr, &b));
  WindowRecord mine = bufferRecord(rank);
  edit(rank, &mine);
  std::vector<WindowRecord> all;
  const Status s = agreeOnWindow(b.get(), rank, 4, mine, &all);
  if (s == ncclSuccess) {
    for (int p = 0; p < 4; ++p) {
      const WindowRecord want = bufferRecord(p);
      WEFT_CHILD_CHECK(all[p].token == want.token && all[p].bytes == want.bytes,
                       "a record differs from what its rank sent");
    }
  }
  return test::outcome(s);
}

TEST(WindowAgreement, EveryRankGetsEveryRecord) {
  auto rs = runFourRanks([](int rank, const ncclUniqueId& id) { return agree(rank, id, [](int, WindowRecord*) {}); });
  for (const ChildResult& r : rs) EXPECT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
}

TEST(WindowAgreement, ARankWhoseCallFailedIsNamedToAll) {
  auto rs = runFourRanks([](int rank, const ncclUniqueId& id) {
    return agree(rank, id, [](int r, WindowRecord* m) {
      if (r == 2) m->part = (uint32_t)WindowPart::kFailed;
    });
  });
  for (const ChildResult& r : rs) {
    EXPECT_EQ(r.outcome.status, ncclInvalidUsage) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "the call failed on rank 2")) << test::describe(rs);
    EXPECT_LT(r.outcome.seconds, 5.0);
  }
}

TEST(WindowAgreement, CallsThatDoNotPairUpAreNamed) {
  auto rs = runFourRanks([](int rank, const ncclUniqueId& id) {
    return agree(rank, id, [](int r, WindowRecord* m) {
      if (r == 1) m->sequence = 4;
    });
  });
  for (const ChildResult& r : rs) {
    EXPECT_EQ(r.outcome.status, ncclInvalidUsage) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, r.rank == 1 ? "ranks 0, 2, 3 registered a different number of windows"
                                                     : "rank 1 registered a different number of windows"))
        << test::describe(rs);
  }
}

TEST(WindowAgreement, AMalformedRecordIsRefused) {
  auto rs = runFourRanks([](int rank, const ncclUniqueId& id) {
    return agree(rank, id, [](int r, WindowRecord* m) {
      if (r == 3) m->part = 9;
      if (r == 0) m->magic = 0x12345678;
    });
  });
  for (const ChildResult& r : rs) {
    EXPECT_EQ(r.outcome.status, ncclInternalError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "malformed window record from ranks 0, 3")) << test::describe(rs);
  }
}

TEST(WindowAgreement, ADeadRankIsNamedQuickly) {
  auto rs = runFourRanks([](int rank, const ncclUniqueId& id) -> RankOutcome {
    test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "20");
    std::unique_ptr<bootstrap::Bootstrap> b;
    WEFT_CHILD_TRY(bootstrap::Bootstrap::init(id, rank, 4, nullptr, &b));
    if (rank == 2) _exit(0);
    std::vector<WindowRecord> all;
    return test::outcome(agreeOnWindow(b.get(), rank, 4, bufferRecord(rank), &all));
  });
  for (const ChildResult& r : rs) {
    if (r.rank == 2) continue;
    EXPECT_EQ(r.outcome.status, ncclRemoteError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "rank 2")) << test::describe(rs);
    EXPECT_LT(r.outcome.seconds, 6.0) << "noticed at the deadline, not at once";
  }
}

// ---------------------------------------------------------------------------------------------
// The API on a stand-in communicator of one rank (no GPU: the driver's facts are not asked).

struct OneRank {
  ncclComm comm;
  OneRank() {
    comm.rank = 0;
    comm.nRanks = 1;
  }
};

void* const kBuff = (void*)0x7f0000400000;

TEST(WindowApi, AWindowIsARegistrationOfItsOwn) {
  OneRank one;
  ncclWindow_t win = nullptr;
  ASSERT_EQ(ncclCommWindowRegister(&one.comm, kBuff, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess)
      << ncclGetLastError(nullptr);
  ASSERT_NE(win, nullptr);
  EXPECT_EQ(one.comm.registrations->size(), 1u) << "the window's buffer is registered";
  EXPECT_EQ(one.comm.windows->size(), 1u);
  EXPECT_EQ(ncclCommDeregister(&one.comm, (void*)win), ncclInvalidUsage) << "a window is no registration handle";
  void* reg = nullptr;
  ASSERT_EQ(ncclCommRegister(&one.comm, kBuff, 4096, &reg), ncclSuccess);
  EXPECT_NE((void*)win, reg);
  ASSERT_EQ(ncclCommWindowDeregister(&one.comm, win), ncclSuccess);
  EXPECT_EQ(one.comm.registrations->size(), 1u) << "ncclCommRegister's reference keeps the range";
  EXPECT_EQ(ncclCommWindowDeregister(&one.comm, win), ncclInvalidUsage) << "deregistered twice";
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "is not a window of this communicator")) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDeregister(&one.comm, reg), ncclSuccess);
  EXPECT_EQ(one.comm.registrations->size(), 0u);
  EXPECT_EQ(one.comm.windows->registered(), 1u);
}

TEST(WindowApi, NullBufferGivesNoWindowAndNullDeregistersNothing) {
  OneRank one;
  ncclWindow_t win = (ncclWindow_t)0x1;
  EXPECT_EQ(ncclCommWindowRegister(&one.comm, nullptr, 4096, &win, 0), ncclSuccess);
  EXPECT_EQ(win, nullptr);
  win = (ncclWindow_t)0x1;
  EXPECT_EQ(ncclCommWindowRegister(&one.comm, kBuff, 0, &win, 0), ncclSuccess);
  EXPECT_EQ(win, nullptr);
  EXPECT_EQ(ncclCommWindowDeregister(&one.comm, nullptr), ncclSuccess);
  EXPECT_EQ(one.comm.registrations->size(), 0u);
  EXPECT_EQ(one.comm.windows->registered(), 2u) << "each call took part in an exchange";
}

TEST(WindowApi, BadArgumentsAreNamedAndKeepNothing) {
  OneRank one;
  ncclWindow_t win = nullptr;
  EXPECT_EQ(ncclCommWindowRegister(nullptr, kBuff, 4096, &win, 0), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclCommWindowRegister: argument 'comm' is NULL"));
  EXPECT_EQ(ncclCommWindowRegister(&one.comm, kBuff, 4096, nullptr, 0), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "argument 'win' is NULL")) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommWindowRegister(&one.comm, (void*)(UINTPTR_MAX - 100), 64, &win, 0), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclCommWindowRegister: buff")) << ncclGetLastError(nullptr);
  EXPECT_EQ(win, nullptr);
  EXPECT_EQ(one.comm.registrations->size(), 0u);
  EXPECT_EQ(one.comm.windows->size(), 0u);
  EXPECT_EQ(ncclCommWindowDeregister(nullptr, nullptr), ncclInvalidArgument);
  OneRank other;
  ASSERT_EQ(ncclCommWindowRegister(&other.comm, kBuff, 4096, &win, 0), ncclSuccess);
  EXPECT_EQ(ncclCommWindowDeregister(&one.comm, win), ncclInvalidUsage) << "another communicator's window";
  EXPECT_EQ(ncclCommWindowDeregister(&other.comm, win), ncclSuccess);
  one.comm.finalized = true;
  EXPECT_EQ(ncclCommWindowRegister(&one.comm, kBuff, 4096, &win, 0), ncclInvalidUsage) << "collective: usable comm";
}

TEST(WindowApi, InsideAGroupTheWindowComesAtGroupEnd) {
  OneRank one;
  ncclWindow_t win = (ncclWindow_t)0x1;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommWindowRegister(&one.comm, kBuff, 8192, &win, 0), ncclSuccess);
  EXPECT_EQ(win, nullptr) << "cleared at once, filled at ncclGroupEnd";
  EXPECT_EQ(one.comm.windows->size(), 0u);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_NE(win, nullptr);
  EXPECT_EQ(ncclCommWindowDeregister(&one.comm, win), ncclSuccess);

  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommWindowRegister(&one.comm, kBuff, 8192, nullptr, 0), ncclSuccess) << "checked at ncclGroupEnd";
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "argument 'win' is NULL")) << ncclGetLastError(nullptr);
  EXPECT_EQ(one.comm.registrations->size(), 0u);
}

// ---------------------------------------------------------------------------------------------
// The device API's flat windows (core/dev_window.h): the team and the plan, pure.

TEST(DeviceWindow, TheTeamIsTheHostsConsecutiveRanks) {
  const std::vector<uint64_t> twoHosts = {7, 7, 7, 9, 9};
  LsaTeam t = lsaTeamOf(twoHosts, 1);
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.size, 3);
  EXPECT_EQ(t.firstWorldRank, 0);
  t = lsaTeamOf(twoHosts, 4);
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.size, 2);
  EXPECT_EQ(t.firstWorldRank, 3);
  t = lsaTeamOf({7, 9, 7, 9}, 2);  // interleaved hosts: NCCL's team arithmetic cannot name them
  EXPECT_EQ(t.size, 1);
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.firstWorldRank, 2);
}

TEST(DeviceWindow, PlanPutsEveryBufferAtTheSameDistanceFromItsSlot) {
  constexpr size_t kGran = 2 << 20, k4G = size_t(1) << 32;
  FlatPlan p = planFlat({{true, 64 << 20, 0}, {true, 32 << 20, 0}}, kGran);
  ASSERT_TRUE(p.ok) << p.why;
  EXPECT_EQ(p.lead, 0u);
  EXPECT_EQ(p.stride, k4G) << "slots are whole units of 4 GiB (the device code adds to the high word)";
  p = planFlat({{true, 8 * kGran, 3 * kGran + 4096}, {true, 4 * kGran, kGran + 4096}}, kGran);
  ASSERT_TRUE(p.ok) << p.why;
  EXPECT_EQ(p.lead, 3 * kGran + 4096) << "the largest offset";
  p = planFlat({{true, size_t(5) << 30, 0}, {true, kGran, 0}}, kGran);
  EXPECT_EQ(p.stride, size_t(1) << 33) << "5 GiB rounds up to 8";
  EXPECT_FALSE(planFlat({{true, kGran, 0}, {false, 0, 0}}, kGran).ok) << "cudaMalloc memory cannot be remapped";
  EXPECT_FALSE(planFlat({{true, 4 * kGran, 0}, {true, 4 * kGran, 4096}}, kGran).ok) << "offsets differ mod granule";
  EXPECT_FALSE(planFlat({{true, kGran + 1, 0}}, kGran).ok);
  EXPECT_FALSE(planFlat({}, kGran).ok);
}

TEST(DeviceComm, BarrierSizesReciprocalsAndTeams) {
  EXPECT_EQ(lsaBarrierBytes(2, 4), 4u * 2 * (3 + 4)) << "epochs x2, multicast inbox, one inbox per team rank";
  EXPECT_EQ(lsaBarrierBytes(0, 8), 0u);
  EXPECT_EQ(divisionReciprocal(1), 0u) << "NCCL's fast division treats 0 as 'divide by one'";
  EXPECT_EQ(divisionReciprocal(3), UINT32_MAX / 3);
  EXPECT_EQ(divisionReciprocal(4), UINT32_MAX / 4 + 1);
  LsaBarrierHandle h{};
  DevResourceRequirement req{};
  req.ginSignalCount = 5;
  ASSERT_EQ(lsaBarrierCreateRequirement({4, 1, 1}, 3, &h, &req), ncclSuccess);
  EXPECT_EQ(h.nBarriers, 3);
  EXPECT_EQ(req.bufferSize, lsaBarrierBytes(3, 4));
  EXPECT_EQ(req.outBufferHandle, &h.bufHandle) << "ncclDevCommCreate writes the barrier's place there";
  EXPECT_EQ(req.ginSignalCount, 0) << "the rest is cleared";
  EXPECT_EQ(lsaBarrierCreateRequirement({4, 1, 1}, -1, &h, &req), ncclInvalidArgument);
  EXPECT_EQ(lsaBarrierCreateRequirement({4, 1, 1}, 1, nullptr, &req), ncclInvalidArgument);
  // The LSA all-to-all: an element takes a 16-byte line per 8 bytes; per block a header line and
  // two epochs' worth of slots.
  EXPECT_EQ(lla2aCalcSlots(8, 8), 8);
  EXPECT_EQ(lla2aCalcSlots(8, 12), 16);
  EXPECT_EQ(lla2aCalcSlots(0, 8), 0);
  LLA2AHandle a{};
  ASSERT_EQ(lla2aCreateRequirement(2, 16, &a, &req), ncclSuccess);
  EXPECT_EQ(a.nSlots, 16u);
  EXPECT_EQ(req.bufferSize, 2u * 16 * (1 + 2 * 16));
  EXPECT_EQ(req.outBufferHandle, &a.bufHandle);
  EXPECT_EQ(lla2aCreateRequirement(0, 16, &a, &req), ncclInvalidArgument);
  ncclComm comm;  // a stand-in: 6 ranks, no peer table (each rank is its own host's team)
  comm.rank = 4;
  comm.nRanks = 6;
  const DevTeam lsa = teamLsa(&comm), rail = teamRail(&comm), world = teamWorld(&comm);
  EXPECT_EQ(lsa.nRanks, 1);
  EXPECT_EQ(lsa.rank, 0);
  EXPECT_EQ(rail.nRanks, 6);
  EXPECT_EQ(rail.rank, 4);
  EXPECT_EQ(world.rank, 4);
}

TEST(DeviceComm, WhatWeftLacksIsRefusedNamingTheField) {
  OneRank one;
  DevCommRequirements reqs{};
  DevCommAbi dc{};
  reqs.lsaMultimem = true;
  EXPECT_EQ(devCommCreate(&one.comm, &reqs, &dc), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "lsaMultimem")) << ncclGetLastError(nullptr);
  reqs = DevCommRequirements{};
  reqs.ginSignalCount = 2;
  EXPECT_EQ(devCommCreate(&one.comm, &reqs, &dc), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "gin*")) << ncclGetLastError(nullptr);
  reqs = DevCommRequirements{};
  reqs.railGinBarrierCount = 1;
  EXPECT_EQ(devCommCreate(&one.comm, &reqs, &dc), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "railGinBarrierCount")) << ncclGetLastError(nullptr);
  EXPECT_EQ(devCommCreate(&one.comm, nullptr, &dc), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "argument 'reqs' is NULL")) << ncclGetLastError(nullptr);
  EXPECT_EQ(one.comm.windows->size(), 0u) << "nothing kept";
  EXPECT_EQ(one.comm.windows->registered(), 4u) << "each refusal still took part in an exchange";
  EXPECT_EQ(devCommDestroy(&one.comm, &dc), ncclInvalidUsage) << "never created";
}

// Two window registrations of one communicator in a group share its bootstrap: at ncclGroupEnd
// they must run one after the other, in call order, while other communicators' jobs run beside
// them (a thread driving two ranks of one communicator needs both ranks' exchanges at once).
TEST(WindowGroup, OneCommunicatorsJobsRunInOrderOthersAlongside) {
  std::mutex m;
  std::vector<std::string> order;
  std::atomic<int> inA{0}, maxInA{0};
  std::atomic<bool> bStarted{false}, aSawB{false};
  ncclComm keyA, keyB;  // stand-ins: only their addresses matter
  auto jobA = [&](const char* name) {
    return [&, name]() -> Status {
      const int now = ++inA;
      maxInA.store(std::max(maxInA.load(), now));
      for (int i = 0; i < 200 && !bStarted.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      aSawB.store(aSawB.load() || bStarted.load());
      {
        std::lock_guard<std::mutex> lock(m);
        order.push_back(name);
      }
      --inA;
      return ncclSuccess;
    };
  };
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  enqueue::deferInOrder(jobA("a1"), &keyA);
  enqueue::deferInOrder(jobA("a2"), &keyA);
  enqueue::deferInOrder(
      [&]() -> Status {
        bStarted.store(true);
        return ncclSuccess;
      },
      &keyB);
  enqueue::deferInOrder(jobA("a3"), &keyA);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(maxInA.load(), 1) << "one communicator's jobs overlapped";
  EXPECT_TRUE(aSawB.load()) << "another communicator's job did not run alongside";
}

}  // namespace
}  // namespace weft::core
