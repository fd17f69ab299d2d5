// The Tree AllReduce work runner (device/coll/run_tree.cuh) with the real Simple, LL and LL128
// protocols on the CPU: the arch layer's host emulation runs every GPU thread of a block as an OS thread, ranks'
// blocks run concurrently and talk through host-memory connections on the tree edges, laid out
// as the P2P transport lays them (buffer and tail with the receiver, head with the sender).
// Checks exact results, the warp-group split (one child) and the chained primitives (several
// children), step bookkeeping across items and launches, and freedom from deadlock.
#define WEFT_ARCH_HOST_EMULATION 1
#include "device/coll/run_tree.cuh"
#include "device/kernel_body.cuh"
#include "emu_launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace weft::dev {
namespace {

// Small steps, so that the bigger cases wrap around the kSteps slots: 1024 floats a step
// (Simple) and LL (16-byte lines of 8 payload bytes), 32 lines (LL128).
template <typename P>
constexpr uint32_t stepBytesOf() {
  if constexpr (P::kId == kProtoSimple) return kSimpleMinStepBytes;
  else if constexpr (P::kId == kProtoLL) return 8192;
  else return kLL128MinStepBytes;
}
template <typename P>
constexpr int threadsOf() {
  if constexpr (P::kId == kProtoSimple) return kSimpleThreads;
  else if constexpr (P::kId == kProtoLL) return kLLThreads;
  else return kLL128Threads;
}

using TreeOf = std::vector<DevTree>;  // indexed by rank
using emutest::Works;

DevTree at(int up, int d0 = -1, int d1 = -1, int d2 = -1) { return DevTree{up, {d0, d1, d2}}; }

TreeOf chainOf(const std::vector<int>& order) {
  TreeOf t(order.size(), at(-1));
  for (size_t i = 0; i + 1 < order.size(); i++) {
    t[order[i + 1]].up = order[i];
    t[order[i]].down[0] = order[i + 1];
  }
  return t;
}

// Ranks' device state with a connection each way on every tree edge of every channel, for
// protocol P (coll/run_work.cuh's traits).
template <typename P>
class TreeFabric {
 public:
  explicit TreeFabric(std::vector<TreeOf> trees)
      : trees_(std::move(trees)), n_((int)trees_[0].size()), nCh_((int)trees_.size()),
        peers_(n_, std::vector<std::vector<DevPeer>>(nCh_, std::vector<DevPeer>(n_, DevPeer{}))) {
    for (int c = 0; c < nCh_; c++)
      for (int r = 0; r < n_; r++)
        if (trees_[c][r].up >= 0) {
          connect(c, r, trees_[c][r].up);
          connect(c, trees_[c][r].up, r);
        }
    for (int r = 0; r < n_; r++) {
      comms_.push_back(std::make_unique<DevComm>());
      DevComm& d = *comms_.back();
      d = DevComm{};
      d.rank = r;
      d.nRanks = n_;
      d.nChannels = nCh_;
      d.abortFlag = &abort_;
      for (int c = 0; c < nCh_; c++) {
        d.channels[c].tree = trees_[c][r];
        d.channels[c].peers = peers_[r][c].data();
      }
    }
  }

  int nRanks() const { return n_; }
  int nChannels() const { return nCh_; }

  // One launch: works[r][c] run in order by rank r's block for channel c (no FIFO: the items lie
  // flat). False on a timeout (the abort flag was then raised and every block left).
  bool launch(const Works& works, double seconds) {
    std::vector<DevKernelArgs> args(n_);
    std::vector<std::vector<DevWork>> flat(n_);
    for (int r = 0; r < n_; r++) {
      DevKernelArgs& a = args[r];
      a = DevKernelArgs{};
      a.comm = comms_[r].get();
      a.worksMask = ~0u;
      for (int c = 0; c < nCh_; c++) {
        if (works[r][c].empty()) continue;
        a.blocks[a.nBlocks++] = DevKernelArgs::Block{(uint32_t)flat[r].size(), (uint16_t)works[r][c].size(), (uint8_t)c, 0};
        flat[r].insert(flat[r].end(), works[r][c].begin(), works[r][c].end());
      }
      a.works = flat[r].data();
    }
    using Smem = KernelSmem<typename P::Shared>;
    return emutest::runBlocks<threadsOf<P>(), Smem>(args, &abort_, seconds, [](const DevKernelArgs& a, int b, Smem& smem) {
      kernelBody<threadsOf<P>()>(a, b, smem,
                                 [](const DevWork* w, const WorkEnvT<typename P::Shared>& env) { runItem(*w, env); });
    });
  }

