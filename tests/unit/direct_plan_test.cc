// Choosing and planning the Direct algorithm (weft extension, dev::kAlgoDirect): where the model
// offers it (one node, 2..kDirectMaxRanks ranks, a channel connecting every pair, LL,
// AllReduce/AllGather), that the tuner picks it for small calls on the 2xH200 machine's model and
// not for large ones, one-shot vs two-shot, NCCL_ALGO=direct forcing it (and falling back where it
// cannot run), the planner placing it on the mesh channels only, all ranks planning alike, and the
// mesh channels of the connection plan.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/symmetric.h"
#include "device/kernel_api.h"
#include "device/special_kernels.h"
#include "enqueue/planner.h"
#include "graph/algo_proto_env.h"
#include "graph/tuning.h"
#include "planner_test_util.h"
#include "test_env.h"
#include "transport/connection_plan.h"

using namespace weft;
using namespace weft::enqueue;

namespace {

constexpr int kDirect = dev::kAlgoDirect, kRing = dev::kAlgoRing;
constexpr int kLL = dev::kProtoLL, kSimple = dev::kProtoSimple;
constexpr int kAr = dev::kFuncAllReduce, kAg = dev::kFuncAllGather;

// The 2xH200 model (24 channels of 15 GB/s NVLink) for nRanks ranks on one node.
graph::TuningInput nvlinkInput(int nRanks, int meshChannels) {
  graph::TuningInput in;
  in.nRanks = nRanks;
  in.intraLink = graph::kLinkNvlink;
  in.intraBwPerChannel = 15.0;
  in.maxChannels = 24;
  in.minSm = 90;
  in.meshChannels = meshChannels;
  return in;
}

graph::TuningChoice pick(const graph::TuningInput& in, int func, size_t bytes) {
  graph::TuningChoice c;
  EXPECT_EQ(graph::selectAlgoProto(in, graph::TuningConstants::defaults(), func, bytes, &c), ncclSuccess);
  return c;
}

// nRanks ranks with the real kernels' support, p2p connections on the first p2pChannels of 24
// channels and Direct allowed on the given mesh channels.
PlanShape meshShape(int rank, int nRanks, std::vector<int> mesh, int p2pChannels = 4) {
  PlanShape s = test::uniformShape(rank, nRanks, 24, p2pChannels);
  s.directChannels = std::move(mesh);
  return s;
}

std::vector<int> firstChannels(int n) {
  std::vector<int> v;
  for (int c = 0; c < n; ++c) v.push_back(c);
  return v;
}

Task coll(TaskKind kind, size_t count, dev::DataType type = dev::kFloat32) { return test::collTask(kind, count, type); }

TEST(DirectTuning, ModeledOnlyWhereItCanRun) {
  graph::TuningInput in = nvlinkInput(2, 24);
  EXPECT_TRUE(graph::pairModeled(in, kAr, kDirect, kLL));
  EXPECT_TRUE(graph::pairModeled(in, kAg, kDirect, kLL));
  EXPECT_FALSE(graph::pairModeled(in, kAr, kDirect, kSimple));
  EXPECT_FALSE(graph::pairModeled(in, kAr, kDirect, dev::kProtoLL128));
  for (int f : {dev::kFuncBroadcast, dev::kFuncReduce, dev::kFuncReduceScatter})
    EXPECT_FALSE(graph::pairModeled(in, f, kDirect, kLL)) << f;
  EXPECT_FALSE(graph::pairModeled(nvlinkInput(2, 0), kAr, kDirect, kLL)) << "no mesh channel";
  EXPECT_FALSE(graph::pairModeled(nvlinkInput(1, 24), kAr, kDirect, kLL)) << "one rank";
  EXPECT_TRUE(graph::pairModeled(nvlinkInput(dev::kDirectMaxRanks, 4), kAr, kDirect, kLL));
  EXPECT_FALSE(graph::pairModeled(nvlinkInput(dev::kDirectMaxRanks + 1, 4), kAr, kDirect, kLL));
  graph::TuningInput twoNodes = nvlinkInput(4, 4);
  twoNodes.nNodes = 2;
  twoNodes.interBwPerChannel = 12;
  EXPECT_FALSE(graph::pairModeled(twoNodes, kAr, kDirect, kLL)) << "several nodes";
}

TEST(DirectTuning, KernelsSupportDirectOnLLForAllReduceAndAllGatherAndSymmetricOnSimple) {
  EXPECT_TRUE(dev::isSupported(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kBfloat16));
  EXPECT_TRUE(dev::isSupported(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSumPostDiv, dev::kInt32));
  EXPECT_FALSE(dev::isSupported(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSumPostDiv, dev::kFloat32));
  EXPECT_TRUE(dev::isSupported(dev::kFuncAllGather, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kInt8));
  // On Simple: the symmetric AllReduce, AllGather and ReduceScatter (coll/run_symmetric.cuh).
  EXPECT_TRUE(dev::isSupported(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoSimple, dev::kRedSum, dev::kFloat32));
  EXPECT_TRUE(dev::isSupported(dev::kFuncReduceScatter, dev::kAlgoDirect, dev::kProtoSimple, dev::kRedMax, dev::kInt8));
  EXPECT_FALSE(dev::isSupported(dev::kFuncReduce, dev::kAlgoDirect, dev::kProtoSimple, dev::kRedSum, dev::kFloat32));
  EXPECT_FALSE(dev::isSupported(dev::kFuncReduceScatter, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kFloat32));
  EXPECT_FALSE(dev::isSupported(dev::kFuncBroadcast, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kFloat32));
}

// On the 2xH200 model Direct saves Ring/LL's second hop: it wins wherever LL does, i.e. for the
// latency-bound sizes (8 B .. 64 KiB), and loses to LL128/Simple for large calls.
TEST(DirectTuning, PicksDirectForSmallCallsOnTwoRanks) {
  graph::TuningInput in = nvlinkInput(2, 24);
  for (size_t bytes = 8; bytes <= (64 << 10); bytes *= 2) {
    graph::TuningChoice ar = pick(in, kAr, bytes);
    EXPECT_EQ(ar.algo, kDirect) << bytes;
    EXPECT_EQ(ar.proto, kLL) << bytes;
    EXPECT_FALSE(ar.twoShot) << "two-shot never pays on two ranks";
    EXPECT_EQ(pick(in, kAg, bytes).algo, kDirect) << bytes;
    // One hop less than Ring/LL.
    graph::TuningChoice ring = graph::estimateCollective(in, graph::TuningConstants::defaults(), kAr, kRing, kLL, bytes);
    EXPECT_LT(ar.timeUs, ring.timeUs) << bytes;
  }
  EXPECT_NE(pick(in, kAr, size_t(256) << 20).algo, kDirect);
  EXPECT_NE(pick(in, kAg, size_t(256) << 20).algo, kDirect);
  // Channels grow with the size, within the mesh channels.
  EXPECT_EQ(pick(in, kAr, 8).nChannels, 1);
  EXPECT_GT(pick(in, kAr, 64 << 10).nChannels, 1);
  graph::TuningInput fewMesh = nvlinkInput(2, 2);
  EXPECT_LE(graph::estimateCollective(fewMesh, graph::TuningConstants::defaults(), kAr, kDirect, kLL, 1 << 20).nChannels, 2);
}

// One-shot sends n-1 copies of the data, two-shot 2(n-1)/n and one more hop: on 8 ranks one-shot
// wins the smallest calls, two-shot the next sizes.
TEST(DirectTuning, TwoShotTakesOverFromOneShotOnEightRanks) {
  graph::TuningInput in = nvlinkInput(8, 4);
  const graph::TuningConstants& k = graph::TuningConstants::defaults();
  graph::TuningChoice tiny = graph::estimateCollective(in, k, kAr, kDirect, kLL, 64);
  EXPECT_TRUE(tiny.valid());
  EXPECT_FALSE(tiny.twoShot);
  graph::TuningChoice mid = graph::estimateCollective(in, k, kAr, kDirect, kLL, 256 << 10);
  EXPECT_TRUE(mid.twoShot);
  EXPECT_TRUE(graph::estimateCollective(in, k, kAr, kDirect, kLL, 1 << 20).twoShot);
  // NCCL_WEFT_DIRECT_TWO_SHOT's forcing, either way, on any rank count.
  in.directTwoShot = 0;
  EXPECT_FALSE(graph::estimateCollective(in, k, kAr, kDirect, kLL, 1 << 20).twoShot);
  graph::TuningInput two = nvlinkInput(2, 24);
  two.directTwoShot = 1;
  EXPECT_TRUE(graph::estimateCollective(two, k, kAr, kDirect, kLL, 64).twoShot);
  in.directTwoShot = -1;
  // AllGather has no two-shot form.
  EXPECT_FALSE(graph::estimateCollective(in, k, kAg, kDirect, kLL, 1 << 20).twoShot);
}

TEST(DirectPlanner, SmallAllReduceAndAllGatherRunDirectOnTheMeshChannels) {
  for (int n : {2, 4}) {
    // With 4 ranks only the p2p channels (here 0..3) connect every pair.
    PlanShape s = meshShape(0, n, n == 2 ? firstChannels(24) : firstChannels(4));
    for (TaskKind kind : {TaskKind::kAllReduce, TaskKind::kAllGather}) {
      for (size_t count : {size_t(1), size_t(1000), size_t(4096)}) {
        SCOPED_TRACE(std::to_string(n) + " ranks, " + taskKindName(kind) + " of " + std::to_string(count));
        std::vector<PlannedLaunch> launches;
        ASSERT_EQ(planTasks({coll(kind, count)}, s, &launches), ncclSuccess);
        ASSERT_EQ(launches.size(), 1u);
        EXPECT_EQ(launches[0].proto, kLL);
        uint64_t covered = 0;
        for (size_t b = 0; b < launches[0].channels.size(); ++b) {
          EXPECT_LT(launches[0].channels[b], n == 2 ? 24 : 4);
          for (const dev::DevWork& w : launches[0].works[b]) {
            EXPECT_EQ(w.algo, kDirect);
            EXPECT_EQ(w.chunkElems, 0u);
            covered += w.chanCount;
          }
        }
        EXPECT_EQ(covered, count) << "the channels' parts cover the call";
      }
    }
  }
}

// Mesh channels that are not the first ones: parts go to exactly those channel ids.
TEST(DirectPlanner, PartsGoToTheListedChannels) {
  PlanShape s = meshShape(1, 3, {5, 9});
  s.minCollChannels = 2;
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({coll(TaskKind::kAllReduce, 4096)}, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].channels, (std::vector<int>{5, 9}));
  for (const auto& list : launches[0].works)
    for (const dev::DevWork& w : list) EXPECT_EQ(w.algo, kDirect);
}

