// The device ring and SendRecv algorithms (device/algo/*.cuh) run on the CPU against a mock
// protocol (mock_prims.h): one thread per (rank, channel), connections of kSteps slots sliced
// exactly as the Simple protocol slices them, a slice taken only when its input is there AND its
// output slot is free (as the device's sync warp does). Checks results, that both ends of every connection cut
// the same slices, that every sent slice is consumed, and that nothing deadlocks.
#include "device/algo/ring.cuh"
#include "device/algo/sendrecv.cuh"
#include "mock_prims.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace weft::dev {
namespace {

constexpr int64_t kPoison = -777777777;

using Fabric = mock::MockFabric;
using mock::MockFn;
using mock::MockPrims;

struct CollCase {
  int func;
  int nRanks;
  int nChannels;
  uint64_t count;
  int root;
  bool inPlace;
  uint64_t chunkElems;
  uint64_t stepBytes;
  MockFn fn;
};

std::string describe(const CollCase& c) {
  return "func " + std::to_string(c.func) + " n " + std::to_string(c.nRanks) + " ch " + std::to_string(c.nChannels) +
         " count " + std::to_string(c.count) + " root " + std::to_string(c.root) + " inPlace " +
         std::to_string(c.inPlace) + " chunk " + std::to_string(c.chunkElems) + " pre " +
         std::to_string(c.fn.pre) + " post " + std::to_string(c.fn.post);
}

// Runs one collective on every rank and channel; returns an empty string or what went wrong.
std::string runCollective(const CollCase& c, std::mt19937& rng) {
  const int n = c.nRanks;
  const uint64_t count = c.count;
  const bool blocks = c.func == kFuncAllGather || c.func == kFuncReduceScatter;
  const uint64_t inLen = c.func == kFuncReduceScatter ? n * count : count;
  const uint64_t outLen = c.func == kFuncAllGather ? n * count : count;
  // Rings: a random order per channel.
  std::vector<std::vector<int32_t>> rings(c.nChannels, std::vector<int32_t>(n));
  for (auto& r : rings) {
    std::iota(r.begin(), r.end(), 0);
    std::shuffle(r.begin(), r.end(), rng);
  }
  std::vector<std::vector<int64_t>> inputs(n), storage(n);
  std::vector<const int64_t*> inPtr(n);
  std::vector<int64_t*> outPtr(n);
  for (int r = 0; r < n; r++) {
    inputs[r].resize(inLen);
    for (auto& v : inputs[r]) v = int64_t(rng() % 2001) - 1000;
    if (!c.inPlace) {
      storage[r].assign(inLen + outLen, kPoison);
      std::copy(inputs[r].begin(), inputs[r].end(), storage[r].begin());
      inPtr[r] = storage[r].data();
      outPtr[r] = storage[r].data() + inLen;
    } else if (c.func == kFuncAllGather) {
      storage[r].assign(outLen, kPoison);
      std::copy(inputs[r].begin(), inputs[r].end(), storage[r].begin() + r * count);
      outPtr[r] = storage[r].data();
      inPtr[r] = outPtr[r] + r * count;
    } else if (c.func == kFuncReduceScatter) {
      storage[r] = inputs[r];
      inPtr[r] = storage[r].data();
      outPtr[r] = storage[r].data() + r * count;
    } else {
      storage[r] = inputs[r];
      inPtr[r] = outPtr[r] = storage[r].data();
    }
  }
  Fabric fabric(n, c.nChannels);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    for (int ch = 0; ch < c.nChannels; ch++) {
      ElemRange part = channelPart(count, c.nChannels, ch, sizeof(int64_t));
      if (part.count == 0) continue;  // the host gives such channels no work item
      threads.emplace_back([&, r, ch, part] {
        const auto& ring = rings[ch];
        int pos = int(std::find(ring.begin(), ring.end(), r) - ring.begin());
        RingArgs a;
        a.rank = r;
        a.nRanks = n;
        a.ringPos = pos;
        a.prev = ring[(pos - 1 + n) % n];
        a.next = ring[(pos + 1) % n];
        a.userRanks = ring.data();
        a.root = c.root;
        a.count = count;
        a.chanOffset = part.offset;
        a.chanCount = part.count;
        a.chunkElems = simpleChunkElems(c.chunkElems, c.stepBytes, sizeof(int64_t));
        a.elemSize = sizeof(int64_t);
        a.inPlace = c.inPlace;
        MockPrims p(&fabric, ch, r, ringUsesRecv(c.func, a) ? a.prev : -1, ringUsesSend(c.func, a) ? a.next : -1,
                    inPtr[r], outPtr[r], c.chunkElems, c.stepBytes, c.fn);
        switch (c.func) {
          case kFuncAllReduce: ringAllReduce(p, a); break;
          case kFuncAllGather: ringAllGather(p, a); break;
          case kFuncReduceScatter: ringReduceScatter(p, a); break;
          case kFuncBroadcast: ringBroadcast(p, a); break;
          case kFuncReduce: ringReduce(p, a); break;
        }
      });
    }
  for (auto& t : threads) t.join();
  if (!fabric.error.empty()) return fabric.error;
  if (!fabric.allConsumed()) return "a sent slice was never received";
  // Reference.
  auto pre = [&](int64_t v) { return c.fn.pre ? v * 3 : v; };
  auto post = [&](int64_t v) { return c.fn.post ? v + 1000 : v; };
  for (int r = 0; r < n; r++) {
    for (uint64_t i = 0; i < outLen; i++) {
      int64_t want;
      switch (c.func) {
        case kFuncAllReduce: {
          int64_t s = 0;
          for (int q = 0; q < n; q++) s += pre(inputs[q][i]);
          want = post(s);
          break;
        }
        case kFuncReduce: {
          if (r != c.root) continue;
          int64_t s = 0;
          for (int q = 0; q < n; q++) s += pre(inputs[q][i]);
          want = post(s);
          break;
        }
        case kFuncReduceScatter: {
          int64_t s = 0;
          for (int q = 0; q < n; q++) s += pre(inputs[q][r * count + i]);
          want = post(s);
          break;
        }
        case kFuncAllGather: want = inputs[i / count][i % count]; break;
        default: want = inputs[c.root][i]; break;
      }
      if (outPtr[r][i] != want)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " +
               std::to_string(outPtr[r][i]) + " want " + std::to_string(want);
    }
    if (c.func == kFuncReduce && r != c.root && !c.inPlace)
      for (uint64_t i = 0; i < outLen; i++)
        if (outPtr[r][i] != kPoison) return "non-root rank " + std::to_string(r) + " wrote its output";
  }
  (void)blocks;
  return "";
}

TEST(RingAlgo, CollectivesMatchReference) {
  std::mt19937 rng(1234);
  int runs = 0;
  for (int func : {int(kFuncAllReduce), int(kFuncAllGather), int(kFuncReduceScatter), int(kFuncBroadcast), int(kFuncReduce)})
    for (int n : {1, 2, 3, 4, 6})
      for (uint64_t count : {0ull, 1ull, 2ull, 7ull, 16ull, 17ull, 95ull, 1000ull, 4099ull})
        for (bool inPlace : {false, true})
          for (uint64_t chunk : {0ull, 5ull, 24ull}) {
            CollCase c{func, n, 1 + int(count % 3), count, int(count % n), inPlace, chunk, 64, MockFn{}};
            bool reduces = func == kFuncAllReduce || func == kFuncReduceScatter || func == kFuncReduce;
            if (reduces) c.fn = MockFn{(count & 1) != 0, (count & 2) != 0 || chunk == 5};
            std::string err = runCollective(c, rng);
            ASSERT_EQ(err, "") << describe(c);
            runs++;
          }
  EXPECT_GT(runs, 1000);
}

TEST(RingAlgo, LargeStepsAndLongRings) {
  std::mt19937 rng(99);
  for (int func : {int(kFuncAllReduce), int(kFuncReduceScatter), int(kFuncAllGather)})
    for (int n : {5, 8}) {
      CollCase c{func, n, 2, 20000, 1, false, 0, 1024, MockFn{true, true}};
      if (func == kFuncAllGather) c.fn = MockFn{};
      ASSERT_EQ(runCollective(c, rng), "") << describe(c);
    }
}

// SendRecv items: per (rank, channel) the items run in order; within an item the send part and
// the receive part run concurrently (separate warp groups on the device).
TEST(RingAlgo, SendRecvPatterns) {
  std::mt19937 rng(7);
  for (int n : {2, 3, 5})
    for (uint64_t count : {1ull, 9ull, 300ull, 5000ull})
      for (int pattern = 0; pattern < 2; pattern++) {  // 0: ring shift, 1: all-to-all in rounds
        const int nCh = 2;
        Fabric fabric(n, nCh);
        std::vector<std::vector<int64_t>> in(n, std::vector<int64_t>(n * count)), out(n, std::vector<int64_t>(n * count, kPoison));
        for (int r = 0; r < n; r++)
          for (auto& v : in[r]) v = int64_t(rng() % 100000);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; r++)
          for (int ch = 0; ch < nCh; ch++)
            threads.emplace_back([&, r, ch] {
              int rounds = pattern == 0 ? 1 : n;
              for (int d = pattern == 0 ? 1 : 0; d < (pattern == 0 ? 2 : rounds); d++) {
                int to = (r + d) % n, from = (r - d + n) % n;
                ElemRange sp = channelPart(count, nCh, ch, 8), rp = sp;
                uint64_t sendBase = to * count, recvBase = from * count;
                uint64_t chunk = 7;
                if (to == r) {
                  MockPrims p(&fabric, ch, r, -1, -1, in[r].data(), out[r].data(), chunk, 64, MockFn{});
                  p2pSelf(p, sendBase + sp.offset, recvBase + rp.offset, sp.count);
                  continue;
                }
                std::thread s([&] {
                  MockPrims p(&fabric, ch, r, -1, to, in[r].data(), nullptr, chunk, 64, MockFn{});
                  p2pSend(p, sendBase + sp.offset, sp.count, chunk);
                });
                MockPrims p(&fabric, ch, r, from, -1, nullptr, out[r].data(), chunk, 64, MockFn{});
                p2pRecv(p, recvBase + rp.offset, rp.count, chunk);
                s.join();
              }
            });
        for (auto& t : threads) t.join();
        ASSERT_EQ(fabric.error, "") << n << " " << count << " " << pattern;
        for (int r = 0; r < n; r++)
          for (int d = pattern == 0 ? 1 : 0; d < (pattern == 0 ? 2 : n); d++) {
            int from = (r - d + n) % n;
            for (uint64_t i = 0; i < count; i++)
              ASSERT_EQ(out[r][from * count + i], in[from][r * count + i]) << n << " " << count << " " << pattern;
          }
      }
}