  // Both ends of every connection agree: sender's and receiver's step, tail (Simple only: the
  // flag protocols carry "ready" in the lines) and head.
  std::string checkLinks() const {
    for (int c = 0; c < nCh_; c++)
      for (auto [s, r] : edges_[c]) {
        const ConnInfo& snd = peers_[s][c][r].send;
        const ConnInfo& rcv = peers_[r][c][s].recv;
        const bool tailOk = P::kId != kProtoSimple || *snd.tail == snd.step;
        if (snd.step != rcv.step || !tailOk || *snd.head != snd.step || snd.step == 0)
          return "link " + std::to_string(s) + "->" + std::to_string(r) + " channel " + std::to_string(c) +
                 ": send.step " + std::to_string(snd.step) + " recv.step " + std::to_string(rcv.step);
      }
    return "";
  }

 private:
  static void runItem(const DevWork& w, const WorkEnvT<typename P::Shared>& env) {
    if (w.redOp == kRedPreMulSum) return runTreeAllReduce<FnPreMulSum<float>, P>(w, env);
    if (w.redOp == kRedSumPostDiv) return runTreeAllReduce<FnSumPostDiv<int32_t>, P>(w, env);
    if (w.dataType == kBfloat16) return runTreeAllReduce<FnSum<__nv_bfloat16>, P>(w, env);
    runTreeAllReduce<FnSum<float>, P>(w, env);
  }

  void connect(int c, int s, int r) {
    if (edges_.size() < size_t(nCh_)) edges_.resize(nCh_);
    edges_[c].insert({s, r});
    buffers_.emplace_back(size_t(kSteps) * stepBytesOf<P>() + 128, 0);
    char* buf = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(buffers_.back().data()) + 127) & ~uintptr_t(127));
    // Each counter starts a line of its own, as in the transports' memory (abi.h kCounterLineWords).
    counters_.push_back(std::make_unique<uint64_t[]>(2 * kCounterLineWords));  // zero-filled
    uint64_t* tail = &counters_.back()[0];
    uint64_t* head = &counters_.back()[kCounterLineWords];
    for (ConnInfo* ci : {&peers_[s][c][r].send, &peers_[r][c][s].recv}) {
      ci->buffs[P::kId] = buf;
      ci->stepBytes[P::kId] = (int32_t)stepBytesOf<P>();
      ci->tail = tail;
      ci->head = head;
    }
  }

  std::vector<TreeOf> trees_;
  int n_, nCh_;
  std::vector<std::vector<std::vector<DevPeer>>> peers_;  // [rank][channel][peer]
  std::vector<std::set<std::pair<int, int>>> edges_;      // per channel: (sender, receiver)
  std::vector<std::vector<char>> buffers_;
  std::vector<std::unique_ptr<uint64_t[]>> counters_;
  std::vector<std::unique_ptr<DevComm>> comms_;
  uint32_t abort_ = 0;
};

// One AllReduce: float (or bfloat16) sum, float PreMulSum by 0.5, or int32 SumPostDiv by nRanks;
// small integer inputs, so every result is exact.
struct AllReduceCase {
  uint64_t count;
  int redOp;
  bool inPlace;
  bool bf16 = false;
  std::vector<std::vector<char>> send, recv;
  std::vector<std::vector<int>> inputs;

  template <typename P>
  void add(const TreeFabric<P>& f, Works& works, std::mt19937& rng) {
    const int n = f.nRanks();
    const int eb = bf16 ? 2 : 4;
    for (int r = 0; r < n; r++) {
      send.emplace_back(count * eb + 16, 0);
      recv.emplace_back(count * eb + 16, 0x55);
      inputs.emplace_back(count);
      for (uint64_t i = 0; i < count; i++) {
        int v = int(rng() % 21) - 10;
        inputs[r][i] = v;
        float fv = float(v);
        uint32_t bits;
        std::memcpy(&bits, &fv, 4);
        const uint16_t high = (uint16_t)(bits >> 16);  // small integers are exact in bfloat16
        if (redOp == kRedSumPostDiv) std::memcpy(&send[r][i * 4], &v, 4);
        else if (bf16) std::memcpy(&send[r][i * 2], &high, 2);
        else std::memcpy(&send[r][i * 4], &fv, 4);
      }
      if (inPlace) recv[r] = send[r];
    }
    for (int r = 0; r < n; r++)
      for (int c = 0; c < f.nChannels(); c++) {
        ElemRange part = channelPart(count, f.nChannels(), c, eb);
        if (part.count == 0) continue;
        DevWork w{};
        w.func = kFuncAllReduce;
        w.algo = kAlgoTree;
        w.proto = (uint8_t)P::kId;
        w.redOp = (uint8_t)redOp;
        w.dataType = redOp == kRedSumPostDiv ? kInt32 : bf16 ? kBfloat16 : kFloat32;
        w.recvBuff = recv[r].data();
        w.sendBuff = inPlace ? w.recvBuff : send[r].data();
        w.count = count;
        w.chanOffset = part.offset;
        w.chanCount = part.count;
        // As the planner: Simple's chunk from the part, none for the flag protocols (one step).
        w.chunkElems = P::kId == kProtoSimple ? (uint32_t)treeChunkElems(part.count, eb, stepBytesOf<P>()) : 0;
        w.sendPeer = w.recvPeer = -1;
        if (redOp == kRedPreMulSum) {
          float half = 0.5f;
          std::memcpy(&w.redOpArg, &half, 4);
        }
        if (redOp == kRedSumPostDiv) w.redOpArg = (uint64_t)n;
        works[r][c].push_back(w);
      }
  }

