// kernelBody (device/kernel_body.cuh) on the CPU emulation: where a block takes its work items
// from (kernel parameters or the FIFO), in what order it runs them, and what it gives back to the
// host afterwards.
#define WEFT_ARCH_HOST_EMULATION 1
#include "device/kernel_body.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::dev {
namespace {

constexpr int kThreads = arch::kDefaultBlockThreads;

struct Seen {
  int block;
  int channel;
  uint64_t count;
  uint64_t stamp;  // the block's word of args.replayStamps while the item ran (0 without them)
};

// Runs every block of `args` with kThreads emulated threads; thread 0 of each block records the
// items it runs (count identifies an item, the channel view's ring index its channel).
std::vector<Seen> runBlocks(const DevKernelArgs& args) {
  std::vector<Seen> seen;
  std::mutex mu;
  std::vector<std::unique_ptr<arch::EmuBlock>> blocks;
  std::vector<std::unique_ptr<FlagKernelSmem>> smems;
  std::vector<std::thread> threads;
  for (uint32_t b = 0; b < args.nBlocks; ++b) {
    blocks.push_back(std::make_unique<arch::EmuBlock>(kThreads));
    smems.push_back(std::make_unique<FlagKernelSmem>());
    arch::EmuBlock* blk = blocks.back().get();
    FlagKernelSmem* smem = smems.back().get();
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, b, t, blk, smem] {
        arch::threadIdx.x = (unsigned)t;
        arch::threadIdx.block = blk;
        kernelBody<kThreads>(args, (int)b, *smem, [&](const DevWork* w, const WorkEnvT<FlagShared>& env) {
          if (arch::threadId() != 0) return;
          std::lock_guard<std::mutex> lock(mu);
          EXPECT_TRUE(env.view->rank == args.comm->rank && env.view->nRanks == args.comm->nRanks &&
                      env.view->p2pSendWarps == args.comm->p2pSendWarps);
          const uint64_t stamp = args.replayStamps ? args.replayStamps[args.blocks[b].channel] : 0;
          seen.push_back({(int)b, env.view->channel.ring.index, w->count, stamp});
        });
      });
    }
  }
  for (std::thread& t : threads) t.join();
  return seen;
}

// Three blocks on channels 5, 0 and 9 with 2, 1 and 3 items; item i has count 100 + i, stored at
// store[(first + i) & mask].
// The communicator marks each channel c with ring index 1000 + c, and its first fields too, to
// check the view every block copies from it (ChannelView).
DevComm* markedComm() {
  static DevComm comm = [] {
    DevComm c{};
    c.rank = 3;
    c.nRanks = 7;
    c.p2pSendWarps = 5;
    for (int ch = 0; ch < kMaxChannels; ++ch) c.channels[ch].ring.index = 1000 + ch;
    return c;
  }();
  return &comm;
}

void threeBlocks(DevKernelArgs& a, DevWork* store, uint32_t first, uint32_t mask) {
  a.comm = markedComm();
  const int counts[3] = {2, 1, 3};
  const uint8_t channels[3] = {5, 0, 9};
  uint32_t pos = first;
  uint64_t item = 0;
  for (int b = 0; b < 3; ++b) {
    a.blocks[b] = DevKernelArgs::Block{pos, (uint16_t)counts[b], channels[b], 0};
    for (int i = 0; i < counts[b]; ++i, ++pos) {
      DevWork w{};
      w.count = 100 + item++;
      store[pos & mask] = w;
    }
  }
  a.nBlocks = 3;
}

void expectThreeBlocks(std::vector<Seen> seen) {
  std::sort(seen.begin(), seen.end(), [](const Seen& x, const Seen& y) { return x.count < y.count; });
  const std::vector<Seen> want = {{0, 1005, 100}, {0, 1005, 101}, {1, 1000, 102},
                                  {2, 1009, 103}, {2, 1009, 104}, {2, 1009, 105}};
  ASSERT_EQ(seen.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(seen[i].block, want[i].block) << "item " << i;
    EXPECT_EQ(seen[i].channel, want[i].channel) << "item " << i;
    EXPECT_EQ(seen[i].count, want[i].count) << "item " << i;
  }
}

TEST(KernelBody, InlineItemsComeFromTheParametersAndNeedNoRelease) {
  DevKernelArgs a{};
  threeBlocks(a, a.inlineWorks, 0, ~0u);
  a.worksInline = 1;
  a.works = nullptr;  // any FIFO read would crash
  expectThreeBlocks(runBlocks(a));
}

TEST(KernelBody, FifoItemsWrapAroundAndTheLastBlockReleasesTheSlots) {
  constexpr uint32_t kSlots = 8;
  std::vector<DevWork> fifo(kSlots);
  DevKernelArgs a{};
  threeBlocks(a, fifo.data(), 5, kSlots - 1);  // slots 5, 6, 7, 0, 1, 2
  a.works = fifo.data();
  a.worksMask = kSlots - 1;
  uint32_t consumed = 0, arrivals = 0;
  a.fifoConsumed = &consumed;
  a.fifoConsumedValue = 11;
  a.blockArrivals = &arrivals;
  expectThreeBlocks(runBlocks(a));
  EXPECT_EQ(consumed, 11u);
  EXPECT_EQ(arrivals, 0u) << "the last block resets the arrival counter for the next launch";
}

TEST(KernelBody, GraphLaunchBlocksStampTheirChannelWhileTheyRun) {
  DevKernelArgs a{};
  threeBlocks(a, a.inlineWorks, 0, ~0u);
  a.worksInline = 1;
  std::vector<uint64_t> stamps(kMaxChannels, 0);
  a.replayStamps = stamps.data();
  const std::vector<Seen> seen = runBlocks(a);
  expectThreeBlocks(seen);
  for (const Seen& s : seen) EXPECT_NE(s.stamp, 0u) << "item " << s.count << " ran without its channel's stamp";
  for (int c = 0; c < kMaxChannels; ++c) EXPECT_EQ(stamps[c], 0u) << "channel " << c << " still looks busy";
  // Without stamps (stream launches), nothing is written: runBlocks reads 0 for every item.
  DevKernelArgs plain{};
  threeBlocks(plain, plain.inlineWorks, 0, ~0u);
  plain.worksInline = 1;
  for (const Seen& s : runBlocks(plain)) EXPECT_EQ(s.stamp, 0u);
}

TEST(KernelBody, InlineCapacityFitsTheKernelParameterLimit) {
  static_assert(sizeof(DevKernelArgs) <= 4096, "CUDA's classic kernel parameter limit");
  EXPECT_GE(kMaxInlineWorks, 32) << "a call of one item on each of 32 channels (mid sizes at 2 ranks) should stay inline";
}

}  // namespace
}  // namespace weft::dev
