// The Direct algorithms (algo/direct.cuh, coll/run_direct.cuh) through the LL kernel's body and
// dispatch on the CPU (arch host emulation: each GPU thread an OS thread, see
// simple_proto_test.cc), with every rank connected to every other on every channel as the P2P
// transport lays it out. Checks one-shot and two-shot AllReduce and AllGather on 2, 3 and 4 ranks
// against a host reference (every element, many types and reductions, counts 0, 1, odd and over
// several steps, in place and shifted buffers), bit-identical float results on every rank, the
// step counters (Ring LL and Simple work after Direct work on the same connections), LL's slot
// wipe window, and abort.
#define WEFT_ARCH_HOST_EMULATION 1
#include "emu_dispatch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace weft::dev {
namespace {

// Small steps: a few hundred bytes of payload, so modest counts already take several steps and
// the 8-slot ring wraps. LL: 512 B steps (256 B payload).
constexpr int kStepBytes[kNumProtos] = {512, 4096, (int)kSimpleMinStepBytes};

using namespace emutest;  // AlignedBytes, Works, DispatchComm and the element values

// n ranks, nCh channels, connections between every pair on every channel (the Direct algorithms
// use every one of them; the rings, for Ring items, are emu_launch.h's).
class MeshComm : public emutest::DispatchComm {
 public:
  MeshComm(int n, int nCh, uint64_t firstStep = 0, int llStepBytes = kStepBytes[0])
      : DispatchComm(n, nCh, {llStepBytes, kStepBytes[1], kStepBytes[2]}, firstStep) {}