TEST(DirectPlanner, NeverWhereItCannotRun) {
  auto algoOf = [](const PlanShape& s, TaskKind kind, size_t count) {
    CollChoice c;
    EXPECT_EQ(chooseCollective(coll(kind, count), s, &c), ncclSuccess);
    return c.algo;
  };
  // No channel connects every pair (e.g. 4 ranks without p2p channels).
  EXPECT_NE(algoOf(meshShape(0, 4, {}, 0), TaskKind::kAllReduce, 16), kDirect);
  // One rank: a local copy.
  EXPECT_NE(algoOf(meshShape(0, 1, firstChannels(4)), TaskKind::kAllReduce, 16), kDirect);
  // More ranks than Direct serves.
  EXPECT_NE(algoOf(meshShape(0, dev::kDirectMaxRanks + 1, firstChannels(4)), TaskKind::kAllReduce, 16), kDirect);
  // Other collectives.
  for (TaskKind k : {TaskKind::kBroadcast, TaskKind::kReduce, TaskKind::kReduceScatter})
    EXPECT_NE(algoOf(meshShape(0, 2, firstChannels(24)), k, 16), kDirect);
  // Where the kernels lack a combination for Direct (here: pretend SumPostDiv), it is not chosen.
  Task avg = coll(TaskKind::kAllReduce, 16, dev::kInt32);
  avg.redOp = dev::kRedSumPostDiv;
  CollChoice c;
  PlanShape s = meshShape(0, 2, firstChannels(24));
  s.isSupported = [](dev::Func f, dev::Algo a, dev::Proto p, dev::RedOp op, dev::DataType t) {
    return dev::isSupported(f, a, p, op, t) && !(a == dev::kAlgoDirect && op == dev::kRedSumPostDiv);
  };
  ASSERT_EQ(chooseCollective(avg, s, &c), ncclSuccess);
  EXPECT_NE(c.algo, kDirect);
}