  std::string check(int n) const {
    for (int r = 0; r < n; r++)
      for (uint64_t i = 0; i < count; i++) {
        double want = 0, got;
        for (int q = 0; q < n; q++) want += redOp == kRedPreMulSum ? 0.5 * inputs[q][i] : inputs[q][i];
        if (redOp == kRedSumPostDiv) {
          want = double(int32_t(want) / n);
          int32_t x;
          std::memcpy(&x, &recv[r][i * 4], 4);
          got = x;
        } else if (bf16) {
          uint16_t high;
          std::memcpy(&high, &recv[r][i * 2], 2);
          const uint32_t bits = (uint32_t)high << 16;
          float x;
          std::memcpy(&x, &bits, 4);
          got = x;
        } else {
          float x;
          std::memcpy(&x, &recv[r][i * 4], 4);
          got = x;
        }
        if (got != want)
          return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " + std::to_string(got) +
                 " want " + std::to_string(want);
      }
    return "";
  }
};

// Two launches of several AllReduces each: every item continues the steps the last one saved.
template <typename P>
void runCases(TreeFabric<P>& f, uint64_t seed) {
  std::mt19937 rng(seed);
  for (int launch = 0; launch < 2; launch++) {
    // The flag protocols' emulation spins per line, so they take fewer elements (still several
    // steps per case, and more steps per connection over the test than there are slots).
    const uint64_t scale = P::kId == kProtoSimple ? 1 : 4;
    std::vector<AllReduceCase> cases = {{9001 / scale, kRedSum, launch == 1},
                                        {1, kRedSum, false},
                                        {4099 / scale, kRedPreMulSum, true},
                                        {3000 / scale, kRedSumPostDiv, false},
                                        {2049 / scale, kRedSum, launch == 0, true}};
    Works works(f.nRanks(), std::vector<std::vector<DevWork>>(f.nChannels()));
    for (auto& k : cases) k.add(f, works, rng);
    ASSERT_TRUE(f.launch(works, 60)) << "deadlock, launch " << launch;
    for (auto& k : cases) ASSERT_EQ(k.check(f.nRanks()), "") << "count " << k.count << " op " << k.redOp;
  }
  EXPECT_EQ(f.checkLinks(), "");
}

template <typename P>
class TreeProtoEmu : public ::testing::Test {};
using Protocols = ::testing::Types<SimpleProto, LLProto, LL128Proto>;
class ProtoNames {
 public:
  template <typename P>
  static std::string GetName(int) {
    return P::kId == kProtoSimple ? "Simple" : P::kId == kProtoLL ? "LL" : "LL128";
  }
};
TYPED_TEST_SUITE(TreeProtoEmu, Protocols, ProtoNames);

TYPED_TEST(TreeProtoEmu, ChainsOfTwoToFourRanks) {
  std::mt19937 rng(21);
  for (int n : {2, 3, 4}) {
    std::vector<int> a(n), b(n);
    std::iota(a.begin(), a.end(), 0);
    std::iota(b.begin(), b.end(), 0);
    std::shuffle(b.begin(), b.end(), rng);
    TreeFabric<TypeParam> f({chainOf(a), chainOf(b)});
    SCOPED_TRACE("chain of " + std::to_string(n));
    runCases(f, 100 + n);
  }
}

TYPED_TEST(TreeProtoEmu, BinaryTreeWithTwoChildren) {
  // Channel 0: root 1 with children 0 and 2, and 2 -> {3}: a chain below a two-child root.
  // Channel 1: 0 -> {2, 3}, 2 -> {1}.
  TreeFabric<TypeParam> f({{at(1), at(-1, 0, 2), at(1, 3), at(2)}, {at(-1, 2, 3), at(2), at(0, 1), at(0)}});
  runCases(f, 7);
}

TYPED_TEST(TreeProtoEmu, HeadWithThreeChildren) {
  // A node head with its chain successor and two other nodes' heads below it.
  TreeFabric<TypeParam> f({{at(-1, 1, 2, 4), at(0), at(0, 3), at(2), at(0, 5), at(4)}});
  runCases(f, 9);
}

}  // namespace
}  // namespace weft::dev
