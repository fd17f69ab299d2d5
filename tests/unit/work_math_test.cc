// Host tests of the partition/chunk/slice math shared by the planner and the kernels.
#include "device/work_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace weft::dev {
namespace {

const std::vector<uint64_t> kCounts = {0, 1, 2, 3, 7, 15, 16, 17, 31, 255, 256, 257, 1000, 1023,
                                       1024, 1025, 65535, 65536, 65537, 1000003, (1u << 24) + 1};
const std::vector<int> kElemSizes = {1, 2, 4, 8};

TEST(WorkMath, GrainElems) {
  EXPECT_EQ(grainElems(1), 16u);
  EXPECT_EQ(grainElems(2), 8u);
  EXPECT_EQ(grainElems(4), 4u);
  EXPECT_EQ(grainElems(8), 2u);
}

TEST(WorkMath, StepBytesValidity) {
  EXPECT_TRUE(simpleStepBytesValid(512 * 1024));
  EXPECT_TRUE(simpleStepBytesValid(kSimpleMinStepBytes));
  EXPECT_FALSE(simpleStepBytesValid(kSimpleMinStepBytes - 16));
  EXPECT_FALSE(simpleStepBytesValid(512 * 1024 + 8));
  EXPECT_FALSE(simpleStepBytesValid(uint64_t(kSimpleMaxStepBytes) + 16));
}

TEST(WorkMath, ChannelPartsTileTheRangeOnGrains) {
  for (uint64_t count : kCounts)
    for (int es : kElemSizes)
      for (int nCh : {1, 2, 3, 7, 8, 16, 24, 32, 64}) {
        uint64_t next = 0;
        for (int c = 0; c < nCh; c++) {
          ElemRange r = channelPart(count, nCh, c, es);
          ASSERT_EQ(r.offset, next) << count << " " << es << " " << nCh << " " << c;
          if (r.count > 0) {
            ASSERT_EQ(r.offset % grainElems(es), 0u);
          }
          next += r.count;
        }
        ASSERT_EQ(next, count) << count << " " << es << " " << nCh;
      }
}

TEST(WorkMath, ChunkIsClampedToHalfTheSteps) {
  const uint64_t step = 512 * 1024;
  EXPECT_EQ(simpleMaxChunkElems(step, 4), kSteps / 2 * step / 4);
  EXPECT_EQ(simpleChunkElems(0, step, 4), simpleMaxChunkElems(step, 4));
  EXPECT_EQ(simpleChunkElems(1u << 30, step, 4), simpleMaxChunkElems(step, 4));
  EXPECT_EQ(simpleChunkElems(1000, step, 4), 1000u);
  for (int es : kElemSizes) {
    uint64_t chunk = simpleChunkElems(0, step, es);
    uint64_t slice = simpleSliceElems(chunk, step, es);
    EXPECT_EQ(slice * es, step);
    EXPECT_LE(simpleSliceCount(chunk, slice), uint64_t(kSimpleMaxChunkSteps));
    EXPECT_EQ(simpleSliceElems(100, step, es), 100u);  // small chunks: one slice
  }
}

TEST(WorkMath, SlicesNeverExceedAStep) {
  for (uint64_t step : {4096ull, 65536ull, 524288ull, 4194304ull})
    for (int es : kElemSizes)
      for (uint64_t chunk : {0ull, 1ull, 17ull, 4096ull, 1ull << 20, 1ull << 26}) {
        uint64_t c = simpleChunkElems(chunk, step, es);
        uint64_t s = simpleSliceElems(chunk, step, es);
        EXPECT_GE(s, 1u);
        EXPECT_LE(s * es, step);
        EXPECT_LE(s, c);
        EXPECT_LE(simpleSliceCount(c, s), uint64_t(kSimpleMaxChunkSteps));
      }
  EXPECT_EQ(simpleSliceCount(0, 8), 0u);
  EXPECT_EQ(simpleSliceCount(1, 8), 1u);
  EXPECT_EQ(simpleSliceCount(8, 8), 1u);
  EXPECT_EQ(simpleSliceCount(9, 8), 2u);
}

TEST(WorkMath, RecommendedChunkIsBoundedAndAligned) {
  const uint64_t step = 512 * 1024;
  for (int func : {int(kFuncAllReduce), int(kFuncAllGather), int(kFuncBroadcast)})
    for (int n : {2, 3, 8})
      for (uint64_t count : kCounts)
        for (int es : kElemSizes) {
          uint64_t c = recommendedChunkElems(func, n, count, es, step);
          EXPECT_GE(c, 1u);
          EXPECT_LE(c, simpleMaxChunkElems(step, es));
          EXPECT_EQ(c % grainElems(es), 0u);
          if (func == kFuncBroadcast)
            EXPECT_GE(c * es, std::min<uint64_t>(kSimpleMinChunkBytes, simpleMaxChunkElems(step, es) * es));
        }
  EXPECT_EQ(recommendedChunkElems(kFuncAllReduce, 2, 1ull << 28, 4, step), simpleMaxChunkElems(step, 4));
}

// Ring AllReduce/AllGather/ReduceScatter: a rank part of up to one step is one chunk; a larger
// one gets chunks of at least one step. Broadcast/Reduce (chains) keep cutting parts into about
// kSimpleTargetSlices chunks of at least kSimpleMinChunkBytes.
TEST(WorkMath, RingChunksAreWholeRankPartsUpToOneStep) {
  const uint64_t step = 512 * 1024, stepFloats = step / 4;
  // all_reduce of 8 MiB over 32 channels on 2 ranks: 64 Ki floats per channel, 32 Ki per rank part
  EXPECT_EQ(recommendedChunkElems(kFuncAllReduce, 2, 65536, 4, step), 32768u);
  EXPECT_EQ(recommendedChunkElems(kFuncAllGather, 4, 1000, 4, step), 1000u);
  EXPECT_EQ(recommendedChunkElems(kFuncReduceScatter, 8, 1001, 4, step), 1004u);  // grain: 4 floats
  EXPECT_EQ(recommendedChunkElems(kFuncAllReduce, 2, 4 * stepFloats, 4, step), stepFloats);  // 2 steps per rank
  EXPECT_EQ(recommendedChunkElems(kFuncAllReduce, 2, 16 * stepFloats, 4, step), 2 * stepFloats);
  EXPECT_EQ(recommendedChunkElems(kFuncBroadcast, 2, 65536, 4, step), 16384u);
  EXPECT_EQ(recommendedChunkElems(kFuncReduce, 2, 4096, 4, step), kSimpleMinChunkBytes / 4);
  EXPECT_EQ(p2pChunkElems(step, 4), step / 4);
}

// Every element of a channel part belongs to exactly one chunk of one loop; chunks respect the
// chunk size and start on grains.
TEST(WorkMath, RingAllReduceChunksCoverThePartOnce) {
  for (int n : {1, 2, 3, 4, 5, 8, 9})
    for (int es : kElemSizes)
      for (uint64_t chunkElems : {16ull, 64ull, 1000ull, 4096ull})
        for (uint64_t count : kCounts) {
          if (count > 70000) continue;
          std::vector<uint8_t> seen(count, 0);
          for (uint64_t base = 0; base < count; base += uint64_t(n) * chunkElems) {
            uint64_t chunk = ringAllReduceChunk(count, base, chunkElems, n, es);
            ASSERT_LE(chunk, chunkElems);
            ASSERT_GE(chunk, 1u);
            for (int i = 0; i < n; i++) {
              ElemRange r = ringAllReduceChunkRange(count, base, chunk, i);
              ASSERT_LE(r.count, chunk);
              if (r.count > 0 && chunkElems % grainElems(es) == 0) {
                ASSERT_EQ(r.offset % grainElems(es), 0u);
              }
              for (uint64_t e = r.offset; e < r.offset + r.count; e++) {
                ASSERT_LT(e, count);
                ASSERT_EQ(seen[e], 0) << "element " << e << " twice";
                seen[e] = 1;
              }
            }
          }
          for (uint64_t e = 0; e < count; e++) ASSERT_EQ(seen[e], 1) << "element " << e << " missed";
        }
}

TEST(WorkMath, RingChunkIndexFollowsTheRing) {
  for (int n = 1; n <= 9; n++)
    for (int pos = 0; pos < n; pos++) {
      EXPECT_EQ(ringChunkIndex(pos, n - 1, n), pos) << "position completes its own chunk";
      std::vector<int> seen(n, 0);
      for (int k = 0; k < n; k++) {
        int c = ringChunkIndex(pos, k, n);
        ASSERT_GE(c, 0);
        ASSERT_LT(c, n);
        seen[c]++;
        if (k > 0) {
          EXPECT_EQ(c, ringChunkIndex((pos - 1 + n) % n, k - 1, n)) << "receives what prev sent";
        }
      }
      for (int c = 0; c < n; c++) EXPECT_EQ(seen[c], 1);
      for (int k = n; k <= 2 * n - 2; k++)
        EXPECT_EQ(ringChunkIndex(pos, k, n), ringChunkIndex((pos - 1 + n) % n, k - 1, n));
    }
}

}  // namespace
}  // namespace weft::dev