TEST(DirectPlanner, NcclAlgoDirectForcesItAndFallsBackWhereItCannotRun) {
  auto choose = [](const char* algo, const char* proto, const PlanShape& base, const Task& t) {
    test::ScopedEnv env;
    if (algo) env.set("NCCL_ALGO", algo);
    if (proto) env.set("NCCL_PROTO", proto);
    PlanShape s = base;
    s.tuning.env = graph::algoProtoMasksFromEnv();
    CollChoice c;
    EXPECT_EQ(chooseCollective(t, s, &c), ncclSuccess) << (algo ? algo : "") << " " << (proto ? proto : "");
    return c;
  };
  const PlanShape two = meshShape(0, 2, firstChannels(24));
  const Task big = coll(TaskKind::kAllReduce, size_t(16) << 20);
  EXPECT_NE(choose(nullptr, nullptr, two, big).algo, kDirect);
  EXPECT_EQ(choose("allreduce:direct", nullptr, two, big).algo, kDirect);
  EXPECT_EQ(choose("DIRECT", nullptr, two, big).algo, kDirect) << "names are case-insensitive";
  EXPECT_EQ(choose("direct", nullptr, two, coll(TaskKind::kAllGather, size_t(4) << 20)).algo, kDirect);
  // "allreduce:direct" leaves the other collectives alone.
  EXPECT_NE(choose("allreduce:direct", nullptr, two, coll(TaskKind::kAllGather, size_t(16) << 20)).algo, kDirect);
  // Where Direct cannot run, a forced Direct falls back (no error): other collectives, no mesh
  // channel, a protocol other than LL.
  EXPECT_EQ(choose("direct", nullptr, two, coll(TaskKind::kBroadcast, 4096)).algo, kRing);
  EXPECT_EQ(choose("direct", nullptr, meshShape(0, 4, {}, 0), coll(TaskKind::kAllReduce, 4096)).algo, kRing);
  CollChoice simple = choose("direct", "Simple", two, coll(TaskKind::kAllReduce, 4096));
  EXPECT_NE(simple.algo, kDirect);
  EXPECT_EQ(simple.proto, kSimple);
  // "direct,tree": the fallback keeps to the other names.
  EXPECT_EQ(choose("allreduce:direct,tree", nullptr, meshShape(0, 4, {}, 0), coll(TaskKind::kAllReduce, 4096)).algo,
            dev::kAlgoTree);
  // Two-shot on 8 ranks at mid sizes, flagged in the work items.
  PlanShape eight = meshShape(0, 8, firstChannels(4));
  test::ScopedEnv env;
  env.set("NCCL_ALGO", "allreduce:direct");
  eight.tuning.env = graph::algoProtoMasksFromEnv();
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({coll(TaskKind::kAllReduce, 64 << 10), coll(TaskKind::kAllReduce, 4)}, eight, &launches),
            ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(launches[0].works[0].size(), 2u);
  EXPECT_TRUE(launches[0].works[0][0].flags & dev::kWorkFlagTwoShot);
  EXPECT_FALSE(launches[0].works[0][1].flags & dev::kWorkFlagTwoShot);
}