  // Both ends of every connection agree on the step, head says every step was consumed, and the
  // tail (moved by Simple steps only) never leads.
  std::string checkLinks() const { return DispatchComm::checkLinks(false); }
};

// One collective on every rank: buffers, inputs and the work items (a part per channel).
struct Coll {
  int func = kFuncAllReduce;
  int algo = kAlgoDirect;
  bool twoShot = false;
  int type = kFloat32;
  int op = kRedSum;
  uint64_t count = 0;
  bool inPlace = false;
  int shift = 0;              // bytes added to both buffers' 128-byte aligned addresses
  bool randomFloats = false;  // arbitrary float inputs: only cross-rank bit equality is checked
  float scalar = 0;           // PreMulSum with randomFloats: this scalar (inexact products) instead of scalarOf
  std::vector<AlignedBytes> in, out;
  std::vector<std::vector<double>> inputs;
  std::vector<char*> recvPtr;
};

Coll direct(int func, int type, int op, uint64_t count, bool twoShot = false, bool inPlace = false, int shift = 0) {
  Coll k;
  k.func = func;
  k.type = type;
  k.op = op;
  k.count = count;
  k.twoShot = twoShot;
  k.inPlace = inPlace;
  k.shift = shift;
  return k;
}

void addColl(const MeshComm& comm, Coll& k, Works& works, std::mt19937& rng) {
  const int n = comm.nRanks();
  const uint64_t es = (uint64_t)dataTypeBytes(k.type);
  const uint64_t outLen = k.func == kFuncAllGather ? n * k.count : k.count;
  const uint64_t bytes = outLen * es + 64;
  for (int r = 0; r < n; r++) {
    k.in.emplace_back(bytes);
    k.out.emplace_back(bytes);
    std::memset(k.out[r].get(), 0x5a, bytes);
    std::vector<double> v(k.count);
    for (auto& x : v) {
      if (k.randomFloats) x = std::ldexp(double(rng() % 2000001) - 1000000.0, -int(rng() % 24));
      else x = isUnsigned(k.type) ? double(rng() % 5) : double(int(rng() % 5) - 2);
    }
    k.inputs.push_back(v);
    char* outBase = k.out[r].get() + k.shift;
    char* inBuf = k.inPlace ? outBase + (k.func == kFuncAllGather ? r * k.count * es : 0) : k.in[r].get() + k.shift;
    for (uint64_t i = 0; i < k.count; i++) putValue(k.type, v[i], inBuf + i * es);
    k.recvPtr.push_back(outBase);
    for (int c = 0; c < comm.nChannels(); c++) {
      ElemRange part = channelPart(k.count, comm.nChannels(), c, (int)es);
      if (part.count == 0) continue;
      DevWork w{};
      w.func = (uint8_t)k.func;
      w.algo = (uint8_t)k.algo;
      w.flags = k.twoShot ? kWorkFlagTwoShot : 0;
      w.redOp = (uint8_t)k.op;
      w.dataType = (uint8_t)k.type;
      w.sendBuff = inBuf;
      w.recvBuff = outBase;
      w.count = k.count;
      w.chanOffset = part.offset;
      w.chanCount = part.count;
      w.sendPeer = w.recvPeer = -1;
      w.redOpArg = redOpArgOf(k.op, k.type, n);
      if (k.scalar != 0) std::memcpy(&w.redOpArg, &k.scalar, sizeof(k.scalar));
      works[r][c].push_back(w);
    }
  }
}

std::string describe(const Coll& k) {
  return std::string(k.func == kFuncAllGather ? "AllGather" : k.twoShot ? "two-shot" : "one-shot") + " type " +
         std::to_string(k.type) + " op " + std::to_string(k.op) + " count " + std::to_string(k.count) +
         (k.inPlace ? " in place" : "") + " shift " + std::to_string(k.shift);
}

// Every output element against the host reference; nothing written past the output; with
// randomFloats, the same bits on every rank.
std::string checkColl(const MeshComm& comm, const Coll& k) {
  const int n = comm.nRanks();
  const uint64_t es = (uint64_t)dataTypeBytes(k.type);
  const uint64_t outLen = k.func == kFuncAllGather ? n * k.count : k.count;
  for (int r = 0; r < n; r++) {
    if (k.randomFloats) {
      if (std::memcmp(k.recvPtr[r], k.recvPtr[0], outLen * es) != 0)
        return describe(k) + ": rank " + std::to_string(r) + " differs from rank 0";
      continue;
    }
    for (uint64_t i = 0; i < outLen; i++) {
      double want = 0;
      if (k.func == kFuncAllGather) {
        want = k.inputs[i / k.count][i % k.count];
      } else {
        want = reduceRef(k.op, k.type, k.inputs, i);
      }
      const double got = getValue(k.type, k.recvPtr[r] + i * es);
      if (got != want)
        return describe(k) + " rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " +
               std::to_string(got) + " want " + std::to_string(want);
    }
    const char* end = k.recvPtr[r] + outLen * es;
    for (int b = 0; b < 16; b++)
      if ((uint8_t)end[b] != 0x5a) return describe(k) + " rank " + std::to_string(r) + ": byte past the output written";
  }
  return "";
}

// Runs colls as one LL launch and checks them and the links.
void runAndCheck(MeshComm& comm, std::vector<Coll>& colls, std::mt19937& rng, const std::string& what) {
  Works works(comm.nRanks(), std::vector<std::vector<DevWork>>(comm.nChannels()));
  for (auto& k : colls) addColl(comm, k, works, rng);
  for (auto& perRank : works)
    for (auto& list : perRank) ASSERT_LE(list.size(), (size_t)kMaxWorksPerChannel);
  ASSERT_TRUE(comm.launch<LLProto>(works, 120)) << "deadlock: " << what;
  for (auto& k : colls) ASSERT_EQ(checkColl(comm, k), "") << what;
  ASSERT_EQ(comm.checkLinks(), "") << what;
}

// Types and reductions the cases below cycle through (every type, every reduction, somewhere).
const int kTypes[] = {kInt8, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16, kFloat32,
                      kFloat64, kBfloat16, kFloat8e4m3, kFloat8e5m2};

// One launch per rank count with AllReduce items of every type and reduction (one-shot or
// two-shot), counts 1, odd and over several steps, in place and shifted, on two channels.
void allReduceCases(bool twoShot) {
  std::mt19937 rng(twoShot ? 11 : 7);
  for (int n : {2, 3, 4}) {
    MeshComm comm(n, 2);
    std::vector<Coll> colls;
    int i = 0;
    for (int t : kTypes)
      for (int op = 0; op < kNumRedOps; op++) {
        if (op == kRedSumPostDiv && isFloat(t)) continue;
        if ((i++ + n) % 3) continue;  // a third of the pairs per rank count: together they cover all
        // Counts: 1, odd, and (types of 1-2 bytes) past several 256-byte steps per channel.
        const uint64_t count = (t + op) % 3 == 0 ? 1 : (t + op) % 3 == 1 ? 37 : 701;
        colls.push_back(direct(kFuncAllReduce, t, op, count, twoShot, (t + op) % 4 == 0, (op % 2) * dataTypeBytes(t)));
      }
    colls.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 1999, twoShot, false, 4));  // 8 steps and more
    colls.push_back(direct(kFuncAllReduce, kInt32, kRedSum, 3, twoShot));  // fewer elements than ranks x grain
    Coll random = direct(kFuncAllReduce, kFloat32, kRedSum, 515, twoShot);
    random.randomFloats = true;
    colls.push_back(std::move(random));
    Coll randomHalf = direct(kFuncAllReduce, kFloat16, kRedSum, 333, twoShot, true);
    randomHalf.randomFloats = true;
    colls.push_back(std::move(randomHalf));
    // An inexact scalar: a fused multiply-add on one rank and a rounded product on the other
    // would give different bits (two ranks combine each other's values, coll/run_direct.cuh).
    Coll randomScaled = direct(kFuncAllReduce, kFloat32, kRedPreMulSum, 301, twoShot);
    randomScaled.randomFloats = true;
    randomScaled.scalar = 0.3f;
    colls.push_back(std::move(randomScaled));
    runAndCheck(comm, colls, rng, std::to_string(n) + " ranks");
    EXPECT_GT(comm.step(0, 0, 1), (uint64_t)kSteps) << "the slot ring should wrap";
  }
}

