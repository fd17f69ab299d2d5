// runtime::BlockPool over fake alloc/free functions: blocks are parked and reused by size class and
// domain (device), freed only by trim(), and a pointer the pool never handed out is refused.
#include "runtime/block_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <set>
#include <thread>
#include <vector>

namespace weft::runtime {
namespace {

struct FakeHost {
  std::set<void*> live;
  int allocs = 0;
  int frees = 0;
  BlockPool pool{[this](void** p, size_t bytes) -> Status {
                    *p = std::malloc(bytes);
                    live.insert(*p);
                    ++allocs;
                    return ncclSuccess;
                  },
                  [this](void* p, int) {
                    EXPECT_EQ(live.erase(p), 1u) << "freed a block the fake never made, or twice";
                    std::free(p);
                    ++frees;
                  },
                  4096};
};

TEST(BlockPool, ReleasedBlocksAreReusedBySizeClassAndFreedOnlyByTrim) {
  FakeHost h;
  void* fifo = nullptr;
  void* flag = nullptr;
  ASSERT_EQ(h.pool.acquire(393216, &fifo), ncclSuccess);
  ASSERT_EQ(h.pool.acquire(64, &flag), ncclSuccess);
  EXPECT_EQ(h.allocs, 2);
  EXPECT_EQ(h.pool.inUseBytes(), 393216u + 4096u);
  ASSERT_EQ(h.pool.release(fifo), ncclSuccess);
  ASSERT_EQ(h.pool.release(flag), ncclSuccess);
  EXPECT_EQ(h.frees, 0) << "release must not free: cudaFreeHost would wait for the device";
  EXPECT_EQ(h.pool.parkedBytes(), 393216u + 4096u);
  // The next communicator gets the same blocks back, without a new allocation.
  void* fifo2 = nullptr;
  void* flag2 = nullptr;
  ASSERT_EQ(h.pool.acquire(393216, &fifo2), ncclSuccess);
  ASSERT_EQ(h.pool.acquire(40, &flag2), ncclSuccess);  // same 4 KiB class as 64
  EXPECT_EQ(fifo2, fifo);
  EXPECT_EQ(flag2, flag);
  EXPECT_EQ(h.allocs, 2);
  // Another class is a new block; trim frees the parked ones only.
  void* big = nullptr;
  ASSERT_EQ(h.pool.acquire(393216 + 1, &big), ncclSuccess);
  EXPECT_EQ(h.allocs, 3);
  ASSERT_EQ(h.pool.release(big), ncclSuccess);
  EXPECT_EQ(h.pool.trim(), 1);
  EXPECT_EQ(h.frees, 1);
  EXPECT_EQ(h.live.count(fifo2), 1u);
  ASSERT_EQ(h.pool.release(fifo2), ncclSuccess);
  ASSERT_EQ(h.pool.release(flag2), ncclSuccess);
  EXPECT_EQ(h.pool.trim(), 2);
  EXPECT_TRUE(h.live.empty());
  EXPECT_EQ(h.pool.parkedBytes(), 0u);
  EXPECT_EQ(h.pool.inUseBytes(), 0u);
}

TEST(BlockPool, BlocksOfOneDeviceAreNotHandedToAnother) {
  std::vector<std::pair<void*, int>> freed;
  BlockPool pool([](void** p, size_t bytes) -> Status { *p = std::malloc(bytes); return ncclSuccess; },
                 [&](void* p, int dev) { freed.emplace_back(p, dev); std::free(p); }, 512);
  EXPECT_EQ(pool.sizeClass(1), 512u);
  EXPECT_EQ(pool.sizeClass(513), 1024u);
  EXPECT_EQ(pool.sizeClass(SIZE_MAX - 100), SIZE_MAX) << "rounding up must not wrap to a small class";
  void* a = nullptr;
  ASSERT_EQ(pool.acquire(100, &a, /*domain=*/0), ncclSuccess);
  ASSERT_EQ(pool.release(a), ncclSuccess);
  void* b = nullptr;
  ASSERT_EQ(pool.acquire(100, &b, /*domain=*/1), ncclSuccess);
  EXPECT_NE(b, a) << "device 1 must not get device 0's memory";
  void* c = nullptr;
  ASSERT_EQ(pool.acquire(300, &c, /*domain=*/0), ncclSuccess);
  EXPECT_EQ(c, a);
  ASSERT_EQ(pool.release(b), ncclSuccess);
  ASSERT_EQ(pool.release(c), ncclSuccess);
  EXPECT_EQ(pool.trim(), 2);
  ASSERT_EQ(freed.size(), 2u);
  for (auto& [p, dev] : freed) EXPECT_EQ(dev, p == a ? 0 : 1) << "freed with the device it belongs to";
}

TEST(BlockPool, ForeignOrTwiceReleasedPointersAreRefused) {
  FakeHost h;
  int local = 0;
  EXPECT_EQ(h.pool.release(&local), ncclInternalError);
  EXPECT_EQ(h.pool.release(nullptr), ncclSuccess);
  void* p = nullptr;
  ASSERT_EQ(h.pool.acquire(100, &p), ncclSuccess);
  ASSERT_EQ(h.pool.release(p), ncclSuccess);
  EXPECT_EQ(h.pool.release(p), ncclInternalError) << "a second release would hand the block out twice";
  EXPECT_EQ(h.pool.parkedBytes(), 4096u);
  h.pool.trim();
}

TEST(BlockPool, FailedAllocationLeavesNothingBehind) {
  BlockPool pool([](void**, size_t) -> Status { return ncclUnhandledCudaError; }, [](void*, int) { FAIL(); }, 512);
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(pool.acquire(64, &p), ncclUnhandledCudaError);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(pool.inUseBytes(), 0u);
}

// A split-and-destroy loop from several threads: the pool never holds more blocks than were in use
// at once, and every block is handed to one user at a time.
TEST(BlockPool, ConcurrentUsersNeverShareABlock) {
  std::mutex fakeMu;
  std::set<void*> made;
  BlockPool pool(
      [&](void** p, size_t bytes) -> Status {
        *p = std::malloc(bytes);
        std::lock_guard<std::mutex> l(fakeMu);
        made.insert(*p);
        return ncclSuccess;
      },
      [&](void* p, int) { std::free(p); }, 512);
  std::mutex ownersMu;
  std::set<void*> owned;
  bool shared = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        void* p = nullptr;
        ASSERT_EQ(pool.acquire(8192, &p), ncclSuccess);
        {
          std::lock_guard<std::mutex> l(ownersMu);
          shared = shared || !owned.insert(p).second;
        }
        {
          std::lock_guard<std::mutex> l(ownersMu);
          owned.erase(p);
        }
        ASSERT_EQ(pool.release(p), ncclSuccess);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(shared);
  EXPECT_LE(made.size(), 4u);
  EXPECT_EQ(pool.trim(), (int)made.size());
}

// The SHM transport's mapped segments (their unregister waits for the device) wait while some
// communicator has several ranks in this process, run once none has (or none is left), and run at
// once when every communicator has one rank here (one process per GPU: kernels wait only for other
// processes).
TEST(BlockPool, DeviceWaitingReleasesWaitOnlyWhileAProcessHoldsSeveralRanks) {
  int ran = 0;
  releaseWhenSafe([&] { ++ran; }, 1 << 20);
  EXPECT_EQ(ran, 1) << "nobody counted in: the release should not wait";

  blockPoolUserIn(false);  // one rank per process
  releaseWhenSafe([&] { ++ran; }, 1 << 20);
  EXPECT_EQ(ran, 2) << "no communicator has two ranks here: nothing on the device waits for this thread";
  EXPECT_EQ(releasesWaitingBytes(), 0u);

  blockPoolUserIn(true);  // threads mode: a parent with two ranks here
  blockPoolUserIn(true);  // ... and a split child of it
  releaseWhenSafe([&] { ran += 10; }, 1 << 20);
  releaseWhenSafe([&] { ran += 100; }, 4096);
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(releasesWaitingBytes(), (1u << 20) + 4096u);
  blockPoolUserOut(true);
  EXPECT_EQ(ran, 2) << "the parent still has two ranks here: a kernel may wait for the other one";
  blockPoolUserOut(true);
  EXPECT_EQ(ran, 112) << "no communicator shares the process any more";
  EXPECT_EQ(releasesWaitingBytes(), 0u);

  blockPoolUserIn(true);
  releaseWhenSafe([&] { ran += 1000; }, 4096);
  EXPECT_EQ(ran, 112);
  blockPoolUserOut(true);
  EXPECT_EQ(ran, 1112);
  blockPoolUserOut(false);  // the last one out
  EXPECT_EQ(releasesWaitingBytes(), 0u);
}

// A communicator with several ranks in this process waits to count in while a release runs (it
// could otherwise launch a kernel that waits for a thread stuck behind the release's driver lock);
// one with a single rank here does not.
TEST(BlockPool, SharingCommunicatorsCountInOnlyAfterRunningReleasesEnd) {
  std::promise<void> deviceIdle;
  std::shared_future<void> idle = deviceIdle.get_future().share();
  std::atomic<bool> releaseStarted{false};
  blockPoolUserIn(false);
  std::thread releaser([&] {
    releaseWhenSafe(
        [&, idle] {
          releaseStarted = true;
          idle.wait();  // as cudaHostUnregister waiting for the device
        },
        4096);
  });
  while (!releaseStarted) std::this_thread::yield();

  blockPoolUserIn(false);  // one rank here: no wait
  std::atomic<bool> sharingIn{false};
  std::thread sharing([&] {
    blockPoolUserIn(true);
    sharingIn = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(sharingIn) << "a communicator sharing the process counted in while a release ran";
  deviceIdle.set_value();
  releaser.join();
  sharing.join();
  EXPECT_TRUE(sharingIn);
  blockPoolUserOut(true);
  blockPoolUserOut(false);
  blockPoolUserOut(false);
  EXPECT_EQ(releasesWaitingBytes(), 0u);
}

}  // namespace
}  // namespace weft::runtime