TEST(DirectPlanner, EveryRankPlansTheSameItems) {
  const int n = 4;
  std::vector<std::vector<PlannedLaunch>> plans(n);
  for (int r = 0; r < n; ++r) {
    PlanShape s = meshShape(r, n, firstChannels(4));
    ASSERT_EQ(planTasks({coll(TaskKind::kAllReduce, 5000), coll(TaskKind::kAllGather, 777, dev::kInt8),
                         coll(TaskKind::kAllReduce, 3, dev::kFloat16)},
                        s, &plans[r]),
              ncclSuccess);
  }
  for (int r = 1; r < n; ++r) {
    ASSERT_EQ(plans[r].size(), plans[0].size());
    for (size_t l = 0; l < plans[0].size(); ++l) {
      EXPECT_EQ(plans[r][l].proto, plans[0][l].proto);
      ASSERT_EQ(plans[r][l].channels, plans[0][l].channels);
      for (size_t b = 0; b < plans[0][l].works.size(); ++b) {
        ASSERT_EQ(plans[r][l].works[b].size(), plans[0][l].works[b].size());
        for (size_t i = 0; i < plans[0][l].works[b].size(); ++i) {
          const dev::DevWork &a = plans[0][l].works[b][i], &w = plans[r][l].works[b][i];
          EXPECT_EQ(w.algo, a.algo);
          EXPECT_EQ(w.flags, a.flags);
          EXPECT_EQ(w.chanOffset, a.chanOffset);
          EXPECT_EQ(w.chanCount, a.chanCount);
        }
      }
    }
  }
}

