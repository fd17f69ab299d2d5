// ncclCommRegister / ncclCommDeregister bookkeeping (core/registrations.h, core/comm_register.h):
// page-widened ranges, shared handles for contained ranges, references, refused handles. The
// driver's side (device, pinned, pageable, past-the-end memory) is tested on a GPU by
// tests/gpu/register_test.cc; here the communicator is a stand-in without a GPU.
#include "core/registrations.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "core/communicator.h"
#include "nccl.h"
#include "test_env.h"

namespace weft::core {
namespace {

using test::contains;

constexpr size_t kPage = 4096;

TEST(Registrations, RangesAreWidenedToWholePages) {
  RegistrationTable table(kPage);
  Registration r;
  void* h = table.add(0x10010, 100, &r);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(r.begin, 0x10000u);
  EXPECT_EQ(r.end, 0x11000u);
  EXPECT_EQ(r.refs, 1);
  table.add(0x20000, kPage, &r);
  EXPECT_EQ(r.begin, 0x20000u);
  EXPECT_EQ(r.end, 0x21000u) << "an aligned page stays one page";
  table.add(0x30fff, 2, &r);
  EXPECT_EQ(r.begin, 0x30000u);
  EXPECT_EQ(r.end, 0x32000u) << "two bytes across a page boundary take both pages";
}

// The launch path finds the registration around each point-to-point part (zero-copy).
TEST(Registrations, FindRangeNeedsTheWholeRangeInside) {
  RegistrationTable table(kPage);
  EXPECT_TRUE(table.empty());
  Registration r;
  void* a = table.add(0x100000, 8 * kPage);
  void* b = table.add(0x200000, 2 * kPage);
  EXPECT_FALSE(table.empty());
  ASSERT_TRUE(table.findRange(0x100000 + 100, 4 * kPage, &r));
  EXPECT_EQ(r.handle, (uint64_t)(uintptr_t)a);
  ASSERT_TRUE(table.findRange(0x100000, 8 * kPage, &r)) << "exactly the registration";
  EXPECT_FALSE(table.findRange(0x100000, 8 * kPage + 1, &r)) << "one byte past its end";
  EXPECT_FALSE(table.findRange(0x100000 - 1, 2, &r)) << "one byte before its start";
  ASSERT_TRUE(table.findRange(0x201000, kPage, &r));
  EXPECT_EQ(r.handle, (uint64_t)(uintptr_t)b);
  EXPECT_FALSE(table.findRange(0x150000, 1, &r)) << "between registrations";
  bool released = true;
  void* again = table.add(0x100000, kPage);  // inside a: one more reference
  EXPECT_EQ(again, a);
  ASSERT_TRUE(table.remove(a, &released));
  EXPECT_FALSE(released) << "a reference is left";
  ASSERT_TRUE(table.remove(a, &released));
  EXPECT_TRUE(released);
  EXPECT_FALSE(table.findRange(0x100000, 1, &r));
  ASSERT_TRUE(table.remove(b, &released));
  EXPECT_TRUE(table.empty());
}

TEST(Registrations, ARangeInsideAKeptOneSharesItsHandle) {
  RegistrationTable table(kPage);
  void* whole = table.add(0x100000, 16 * kPage);
  Registration r;
  EXPECT_EQ(table.add(0x100000 + 3 * kPage + 5, 100, &r), whole);
  EXPECT_EQ(r.refs, 2);
  EXPECT_EQ(table.add(0x100000, 16 * kPage), whole) << "the same range again";
  EXPECT_EQ(table.size(), 1u);
  // Overlapping but not inside: a range of its own.
  void* across = table.add(0x100000 + 15 * kPage, 2 * kPage);
  EXPECT_NE(across, whole);
  void* before = table.add(0x0f0000, kPage);
  EXPECT_NE(before, whole);
  EXPECT_EQ(table.size(), 3u);
  ASSERT_TRUE(table.find(whole, &r));
  EXPECT_EQ(r.refs, 3);
}

TEST(Registrations, EachReferenceIsDroppedOnceThenTheHandleIsRefused) {
  RegistrationTable table(kPage);
  void* h = table.add(0x100000, kPage);
  EXPECT_EQ(table.add(0x100000, 10), h);
  EXPECT_TRUE(table.remove(h));
  Registration r;
  ASSERT_TRUE(table.find(h, &r));
  EXPECT_EQ(r.refs, 1);
  EXPECT_TRUE(table.remove(h));
  EXPECT_FALSE(table.find(h, &r));
  EXPECT_FALSE(table.remove(h)) << "a handle released as often as it was given";
  int local = 0;
  EXPECT_FALSE(table.remove(&local)) << "never a handle of this table: not followed";
  EXPECT_EQ(table.size(), 0u);
  void* again = table.add(0x100000, kPage);
  EXPECT_NE(again, h) << "a handle is never given twice, so a stale one cannot name a new registration";
  EXPECT_FALSE(table.remove(h));
  EXPECT_TRUE(table.remove(again));
}

TEST(Registrations, ThreadsRegisteringAtOnceKeepTheCountsRight) {
  RegistrationTable table(kPage);
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&table, t] {
      for (int i = 0; i < kEach; ++i) {
        void* h = table.add(0x1000000 + (uintptr_t)(i % 7) * kPage, 64);
        if (i % 2 == 1) EXPECT_TRUE(table.remove(h)) << t;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int refs = 0;
  for (int i = 0; i < 7; ++i) {
    Registration r;
    void* h = table.add(0x1000000 + (uintptr_t)i * kPage, 64, &r);
    refs += r.refs - 1;
    EXPECT_TRUE(table.remove(h));
  }
  EXPECT_EQ(refs, kThreads * kEach / 2);
}

// The API on a stand-in communicator (no GPU: the driver's facts are not asked).
TEST(RegistrationApi, HandlesComeBackAndAreReleased) {
  ncclComm comm;
  comm.rank = 0;
  comm.nRanks = 1;
  void* h = nullptr;
  ASSERT_EQ(ncclCommRegister(&comm, (void*)0x7f0000100000, 1 << 20, &h), ncclSuccess);
  ASSERT_NE(h, nullptr);
  void* inner = nullptr;
  ASSERT_EQ(ncclCommRegister(&comm, (void*)0x7f0000100100, 4096, &inner), ncclSuccess);
  EXPECT_EQ(inner, h);
  EXPECT_EQ(ncclCommDeregister(&comm, h), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(&comm, inner), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(&comm, h), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(&comm), "ncclCommDeregister: handle")) << ncclGetLastError(&comm);
  EXPECT_TRUE(contains(ncclGetLastError(&comm), "not a registration of this communicator"));
  EXPECT_EQ(ncclCommDeregister(&comm, nullptr), ncclSuccess) << "what host memory is given";
}

TEST(RegistrationApi, AHandleOfAnotherCommunicatorIsRefused) {
  ncclComm a, b;
  void* h = nullptr;
  ASSERT_EQ(ncclCommRegister(&a, (void*)0x7f0000200000, 4096, &h), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(&b, h), ncclInvalidUsage);
  EXPECT_EQ(ncclCommDeregister(&a, h), ncclSuccess);
}

TEST(RegistrationApi, BadArgumentsAreNamed) {
  ncclComm comm;
  void* h = (void*)0x1;
  EXPECT_EQ(ncclCommRegister(nullptr, (void*)0x7f0000100000, 64, &h), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclCommRegister: argument 'comm' is NULL"));
  EXPECT_EQ(ncclCommRegister(&comm, (void*)0x7f0000100000, 64, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "argument 'handle' is NULL"));
  EXPECT_EQ(ncclCommRegister(&comm, nullptr, 64, &h), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "argument 'buff' is NULL"));
  EXPECT_EQ(ncclCommRegister(&comm, (void*)(UINTPTR_MAX - 100), 64, &h), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "end of the address space"));
  EXPECT_EQ(ncclCommRegister(&comm, (void*)0x1000, SIZE_MAX - 10, &h), ncclInvalidArgument) << "a size that wraps";
  EXPECT_EQ(ncclCommRegister(&comm, nullptr, 0, &h), ncclSuccess) << "size 0: nothing to register";
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(ncclCommDeregister(nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(comm.registrations->size(), 0u) << "nothing kept by the refused calls";
}

}  // namespace
}  // namespace weft::core