// A chunk of kSteps/2 slices is the largest a ring can take: the clamp in simpleChunkElems
// keeps even absurd requests deadlock-free.
TEST(RingAlgo, OversizedChunkIsClampedNotDeadlocked) {
  std::mt19937 rng(5);
  CollCase c{kFuncAllReduce, 2, 1, 4096, 0, false, 1u << 30, 64, MockFn{}};
  EXPECT_EQ(runCollective(c, rng), "");
}

// Records the primitive calls an algorithm makes, in order.
struct RecordingPrims {
  std::vector<std::string> calls;
  void add(const char* what, int64_t a, int64_t b, int64_t n) {
    calls.push_back(std::string(what) + "(" + std::to_string(a) + "," + std::to_string(b) + "," +
                    std::to_string(n) + ")");
  }
  void send(int64_t i, int64_t n) { add("send", i, 0, n); }
  void recv(int64_t o, int64_t n) { add("recv", 0, o, n); }
  void recvCopySend(int64_t o, int64_t n) { add("recvCopySend", 0, o, n); }
  void recvReduceSend(int64_t i, int64_t n) { add("recvReduceSend", i, 0, n); }
  void recvReduceCopy(int64_t i, int64_t o, int64_t n) { add("recvReduceCopy", i, o, n); }
  void recvReduceCopySend(int64_t i, int64_t o, int64_t n) { add("recvReduceCopySend", i, o, n); }
  void copySend(int64_t i, int64_t o, int64_t n) { add("copySend", i, o, n); }
  void localCopy(int64_t i, int64_t o, int64_t n) { add("localCopy", i, o, n); }
};