// The connection plan's mesh channels: every pair on every channel with two ranks; the p2p
// channels otherwise; the same list on every rank, even where a rank alone is fully connected.
TEST(DirectConnections, MeshChannelsAreWhereEveryPairIsConnected) {
  auto rings = [](int n, int nCh) {
    std::vector<std::vector<int>> r(nCh);
    for (int c = 0; c < nCh; ++c)
      for (int i = 0; i < n; ++i) r[c].push_back(c % 2 ? n - 1 - i : i);
    return r;
  };
  EXPECT_EQ(transport::planConnections(0, rings(2, 6), 1).meshChannels, firstChannels(6));
  EXPECT_EQ(transport::planConnections(1, rings(2, 6), 0).meshChannels, firstChannels(6));
  EXPECT_EQ(transport::planConnections(2, rings(4, 6), 2).meshChannels, firstChannels(2));
  EXPECT_TRUE(transport::planConnections(0, rings(4, 6), 0).meshChannels.empty());
  // Three ranks, a chain tree 0-1-2 on channel 1 (beyond the one p2p channel): rank 1 is then
  // connected both ways with both peers there, ranks 0 and 2 are not, so it is no mesh channel.
  std::vector<std::vector<transport::TreePeers>> trees(2, std::vector<transport::TreePeers>(3));
  for (auto& t : trees) {
    t[0].down[0] = 1;
    t[1].up = 0;
    t[1].down[0] = 2;
    t[2].up = 1;
  }
  for (int r = 0; r < 3; ++r) {
    transport::ConnectionPlan p = transport::planConnections(r, rings(3, 2), 1, trees);
    EXPECT_EQ(p.meshChannels, firstChannels(1)) << "rank " << r;
  }
  // Beyond kDirectMaxRanks the list is not computed.
  EXPECT_TRUE(transport::planConnections(0, rings(dev::kDirectMaxRanks + 1, 2), 2).meshChannels.empty());
}

TEST(DirectNames, NcclAlgoAcceptsDirect) {
  EXPECT_STREQ(graph::algoName(dev::kAlgoDirect), "Direct");
  uint8_t masks[graph::kNumCollFuncs] = {0, 0, 0, 0, 0};
  std::string why;
  ASSERT_EQ(graph::parseAlgoList("allreduce:direct;allgather:Direct,ring", masks, &why), ncclSuccess) << why;
  EXPECT_EQ(masks[kAr], 1u << dev::kAlgoDirect);
  EXPECT_EQ(masks[kAg], (1u << dev::kAlgoDirect) | (1u << dev::kAlgoRing));
  ASSERT_EQ(graph::parseAlgoList("^direct", masks, &why), ncclSuccess) << why;
  EXPECT_EQ(masks[kAr], graph::kAllAlgosMask & ~(1u << dev::kAlgoDirect));
  // The tuning file knows the key.
  graph::TuningConstants k = graph::TuningConstants::defaults();
  ASSERT_EQ(graph::parseTuningText("base.direct.ll = 3.5", &k, &why), ncclSuccess) << why;
  EXPECT_EQ(k.baseUs[dev::kAlgoDirect][kLL], 3.5);
}

// The symmetric collectives (Direct on Simple) are modeled only for calls whose buffers lie in
// symmetric windows, on one node, for AllReduce/AllGather/ReduceScatter.
TEST(SymmetricTuning, ModeledOnlyForSymmetricCalls) {
  graph::TuningInput in = nvlinkInput(2, 24);
  EXPECT_FALSE(graph::pairModeled(in, kAr, kDirect, kSimple));
  in.symmetric = true;
  for (int f : {kAr, kAg, (int)dev::kFuncReduceScatter}) EXPECT_TRUE(graph::pairModeled(in, f, kDirect, kSimple)) << f;
  EXPECT_FALSE(graph::pairModeled(in, dev::kFuncBroadcast, kDirect, kSimple));
  EXPECT_FALSE(graph::pairModeled(in, dev::kFuncReduce, kDirect, kSimple));
  graph::TuningInput nodes = in;
  nodes.nRanks = 4;
  nodes.nNodes = 2;
  nodes.interBwPerChannel = 5;
  EXPECT_FALSE(graph::pairModeled(nodes, kAr, kDirect, kSimple));
  graph::TuningInput many = nvlinkInput(dev::kSymMaxRanks + 1, 0);
  many.symmetric = true;
  EXPECT_FALSE(graph::pairModeled(many, kAr, kDirect, kSimple));
  // AllReduce is two-shot (one more hop than AllGather: reads, then writes) and uses all channels.
  const graph::TuningConstants k = graph::TuningConstants::weftCalibrated();
  const graph::TuningChoice ar = graph::estimateCollective(in, k, kAr, kDirect, kSimple, 0);
  const graph::TuningChoice ag = graph::estimateCollective(in, k, kAg, kDirect, kSimple, 0);
  ASSERT_TRUE(ar.valid() && ag.valid());
  EXPECT_TRUE(ar.twoShot);
  EXPECT_NEAR(ar.timeUs - ag.timeUs, k.hwUs[graph::kLinkNvlink][kDirect][kSimple], 1e-9);
  EXPECT_EQ(graph::estimateCollective(in, k, kAr, kDirect, kSimple, size_t(1) << 30).nChannels, 24);
}

