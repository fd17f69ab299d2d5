// The real Simple protocol, ring/SendRecv algorithms and work runners (proto/, algo/, coll/) on
// the CPU: the arch layer's host emulation turns every GPU thread of a block into an OS thread
// (blocks of 8 warps of 4 threads), with named barriers, shared-memory counters and system-scope
// atomics emulated. Ranks' blocks run concurrently and talk through host-memory connections laid
// out as the host engine lays them (buffers and tails with the receiver, heads with the sender).
// Checks results, the step bookkeeping across items and launches (ConnInfo.step == tail == head
// on both ends of every link), freedom from deadlock, and the abort path.
#define WEFT_ARCH_HOST_EMULATION 1
#include "device/coll/run_special.cuh"
#include "device/kernel_body.cuh"
#include "emu_launch.h"
#include "emu_net_links.h"
#include "enqueue/planner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <string>
#include <vector>

namespace weft::dev {
namespace {

constexpr uint32_t kStep = kSimpleMinStepBytes;  // small steps: many slices, wrapping slots

using emutest::AlignedBytes;
using emutest::Works;

// The ring communicator with Simple buffers only; items run through the ring and SendRecv runners
// with a few functors (kernel_dispatch.cuh's every-type dispatch is flag_proto_test.cc's).
class EmuComm : public emutest::EmuRingComm {
 public:
  EmuComm(int n, int nCh) : EmuRingComm(n, nCh, {0, 0, (int)kStep}) {}

  // Launches every rank that has items: works[rank][channel] go through the rank's work FIFO
  // (64 slots, so successive launches wrap it) to the kernel body, one emulated block per
  // channel with items. False if it did not finish in time (the abort flag was then raised and
  // every block left). Also checks the FIFO-consumed protocol.
  bool launch(const Works& works, double seconds) {
    return EmuRingComm::launch<kSimpleThreads, SimpleShared>(
        works, seconds, [](const DevWork* w, const WorkEnv& env) { runItem(*w, env); });
  }

  // The same, with every item run by the specialized kernel of kind Kind (special_kernels.h),
  // after checking that the host would pick that kernel for each rank's launch.
  // inlineSumBytes: as the host's NCCL_WEFT_INLINE_SUM_BYTES.
  template <int Kind>
  bool launchSpecial(const Works& works, double seconds, uint64_t inlineSumBytes = 0) {
    for (const auto& perRank : works) {
      enqueue::PlannedLaunch launch;
      launch.proto = kProtoSimple;
      launch.works = perRank;
      if (enqueue::specialKernelOfLaunch(launch, inlineSumBytes) != Kind) {
        ADD_FAILURE() << "the host would not run kind " << Kind << " here";
        return false;
      }
    }
    return EmuRingComm::launch<kSimpleThreads, SimpleShared>(
        works, seconds, [](const DevWork* w, const WorkEnv& env) { runSpecialWork<Kind>(w, env); });
  }

  // Both ends of every link agree: sender's and receiver's step, tail and head.
  std::string checkLinks() const { return EmuRingComm::checkLinks(true); }