// The arguments of position pos on `ring` (ranks in ring order).
RingArgs ringArgsAt(const std::vector<int32_t>& ring, int pos, int root, uint64_t count, uint64_t chanCount,
                    uint64_t chunk, int elemSize, bool inPlace) {
  const int n = (int)ring.size();
  RingArgs a{};
  a.rank = ring[pos];
  a.nRanks = n;
  a.ringPos = pos;
  a.prev = ring[(pos + n - 1) % n];
  a.next = ring[(pos + 1) % n];
  a.userRanks = ring.data();
  a.root = root;
  a.count = count;
  a.chanOffset = 20;
  a.chanCount = chanCount;
  a.chunkElems = chunk;
  a.elemSize = elemSize;
  a.inPlace = inPlace;
  return a;
}

// Calls body(ring, pos, root) for rings of 1 to 6 ranks in a random order, at every position and root.
template <typename Body>
void forEachRingPlace(unsigned seed, Body&& body) {
  std::mt19937 rng(seed);
  for (int n = 1; n <= 6; n++) {
    std::vector<int32_t> ring(n);
    std::iota(ring.begin(), ring.end(), 0);
    std::shuffle(ring.begin(), ring.end(), rng);
    for (int pos = 0; pos < n; pos++)
      for (int root = 0; root < n; root++) body(ring, pos, root);
  }
}