// Forced (NCCL_ALGO=direct NCCL_PROTO=simple), a symmetric AllReduce becomes one item per channel
// carrying team rank 0's flat addresses, the stride and its channel as barrier slot; the same call
// without symmetric windows runs Ring/Simple, and the choice cache keeps the two apart.
TEST(SymmetricPlanner, ItemsCarryFlatAddressesStrideAndSlot) {
  PlanShape s = meshShape(1, 2, firstChannels(24));
  s.tuning.env.algo[kAr] = uint8_t(1u << kDirect);
  s.tuning.env.proto[kAr] = uint8_t(1u << kSimple);
  ChoiceCache cache;
  s.choices = &cache;
  Task t = coll(TaskKind::kAllReduce, size_t(8) << 20);
  t.sendBuff = reinterpret_cast<const void*>(0x7000000000ull);
  t.recvBuff = reinterpret_cast<void*>(0x7100000000ull);
  t.symStride4G = 3;
  t.symSend0 = reinterpret_cast<const void*>(0x5000001000ull);
  t.symRecv0 = reinterpret_cast<void*>(0x5080001000ull);
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({t}, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  uint64_t covered = 0;
  for (size_t b = 0; b < launches[0].works.size(); ++b) {
    ASSERT_EQ(launches[0].works[b].size(), 1u);
    const dev::DevWork& w = launches[0].works[b][0];
    EXPECT_EQ(w.algo, kDirect);
    EXPECT_EQ(w.proto, kSimple);
    EXPECT_EQ(w.sendBuff, t.symSend0);
    EXPECT_EQ(w.recvBuff, t.symRecv0);
    EXPECT_EQ(w.peerStride4G, 3u);
    EXPECT_EQ((int)w.symSlot, launches[0].channels[b]);
    EXPECT_EQ(w.chanOffset, covered);
    covered += w.chanCount;
  }
  EXPECT_EQ(covered, t.count);
  EXPECT_EQ(specialKernelOfLaunch(launches[0]), dev::kSpecialSymSumF32) << "float sums: the symmetric sum kernel";
  Task plain = t;
  plain.symStride4G = 0;
  CollChoice c;
  ASSERT_EQ(chooseCollective(plain, s, &c), ncclSuccess);
  EXPECT_FALSE(c.algo == kDirect && c.proto == kSimple);
  ASSERT_EQ(chooseCollective(t, s, &c), ncclSuccess);
  EXPECT_TRUE(c.algo == kDirect && c.proto == kSimple);
}

// The bytes each rank's buffers span, which must lie in symmetric windows.
TEST(SymmetricPlanner, SpansPerFunction) {
  size_t send = 0, recv = 0;
  ASSERT_TRUE(core::symmetricSpans(TaskKind::kAllReduce, 10, 4, 3, &send, &recv));
  EXPECT_EQ(send, 40u);
  EXPECT_EQ(recv, 40u);
  ASSERT_TRUE(core::symmetricSpans(TaskKind::kAllGather, 10, 2, 3, &send, &recv));
  EXPECT_EQ(send, 20u);
  EXPECT_EQ(recv, 60u);
  ASSERT_TRUE(core::symmetricSpans(TaskKind::kReduceScatter, 10, 8, 3, &send, &recv));
  EXPECT_EQ(send, 240u);
  EXPECT_EQ(recv, 80u);
  EXPECT_FALSE(core::symmetricSpans(TaskKind::kBroadcast, 10, 4, 3, &send, &recv));
  EXPECT_FALSE(core::symmetricSpans(TaskKind::kSend, 10, 4, 3, &send, &recv));
}

}  // namespace