TEST(DirectEmu, OneShotAllReduceAllTypesAndReductions) { allReduceCases(false); }
TEST(DirectEmu, TwoShotAllReduceAllTypesAndReductions) { allReduceCases(true); }

// Steps of 4 KiB (2 KiB of payload: 128 packs), so each of the 32 emulated threads moves several
// packs per step, as on a GPU (32 KiB of payload for 512 threads): one-shot writes all of a
// thread's packs before it reads any, in place too; two-shot alike.
TEST(DirectEmu, SeveralPacksPerThreadAndStep) {
  std::mt19937 rng(13);
  for (bool twoShot : {false, true}) {
    for (int n : {2, 3}) {
      MeshComm comm(n, 2, 0, 4096);
      std::vector<Coll> colls;
      colls.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 1500, twoShot));           // ~3 steps per channel
      colls.push_back(direct(kFuncAllReduce, kInt32, kRedMax, 1021, twoShot, true));       // in place, odd
      colls.push_back(direct(kFuncAllReduce, kFloat16, kRedSum, 777, twoShot, false, 2));  // shifted
      colls.push_back(direct(kFuncAllReduce, kUint8, kRedSumPostDiv, 5000, twoShot, true));
      runAndCheck(comm, colls, rng, std::to_string(n) + " ranks, " + (twoShot ? "two-shot" : "one-shot"));
    }
  }
}