// ringCopyColl (one loop for both, used by the role-split Simple kernels) makes exactly the calls
// of ringAllGather and ringBroadcast (the loops every other kernel runs), for every rank, ring
// position, root, in-place flag and several chunkings; the mock-protocol tests above check those.
TEST(RingAlgo, OneLoopCopyCollectiveMatchesPerCollectiveLoops) {
  int compared = 0;
  forEachRingPlace(11, [&](const std::vector<int32_t>& ring, int pos, int root) {
    for (int inPlace = 0; inPlace < 2; inPlace++) {
      for (uint64_t chunk : {1ull, 7ull, 64ull, 1000ull}) {
        const RingArgs a = ringArgsAt(ring, pos, root, 300, 130, chunk, 1, inPlace != 0);
        RecordingPrims gather, gatherOne, bcast, bcastOne;
        ringAllGather(gather, a);
        ringCopyColl(gatherOne, a, true);
        ringBroadcast(bcast, a);
        ringCopyColl(bcastOne, a, false);
        ASSERT_EQ(gather.calls, gatherOne.calls) << "AllGather n " << ring.size() << " pos " << pos << " chunk " << chunk;
        ASSERT_EQ(bcast.calls, bcastOne.calls) << "Broadcast n " << ring.size() << " pos " << pos << " root " << root;
        ASSERT_FALSE(gather.calls.empty() && !a.inPlace);
        compared++;
      }
    }
  });
  EXPECT_EQ(compared, 2 * 4 * (1 + 4 + 9 + 16 + 25 + 36));
}

// ringSumColl (the reductions in one loop, for the role-split Simple kernels) makes exactly the
// calls of ringAllReduce, ringReduceScatter and ringReduce.
TEST(RingAlgo, OneLoopReductionMatchesPerCollectiveLoops) {
  int compared = 0;
  forEachRingPlace(12, [&](const std::vector<int32_t>& ring, int pos, int root) {
    for (uint64_t chunk : {1ull, 7ull, 64ull, 1000ull}) {
      for (uint64_t chanCount : {5ull, 130ull, 4099ull}) {
        const RingArgs a = ringArgsAt(ring, pos, root, 5000, chanCount, chunk, 4, false);
        RecordingPrims ar, arOne, rs, rsOne, red, redOne;
        ringAllReduce(ar, a);
        ringSumColl(arOne, a, kFuncAllReduce);
        ringReduceScatter(rs, a);
        ringSumColl(rsOne, a, kFuncReduceScatter);
        ringReduce(red, a);
        ringSumColl(redOne, a, kFuncReduce);
        const std::string where = "n " + std::to_string(ring.size()) + " pos " + std::to_string(pos) + " root " +
                                  std::to_string(root) + " chunk " + std::to_string(chunk);
        ASSERT_EQ(ar.calls, arOne.calls) << "AllReduce " << where;
        ASSERT_EQ(rs.calls, rsOne.calls) << "ReduceScatter " << where;
        ASSERT_EQ(red.calls, redOne.calls) << "Reduce " << where;
        ASSERT_FALSE(ar.calls.empty());
        compared++;
      }
    }
  });
  EXPECT_EQ(compared, 4 * 3 * (1 + 4 + 9 + 16 + 25 + 36));
}

}  // namespace
}  // namespace weft::dev