 private:
  static void runItem(const DevWork& w, const WorkEnv& env) {
    if (w.func == kFuncSendRecv) return runSendRecv(w, env);
    if (w.func == kFuncBroadcast || w.func == kFuncAllGather) return runRingColl<FnCopy>(w, env);
    if (w.redOp == kRedPreMulSum) return runRingColl<FnPreMulSum<float>>(w, env);
    if (w.redOp == kRedSumPostDiv) return runRingColl<FnSumPostDiv<int32_t>>(w, env);
    return runRingColl<FnSum<float>>(w, env);
  }
};

struct Coll {
  Coll(int func, uint64_t count, int root = 0, bool inPlace = false, int redOp = kRedSum, uint64_t chunk = 0)
      : func(func), count(count), root(root), inPlace(inPlace), redOp(redOp), chunk(chunk) {}
  int func;
  uint64_t count;
  int root;
  bool inPlace;
  int redOp;
  uint64_t chunk;  // 0: the recommended chunk
  // Buffers per rank (float for sum/premulsum, int32 for sumpostdiv).
  std::vector<AlignedBytes> in, out;
  std::vector<std::vector<float>> inputs;
};

// Adds a collective's items to works and prepares its buffers (inputs small integers: exact).
void addColl(EmuComm& comm, Coll& k, Works& works, std::mt19937& rng) {
  const int n = comm.nRanks();
  const uint64_t inLen = k.func == kFuncReduceScatter ? n * k.count : k.count;
  const uint64_t outLen = k.func == kFuncAllGather ? n * k.count : k.count;
  for (int r = 0; r < n; r++) {
    k.in.emplace_back(std::max(inLen, outLen) * 4 + 64);
    k.out.emplace_back(std::max(inLen, outLen) * 4 + 64);
    std::vector<float> v(inLen);
    for (auto& x : v) x = float(int(rng() % 21) - 10);
    k.inputs.push_back(v);
    char* inBuf = k.inPlace ? k.out[r].get() + (k.func == kFuncAllGather ? r * k.count * 4 : 0) : k.in[r].get();
    for (uint64_t i = 0; i < inLen; i++) {
      if (k.redOp == kRedSumPostDiv) {
        int32_t x = int32_t(v[i]);
        std::memcpy(inBuf + i * 4, &x, 4);
      } else {
        std::memcpy(inBuf + i * 4, &v[i], 4);
      }
    }
    for (int c = 0; c < comm.nChannels(); c++) {
      ElemRange part = channelPart(k.count, comm.nChannels(), c, 4);
      if (part.count == 0) continue;
      DevWork w{};
      w.func = (uint8_t)k.func;
      w.algo = kAlgoRing;
      w.proto = kProtoSimple;
      w.redOp = (uint8_t)k.redOp;
      w.dataType = k.redOp == kRedSumPostDiv ? kInt32 : kFloat32;
      w.root = k.root;
      w.sendBuff = inBuf;
      char* outBuf = k.inPlace && k.func == kFuncReduceScatter ? inBuf + r * k.count * 4 : k.out[r].get();
      w.recvBuff = k.inPlace && k.func != kFuncReduceScatter ? k.out[r].get() : outBuf;
      w.count = k.count;
      w.chanOffset = part.offset;
      w.chanCount = part.count;
      w.chunkElems = (uint32_t)(k.chunk ? k.chunk : recommendedChunkElems(k.func, n, part.count, 4, kStep));
      w.sendPeer = w.recvPeer = -1;
      if (k.redOp == kRedPreMulSum) {
        float half = 0.5f;
        std::memcpy(&w.redOpArg, &half, 4);
      }
      if (k.redOp == kRedSumPostDiv) w.redOpArg = (uint64_t)n;
      works[r][c].push_back(w);
    }
  }
}

std::string checkColl(const EmuComm& comm, Coll& k) {
  const int n = comm.nRanks();
  for (int r = 0; r < n; r++) {
    const char* out = k.out[r].get() + (k.inPlace && k.func == kFuncReduceScatter ? r * k.count * 4 : 0);
    const uint64_t outLen = k.func == kFuncAllGather ? n * k.count : k.count;
    if (k.func == kFuncReduce && r != k.root) continue;
    for (uint64_t i = 0; i < outLen; i++) {
      double want = 0;
      if (k.func == kFuncBroadcast) want = k.inputs[k.root][i];
      else if (k.func == kFuncAllGather) want = k.inputs[i / k.count][i % k.count];
      else {
        uint64_t j = k.func == kFuncReduceScatter ? r * k.count + i : i;
        for (int q = 0; q < n; q++) want += k.redOp == kRedPreMulSum ? 0.5 * k.inputs[q][j] : k.inputs[q][j];
        if (k.redOp == kRedSumPostDiv) want = double(int32_t(want) / n);
      }
      double got;
      if (k.redOp == kRedSumPostDiv && k.func != kFuncBroadcast && k.func != kFuncAllGather) {
        int32_t x;
        std::memcpy(&x, out + i * 4, 4);
        got = x;
      } else {
        float x;
        std::memcpy(&x, out + i * 4, 4);
        got = x;
      }
      if (got != want)
        return "func " + std::to_string(k.func) + " rank " + std::to_string(r) + " element " + std::to_string(i) +
               ": got " + std::to_string(got) + " want " + std::to_string(want);
    }
  }
  return "";
}

TEST(SimpleProtoEmu, RingCollectivesAcrossLaunches) {
  std::mt19937 rng(11);
  for (int n : {1, 2, 3, 4}) {
    EmuComm comm(n, 2);
    for (int launch = 0; launch < 2; launch++) {
      // Several items per block in one launch: the steps saved by one item feed the next.
      std::vector<Coll> colls = {{kFuncAllReduce, 9001},        {kFuncAllGather, 3001, 0, true},
                                 {kFuncReduceScatter, 2999},    {kFuncBroadcast, 7777, n - 1, launch == 1},
                                 {kFuncReduce, 5003, n / 2},    {kFuncAllReduce, 4099, 0, true, kRedPreMulSum},
                                 {kFuncAllReduce, 1025, 0, false, kRedSumPostDiv, 5},
                                 {kFuncReduceScatter, 1000, 0, true}, {kFuncAllReduce, 1}};
      Works works(n, std::vector<std::vector<DevWork>>(2));
      for (auto& k : colls) addColl(comm, k, works, rng);
      ASSERT_TRUE(comm.launch(works, 60)) << "deadlock with " << n << " ranks, launch " << launch;
      for (auto& k : colls) ASSERT_EQ(checkColl(comm, k), "") << n << " ranks, launch " << launch;
      ASSERT_EQ(comm.checkLinks(), "") << n << " ranks";
    }
    if (n > 1) {
      EXPECT_GT(comm.totalSteps(), 0u);
    }
  }
}

TEST(SimpleProtoEmu, SendRecvAllToAllWithSelf) {
  EmuComm comm(3, 2);
  emutest::AllToAll a2a(3, 2, 5000, 0, 0, 1000);  // 5000 bytes per pair, chunks of 1000
  ASSERT_TRUE(comm.launch(a2a.works, 60));
  EXPECT_EQ(a2a.check(), "");
  EXPECT_EQ(comm.checkLinks(), "");
}

// The specialized Simple kernels' runners (kernel_special_simple.cu): results, and links that the
// general kernel continues from. Float sums (AllReduce, Reduce, ReduceScatter), copies (Broadcast,
// AllGather) and SendRecv, each as a launch of its own kind (the sums with outlined slice copies
// and, as their twin for small items, inlined; the others inlined: specialKernelOutlinesCopies).
TEST(SimpleProtoEmu, SpecializedKernelsMatchTheGeneralOne) {
  std::mt19937 rng(23);
  for (int n : {1, 2, 3}) {
    EmuComm comm(n, 2);
    const std::string ranks = std::to_string(n) + " ranks";
    Works works;
    for (bool inlined : {false, true}) {
      const std::string what = (inlined ? "inlined sums, " : "sums, ") + ranks;
      std::vector<Coll> sums = {{kFuncAllReduce, 9001}, {kFuncReduce, 5003, n / 2, true}, {kFuncReduceScatter, 2999},
                                {kFuncAllReduce, 4099, 0, true}, {kFuncReduceScatter, 1000, 0, true}};
      works.assign(n, std::vector<std::vector<DevWork>>(2));
      for (auto& k : sums) addColl(comm, k, works, rng);
      const bool done = inlined ? comm.launchSpecial<kSpecialRingSumInlineF32>(works, 60, 1 << 20)
                                : comm.launchSpecial<kSpecialRingSumF32>(works, 60);
      ASSERT_TRUE(done) << "deadlock, " << what;
      for (auto& k : sums) ASSERT_EQ(checkColl(comm, k), "") << what;
    }

    std::vector<Coll> copies = {{kFuncAllGather, 3001, 0, true}, {kFuncBroadcast, 7777, n - 1},
                                {kFuncAllGather, 1001}, {kFuncBroadcast, 333, 0, true}};
    works.assign(n, std::vector<std::vector<DevWork>>(2));
    for (auto& k : copies) addColl(comm, k, works, rng);
    ASSERT_TRUE((comm.launchSpecial<kSpecialRingCopy>(works, 60))) << "deadlock, copies, " << ranks;
    for (auto& k : copies) ASSERT_EQ(checkColl(comm, k), "") << "copies, " << ranks;

    emutest::AllToAll a2a(n, 2, 5000, 3, 1, 1000);  // unaligned on both sides
    ASSERT_TRUE((comm.launchSpecial<kSpecialSendRecv>(a2a.works, 60))) << "deadlock, alltoall, " << ranks;
    ASSERT_EQ(a2a.check(), "") << ranks;
    ASSERT_EQ(comm.checkLinks(), "") << ranks;

    // The general kernel continues on the steps the specialized ones saved.
    std::vector<Coll> after = {{kFuncAllReduce, 1025, 0, false, kRedSumPostDiv, 5}, {kFuncAllGather, 99}};
    works.assign(n, std::vector<std::vector<DevWork>>(2));
    for (auto& k : after) addColl(comm, k, works, rng);
    ASSERT_TRUE(comm.launch(works, 60)) << "deadlock, general kernel after the specialized ones, " << ranks;
    for (auto& k : after) ASSERT_EQ(checkColl(comm, k), "") << "general kernel after, " << ranks;
    ASSERT_EQ(comm.checkLinks(), "") << ranks;
  }
}

// Zero-copy (algo/p2p_direct.cuh): a registered receive part that the sender finds among its
// slots lands directly (one step at each end); an unknown token, a sender without the flag and a
// part below one step go through the slots; both kinds alternate on the same links.
TEST(SimpleProtoEmu, RegisteredReceivesLandDirectly) {
  EmuComm comm(2, 1);
  const uint64_t bytes = 5 * kStep + 123, lead = 16;  // each receive buffer starts 16 bytes into its registration
  std::vector<AlignedBytes> in, reg;
  for (int r = 0; r < 2; ++r) {
    in.emplace_back(bytes);
    reg.emplace_back(bytes + lead);
  }
  const uint64_t token[2] = {0x7765000000000011ull, 0x7765000000000022ull};
  DevRegSlot slots[2][kMaxPeerRegs] = {};  // slots[s]: what rank s maps of its peer's registrations
  for (int s = 0; s < 2; ++s) {
    slots[s][3 + s] = DevRegSlot{(uint64_t)(uintptr_t)reg[1 - s].get(), bytes + lead, token[1 - s]};
    comm.setSendRegs(0, s, 1 - s, slots[s]);
  }
  struct Case {
    const char* what;
    bool flag;
    bool knownToken;
    uint64_t bytes;
    bool direct;
  };
  const Case cases[] = {{"direct", true, true, bytes, true},
                        {"a token the sender has not mapped", true, false, bytes, false},
                        {"a sender without the flag", false, true, bytes, false},
                        {"below one step", true, true, kStep / 2, false},
                        {"direct after staged", true, true, bytes, true},
                        {"direct again", true, true, bytes - 7, true}};
  uint64_t directBefore = 0;
  for (int k = 0; k < 6; ++k) {
    const Case& c = cases[k];
    Works works(2, std::vector<std::vector<DevWork>>(1));
    for (int r = 0; r < 2; ++r) {
      for (uint64_t i = 0; i < c.bytes; ++i) in[r].get()[i] = (uint8_t)(i * 13 + (uint64_t)r * 7 + (uint64_t)k);
      std::memset(reg[r].get(), 0xee, bytes + lead);
      DevWork w{};
      w.func = kFuncSendRecv;
      w.proto = kProtoSimple;
      w.dataType = kUint8;
      w.flags = c.flag ? kWorkFlagDirectSend : 0;
      w.sendPeer = w.recvPeer = 1 - r;
      w.sendBuff = in[r].get();
      w.recvBuff = reg[r].get() + lead;
      w.chanCount = w.recvCount = c.bytes;
      w.chunkElems = (uint32_t)p2pChunkElems(kStep, 1);
      w.redOpArg = c.knownToken ? token[r] : 0x7765000000000099ull;
      w.count = lead;
      works[r][0].push_back(w);
    }
    ASSERT_TRUE(comm.launch(works, 20)) << "deadlock: " << c.what;
    for (int r = 0; r < 2; ++r) {
      for (uint64_t i = 0; i < c.bytes; ++i)
        ASSERT_EQ((uint8_t)reg[r].get()[lead + i], (uint8_t)(i * 13 + (uint64_t)(1 - r) * 7 + (uint64_t)k))
            << c.what << ": rank " << r << " byte " << i;
      ASSERT_EQ((uint8_t)reg[r].get()[lead - 1], 0xee) << c.what << ": a byte before the part was written";
      if (c.bytes < bytes) ASSERT_EQ((uint8_t)reg[r].get()[lead + c.bytes], 0xee) << c.what << ": a byte after the part";
    }
    const uint64_t direct = comm.directParts(0, 0, 1) + comm.directParts(0, 1, 0);
    EXPECT_EQ(direct - directBefore, c.direct ? 2u : 0u) << c.what;
    directBefore = direct;
    ASSERT_EQ(comm.checkLinks(), "") << c.what;
  }
}

TEST(SimpleProtoEmu, AbortEndsAWaitForASilentPeer) {
  EmuComm comm(2, 1);
  AlignedBytes out(1 << 16);
  Works works(2, std::vector<std::vector<DevWork>>(1));
  DevWork w{};
  w.func = kFuncSendRecv;
  w.proto = kProtoSimple;
  w.dataType = kUint8;
  w.sendPeer = -1;
  w.recvPeer = 1;
  w.recvBuff = out.get();
  w.recvCount = 40000;
  w.chunkElems = 8192;
  works[0][0].push_back(w);  // rank 1 never sends
  EXPECT_FALSE(comm.launch(works, 0.1));  // and every block left after the abort
}

TEST(SimpleProtoEmu, RingCollectivesThroughNetworkProxies) {
  std::mt19937 rng(12);
  const int n = 3;
  EmuComm comm(n, 2);
  std::atomic<int> failures{0};
  emutest::ProxiedLinks links(comm, [&](int) { failures++; });
  for (int launch = 0; launch < 2; launch++) {
    // Sizes that leave partial last steps, and a single element (an 4-byte step).
    std::vector<Coll> colls = {{kFuncAllReduce, 9001},     {kFuncAllGather, 3001, 0, true},
                               {kFuncReduceScatter, 2999}, {kFuncBroadcast, 7777, n - 1},
                               {kFuncReduce, 5003, 1},     {kFuncAllReduce, 1}};
    Works works(n, std::vector<std::vector<DevWork>>(2));
    for (auto& k : colls) addColl(comm, k, works, rng);
    ASSERT_TRUE(comm.launch(works, 60)) << "deadlock in launch " << launch;
    for (auto& k : colls) ASSERT_EQ(checkColl(comm, k), "") << "launch " << launch;
    ASSERT_TRUE(links.settle()) << comm.checkLinks();
  }
  emutest::AllToAll a2a(n, 2, 5000, 3, 1, 1000);
  ASSERT_TRUE(comm.launch(a2a.works, 60));
  EXPECT_EQ(a2a.check(), "");
  ASSERT_TRUE(links.settle()) << comm.checkLinks();
  EXPECT_GT(links.stepsReceived(), 0u);
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace weft::dev