TEST(DirectEmu, AllGatherOddCountsInPlaceAndShifted) {
  std::mt19937 rng(5);
  for (int n : {2, 3, 4}) {
    MeshComm comm(n, 2);
    std::vector<Coll> colls;
    colls.push_back(direct(kFuncAllGather, kInt8, kRedSum, 1));
    colls.push_back(direct(kFuncAllGather, kUint8, kRedSum, 1001, false, false, 3));  // several steps, unaligned
    colls.push_back(direct(kFuncAllGather, kInt8, kRedSum, 777, false, true, 5));     // in place
    colls.push_back(direct(kFuncAllGather, kFloat64, kRedSum, 129));
    colls.push_back(direct(kFuncAllGather, kFloat16, kRedSum, 17, false, true));
    colls.push_back(direct(kFuncAllGather, kInt32, kRedSum, 250, false, false, 4));
    runAndCheck(comm, colls, rng, std::to_string(n) + " ranks");
  }
}

// The specialized kernels' runners (kernel_special.cu) on launches of their own kind, the way the
// host picks them (specialKernelOfLaunch): results, links, and step counters that the general
// LL kernel continues from.
template <int Kind>
void runSpecial(MeshComm& comm, std::vector<Coll>& colls, std::mt19937& rng, const std::string& what) {
  Works works(comm.nRanks(), std::vector<std::vector<DevWork>>(comm.nChannels()));
  for (auto& k : colls) addColl(comm, k, works, rng);
  bool picked = false;
  ASSERT_TRUE((comm.launchSpecial<Kind, LLProto>(works, 120, &picked))) << "deadlock: " << what;
  ASSERT_TRUE(picked) << "the host would not pick this kernel: " << what;
  for (auto& k : colls) ASSERT_EQ(checkColl(comm, k), "") << what;
  ASSERT_EQ(comm.checkLinks(), "") << what;
}

TEST(DirectEmu, SpecializedKernelsMatchTheGeneralOne) {
  std::mt19937 rng(17);
  for (int n : {2, 3}) {
    MeshComm comm(n, 2);
    const std::string ranks = std::to_string(n) + " ranks";
    std::vector<Coll> f32;
    f32.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 1999, false, false, 4));  // several steps
    f32.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 3, true));
    Coll random = direct(kFuncAllReduce, kFloat32, kRedSum, 515);
    random.randomFloats = true;
    f32.push_back(std::move(random));
    runSpecial<kSpecialDirectSumF32>(comm, f32, rng, "float sum, " + ranks);
    std::vector<Coll> f16;
    f16.push_back(direct(kFuncAllReduce, kFloat16, kRedSum, 333, false, true));
    f16.push_back(direct(kFuncAllReduce, kFloat16, kRedSum, 701, true));
    runSpecial<kSpecialDirectSumF16>(comm, f16, rng, "half sum, " + ranks);
    std::vector<Coll> bf16;
    bf16.push_back(direct(kFuncAllReduce, kBfloat16, kRedSum, 37, true, false, 2));
    bf16.push_back(direct(kFuncAllReduce, kBfloat16, kRedSum, 1));
    runSpecial<kSpecialDirectSumBf16>(comm, bf16, rng, "bfloat16 sum, " + ranks);
    std::vector<Coll> gather;
    gather.push_back(direct(kFuncAllGather, kUint8, kRedSum, 1001, false, false, 3));
    gather.push_back(direct(kFuncAllGather, kFloat64, kRedSum, 129, false, true));
    runSpecial<kSpecialDirectGather>(comm, gather, rng, "AllGather, " + ranks);
    // The general kernel continues on the steps the specialized ones saved.
    std::vector<Coll> after;
    after.push_back(direct(kFuncAllReduce, kInt32, kRedMax, 333, true));
    runAndCheck(comm, after, rng, "general kernel after the specialized ones, " + ranks);
  }
}

// A count of 0 gets no item; a channel whose part is empty gets none either (the planner's rule):
// the links must not move.
TEST(DirectEmu, EmptyCallsUseNoStep) {
  std::mt19937 rng(9);
  MeshComm comm(3, 2);
  std::vector<Coll> colls;
  colls.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 0));
  colls.push_back(direct(kFuncAllGather, kInt8, kRedSum, 0));
  colls.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 2, true));  // one channel only
  runAndCheck(comm, colls, rng, "empty");
  EXPECT_EQ(comm.step(1, 0, 1), 0u) << "channel 1 had no item";
  EXPECT_EQ(comm.step(0, 0, 1), 2u) << "two-shot: two steps per iteration";
}

