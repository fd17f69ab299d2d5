// The Tree AllReduce (device/algo/tree.cuh) on the CPU against a mock protocol (mock_prims.h).
// As on the device, every (rank, channel) runs the algorithm in two threads: one plays the warps
// of the whole block and of the reduce-up group, the other those of the broadcast-down group,
// each executing only the primitives of its own groups, concurrently. Connections hold kSteps
// slices sliced as Simple slices them; a slice moves only when its input is there and its output
// slot is free. Checks exact results, that both ends of a connection cut the same slices, that
// every slice is consumed, and that nothing deadlocks: chains (one node), and chains joined by
// the double binary tree (several nodes, heads with up to three children).
// Note: each FakeUse call builds and drops its own MockPrims; the device's per-group barrier
// between objects has no counterpart here (the fake keeps no per-object step state).
#include "device/algo/tree.cuh"
#include "mock_prims.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "graph/channels.h"

namespace weft::dev {
namespace {

constexpr int64_t kUnset = -99999999;

using mock::MockFabric;
using mock::MockPrims;
using Ops = mock::MockFn;  // pre: the own input times 3 (PreMulSum); post: the result plus 1000 (SumPostDiv)

// One thread's view of treeAllReduce's `use`: runs the primitives of the groups it plays.
struct FakeUse {
  MockFabric* wires;
  int ch, rank;
  bool playsUpAndAll;  // else: plays the Down group
  const int64_t* in;
  int64_t* out;
  uint64_t chunk, stepBytes;
  Ops ops;
  template <typename Body>
  void operator()(int group, int from, int to, int role, bool inputIsOutput, Body&& body) {
    if ((group == kTreeGroupDown) == playsUpAndAll) return;
    Ops r{ops.pre && (role == kTreeFnFull || role == kTreeFnFirst), ops.post && (role == kTreeFnFull || role == kTreeFnLast)};
    MockPrims p(wires, ch, rank, from, to, inputIsOutput ? out : in, out, chunk, stepBytes, r);
    body(p);
  }
};

using Tree = std::vector<DevTree>;  // indexed by rank

DevTree node(int up, int d0 = -1, int d1 = -1, int d2 = -1) { return DevTree{up, {d0, d1, d2}}; }

Tree chain(const std::vector<int>& order) {
  Tree t(order.size(), node(-1));
  for (size_t i = 0; i < order.size(); i++) {
    if (i > 0) t[order[i]].up = order[i - 1];
    if (i + 1 < order.size()) t[order[i]].down[0] = order[i + 1];
  }
  return t;
}

// nHosts chains of `perHost` ranks (host h holds ranks h*perHost...), heads joined by the double
// binary tree `variant` as graph/channels.cc joins them: head children after its chain successor.
Tree multiNode(int nHosts, int perHost, int variant) {
  std::vector<int> order(nHosts * perHost);
  std::iota(order.begin(), order.end(), 0);
  Tree t = chain(order);
  for (int h = 0; h < nHosts; h++) t[h * perHost].up = -1;  // cut the chain at host boundaries
  for (int h = 0; h + 1 < nHosts; h++) t[h * perHost + perHost - 1].down[0] = -1;
  for (int h = 0; h < nHosts; h++) {
    int up, d0, d1;
    graph::doubleBinaryTree(nHosts, h, variant, &up, &d0, &d1);
    DevTree& head = t[h * perHost];
    if (up >= 0) head.up = up * perHost;
    int k = head.down[0] >= 0 ? 1 : 0;
    if (d0 >= 0) head.down[k++] = d0 * perHost;
    if (d1 >= 0) head.down[k++] = d1 * perHost;
  }
  return t;
}

struct Case {
  std::vector<Tree> trees;  // per channel
  uint64_t count;
  uint64_t chunk;           // 0: the largest
  uint64_t stepBytes;
  Ops ops;
  bool inPlace;
};

std::string run(const Case& k, std::mt19937& rng) {
  const int n = (int)k.trees[0].size();
  const int nCh = (int)k.trees.size();
  std::vector<std::vector<int64_t>> input(n), mem(n);
  std::vector<const int64_t*> in(n);
  std::vector<int64_t*> out(n);
  for (int r = 0; r < n; r++) {
    input[r].resize(k.count);
    for (auto& v : input[r]) v = int64_t(rng() % 2001) - 1000;
    mem[r] = input[r];
    if (!k.inPlace) mem[r].resize(2 * k.count, kUnset);
    in[r] = mem[r].data();
    out[r] = mem[r].data() + (k.inPlace ? 0 : k.count);
  }
  MockFabric wires(n, nCh);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    for (int c = 0; c < nCh; c++) {
      ElemRange part = channelPart(k.count, nCh, c, sizeof(int64_t));
      if (part.count == 0) continue;
      for (bool upAndAll : {true, false}) {
        threads.emplace_back([&, r, c, part, upAndAll] {
          const DevTree& t = k.trees[c][r];
          TreeArgs a;
          a.up = t.up;
          a.nDown = 0;
          for (int j = 0; j < kMaxTreeArity; j++) {
            a.down[j] = t.down[j];
            if (t.down[j] >= 0) a.nDown = j + 1;
          }
          a.chanOffset = part.offset;
          a.chanCount = part.count;
          a.chunkElems = simpleChunkElems(k.chunk, k.stepBytes, sizeof(int64_t));
          FakeUse use{&wires, c, r, upAndAll, in[r], out[r], a.chunkElems, k.stepBytes, k.ops};
          treeAllReduce(use, a);
        });
      }
    }
  for (auto& t : threads) t.join();
  if (!wires.error.empty()) return wires.error;
  if (!wires.allConsumed()) return "slices left on a connection";
  for (int r = 0; r < n; r++)
    for (uint64_t i = 0; i < k.count; i++) {
      int64_t want = 0;
      for (int q = 0; q < n; q++) want += k.ops.pre ? 3 * input[q][i] : input[q][i];
      if (k.ops.post) want += 1000;
      if (out[r][i] != want)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": " + std::to_string(out[r][i]) +
               " != " + std::to_string(want);
    }
  return "";
}

TEST(TreeAlgo, ChainsOfOneToFiveRanks) {
  std::mt19937 rng(3);
  int runs = 0;
  for (int n : {1, 2, 3, 4, 5})
    for (uint64_t count : {1ull, 7ull, 16ull, 100ull, 1000ull, 4099ull})
      for (uint64_t chunk : {0ull, 5ull, 24ull})
        for (bool inPlace : {false, true}) {
          Case k{{}, count, chunk, 64, Ops{(count & 1) != 0, chunk == 5}, inPlace};
          for (int c = 0; c < 1 + int(count % 3); c++) {
            std::vector<int> order(n);
            std::iota(order.begin(), order.end(), 0);
            std::shuffle(order.begin(), order.end(), rng);
            k.trees.push_back(chain(order));
          }
          ASSERT_EQ(run(k, rng), "") << "n " << n << " count " << count << " chunk " << chunk << " inPlace " << inPlace;
          runs++;
        }
  EXPECT_GT(runs, 150);
}

TEST(TreeAlgo, BinaryTreeWithTwoChildren) {
  std::mt19937 rng(5);
  // Root 1 with children 0 and 2; a deeper one: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5}.
  std::vector<Tree> shapes = {{node(1), node(-1, 0, 2), node(1)},
                              {node(-1, 1, 2), node(0, 3, 4), node(0, 5), node(1), node(1), node(2)}};
  for (const Tree& t : shapes)
    for (uint64_t count : {1ull, 33ull, 999ull, 5000ull})
      for (int opsKind = 0; opsKind < 4; opsKind++) {
        Case k{{t, t}, count, 16, 64, Ops{(opsKind & 1) != 0, (opsKind & 2) != 0}, opsKind == 3};
        ASSERT_EQ(run(k, rng), "") << "ranks " << t.size() << " count " << count << " ops " << opsKind;
      }
}

TEST(TreeAlgo, ChainsJoinedByTheDoubleBinaryTree) {
  std::mt19937 rng(8);
  for (int nHosts : {2, 3, 4, 5})
    for (int perHost : {1, 2, 3}) {
      // Channel 0 uses the first binary tree, channel 1 the second (as the channel plan does).
      Case k{{multiNode(nHosts, perHost, 0), multiNode(nHosts, perHost, 1)}, 3001, 40, 128, Ops{true, true}, false};
      int maxChildren = 0;
      for (const Tree& t : k.trees)
        for (const DevTree& d : t) maxChildren = std::max(maxChildren, int(d.down[0] >= 0) + int(d.down[1] >= 0) + int(d.down[2] >= 0));
      if (nHosts >= 4 && perHost >= 2) EXPECT_EQ(maxChildren, 3) << "heads have a chain child and two hosts";
      ASSERT_EQ(run(k, rng), "") << nHosts << " hosts x " << perHost;
    }
}

// The largest chunk (kSteps/2 slices) on a long chain: no deadlock, and every slice pipelines.
TEST(TreeAlgo, LargeChunksOnALongChain) {
  std::mt19937 rng(13);
  std::vector<int> order(8);
  std::iota(order.begin(), order.end(), 0);
  Case k{{chain(order)}, 20000, 1u << 30, 256, Ops{false, false}, true};
  EXPECT_EQ(run(k, rng), "");
}

}  // namespace
}  // namespace weft::dev
