// runtime::MemTally and its scopes: allocations are charged to the communicator setting up on the
// calling thread, for the innermost scope's use; releases charge back wherever they run; memory
// handed out with no scope open is nobody's.
#include "runtime/mem_tally.h"

#include <gtest/gtest.h>

#include <thread>

namespace weft::runtime {
namespace {

// Distinct addresses to stand for allocations (never dereferenced).
char blocks[8];

TEST(MemTally, ChargesTheInnermostScopeAndChargesBackOnRelease) {
  auto comm = std::make_shared<MemTally>();
  {
    MemTallyScope setup(comm, MemUse::kState);
    tallyAllocation(&blocks[0], MemPlace::kPinned, 4096);
    {
      MemTallyScope connections(MemUse::kConnections);
      tallyAllocation(&blocks[1], MemPlace::kGpu, 8 << 20);
      tallyAllocation(&blocks[2], MemPlace::kShared, 1 << 20);
    }
    tallyAllocation(&blocks[3], MemPlace::kGpu, 512);
  }
  EXPECT_EQ(comm->bytes(MemPlace::kGpu), (8 << 20) + 512);
  EXPECT_EQ(comm->bytes(MemPlace::kGpu, MemUse::kConnections), 8 << 20);
  EXPECT_EQ(comm->bytes(MemPlace::kGpu, MemUse::kState), 512);
  EXPECT_EQ(comm->bytes(MemPlace::kPinned, MemUse::kState), 4096);
  EXPECT_EQ(comm->bytes(MemPlace::kShared, MemUse::kConnections), 1 << 20);
  EXPECT_EQ(comm->text(),
            "GPU 8.00 MiB (state 512 B, connections 8.00 MiB), pinned host 4.0 KiB (state 4.0 KiB), /dev/shm 1.00 MiB "
            "(connections 1.00 MiB)");
  EXPECT_EQ(MemTally().text(), "GPU 0 B, pinned host 0 B, /dev/shm 0 B");

  // Released from another thread with no scope (a destroy, a deferred free): still charged back.
  std::thread([] {
    tallyRelease(&blocks[1]);
    tallyRelease(&blocks[2]);
  }).join();
  tallyRelease(&blocks[0]);
  tallyRelease(&blocks[3]);
  for (int p = 0; p < (int)MemPlace::kCount; ++p) EXPECT_EQ(comm->bytes((MemPlace)p), 0) << p;
  EXPECT_EQ(comm->peak(MemPlace::kGpu), (8 << 20) + 512);
  tallyRelease(&blocks[1]);  // twice: nothing left to charge back
  EXPECT_EQ(comm->bytes(MemPlace::kGpu), 0);
}

TEST(MemTally, NoScopeOrNullTallyChargesNobody) {
  auto comm = std::make_shared<MemTally>();
  tallyAllocation(&blocks[4], MemPlace::kGpu, 1 << 20);  // the user's ncclMemAlloc: no scope
  {
    MemTallyScope none(nullptr, MemUse::kState);
    tallyAllocation(&blocks[5], MemPlace::kGpu, 1 << 20);
  }
  {
    MemTallyScope setup(comm, MemUse::kState);
    std::thread([] { tallyAllocation(&blocks[6], MemPlace::kGpu, 1 << 20); }).join();  // scopes are per thread
  }
  EXPECT_EQ(comm->bytes(MemPlace::kGpu), 0);
  tallyRelease(&blocks[4]);
  tallyRelease(&blocks[5]);
  tallyRelease(&blocks[6]);
  EXPECT_EQ(comm->bytes(MemPlace::kGpu), 0);
}

TEST(MemTally, ScopesRestoreTheOuterCommunicator) {
  auto parent = std::make_shared<MemTally>();
  auto child = std::make_shared<MemTally>();
  {
    MemTallyScope outer(parent, MemUse::kState);
    {
      MemTallyScope inner(child, MemUse::kWindows);  // e.g. a split child set up inside a call on the parent
      tallyAllocation(&blocks[0], MemPlace::kGpu, 100);
    }
    tallyAllocation(&blocks[1], MemPlace::kGpu, 200);
  }
  EXPECT_EQ(child->bytes(MemPlace::kGpu, MemUse::kWindows), 100);
  EXPECT_EQ(parent->bytes(MemPlace::kGpu, MemUse::kState), 200);
  tallyRelease(&blocks[0]);
  tallyRelease(&blocks[1]);
}

TEST(MemTally, AReusedAddressReplacesAStaleCharge) {
  auto a = std::make_shared<MemTally>();
  auto b = std::make_shared<MemTally>();
  {
    MemTallyScope s(a, MemUse::kState);
    tallyAllocation(&blocks[7], MemPlace::kGpu, 1000);
  }
  {
    MemTallyScope s(b, MemUse::kState);
    tallyAllocation(&blocks[7], MemPlace::kGpu, 3000);  // its release went uncounted
  }
  EXPECT_EQ(a->bytes(MemPlace::kGpu), 0);
  EXPECT_EQ(b->bytes(MemPlace::kGpu), 3000);
  tallyRelease(&blocks[7]);
  EXPECT_EQ(b->bytes(MemPlace::kGpu), 0);
}

TEST(MemTally, ATallyOutlivesItsCommunicatorForLateReleases) {
  std::weak_ptr<MemTally> seen;
  {
    auto comm = std::make_shared<MemTally>();
    seen = comm;
    MemTallyScope s(comm, MemUse::kConnections);
    tallyAllocation(&blocks[0], MemPlace::kGpu, 64);
  }
  EXPECT_FALSE(seen.expired());  // the charge keeps it until the deferred release comes
  tallyRelease(&blocks[0]);
  EXPECT_TRUE(seen.expired());
}

}  // namespace
}  // namespace weft::runtime