// Direct work, then Ring LL, then Simple, then Direct again on the same connections: all items
// stay correct because every user advances the shared step counters alike.
TEST(DirectEmu, RingAndSimpleWorkAfterDirectOnTheSameConnections) {
  std::mt19937 rng(13);
  for (int n : {2, 3}) {
    MeshComm comm(n, 2);
    for (int round = 0; round < 2; round++) {
      std::vector<Coll> d;
      d.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 901));
      d.push_back(direct(kFuncAllReduce, kInt32, kRedMax, 333, true));
      d.push_back(direct(kFuncAllGather, kUint8, kRedSum, 555));
      runAndCheck(comm, d, rng, "direct round " + std::to_string(round));
      // Ring items in an LL launch, Direct items mixed in between them.
      std::vector<Coll> mixed;
      Coll ring = direct(kFuncAllReduce, kFloat32, kRedSum, 1201);
      ring.algo = kAlgoRing;
      mixed.push_back(std::move(ring));
      mixed.push_back(direct(kFuncAllReduce, kInt64, kRedSum, 77, true));
      Coll ringAg = direct(kFuncAllGather, kInt8, kRedSum, 999);
      ringAg.algo = kAlgoRing;
      mixed.push_back(std::move(ringAg));
      runAndCheck(comm, mixed, rng, "ring LL after direct, round " + std::to_string(round));
      // A Simple launch on the same connections.
      std::vector<Coll> simple;
      Coll s = direct(kFuncAllReduce, kFloat32, kRedSum, 3001);
      s.algo = kAlgoRing;
      simple.push_back(std::move(s));
      Works works(n, std::vector<std::vector<DevWork>>(comm.nChannels()));
      for (auto& k : simple) addColl(comm, k, works, rng);
      ASSERT_TRUE(comm.launch<SimpleProto>(works, 120)) << "Simple after direct";
      for (auto& k : simple) ASSERT_EQ(checkColl(comm, k), "") << "Simple after direct";
    }
  }
}

// Steps starting just before LL's wipe window (the last kSteps of each 2^31) and the 32-bit flag
// wrap: Direct wipes the slots it consumes there, results stay exact, and a Ring LL item after it
// still finds the slots as LL expects.
TEST(DirectEmu, StepsAcrossTheWipeWindowAndTheFlagWrap) {
  for (uint64_t first : {(1ull << 31) - 11, (1ull << 32) - 9}) {
    std::mt19937 rng(3);
    MeshComm comm(3, 1, first);
    for (int launch = 0; launch < 2; launch++) {
      std::vector<Coll> colls;
      colls.push_back(direct(kFuncAllReduce, kFloat32, kRedSum, 701));
      colls.push_back(direct(kFuncAllReduce, kInt32, kRedSum, 1001, true));
      Coll ring = direct(kFuncAllReduce, kFloat32, kRedSum, 501);
      ring.algo = kAlgoRing;
      colls.push_back(std::move(ring));
      runAndCheck(comm, colls, rng, "first step " + std::to_string(first));
    }
    EXPECT_GT(comm.step(0, 0, 1), first + 2 * kSteps);
  }
}

// Rank 2 never runs its Direct item: the others wait on it until the abort flag ends every wait.
TEST(DirectEmu, AbortEndsWaits) {
  std::mt19937 rng(1);
  MeshComm comm(3, 1);
  Coll k = direct(kFuncAllReduce, kFloat32, kRedSum, 2000);
  Works works(3, std::vector<std::vector<DevWork>>(1));
  addColl(comm, k, works, rng);
  works[2][0].clear();
  EXPECT_FALSE(comm.launch<LLProto>(works, 0.3));
}

}  // namespace
}  // namespace weft::dev
