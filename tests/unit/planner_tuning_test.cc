// The tuning model wired into the planner: the pair and channel count per collective, the
// NCCL_ALGO/NCCL_PROTO forcing and its errors, channel bounds, one protocol per launch, the
// agreement of all ranks' plans, and ncclGroupSimulateEnd's estimate.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/log.h"
#include "device/kernel_api.h"
#include "enqueue/group.h"
#include "enqueue/planner.h"
#include "graph/algo_proto_env.h"
#include "graph/tuning_input.h"
#include "planner_test_util.h"
#include "test_env.h"
#include "transport/connection_plan.h"

using namespace weft;
using namespace weft::enqueue;

namespace {

constexpr int kTree = dev::kAlgoTree, kRing = dev::kAlgoRing;
constexpr int kLL = dev::kProtoLL, kLL128 = dev::kProtoLL128, kSimple = dev::kProtoSimple;

// Kernels as they will be once LL, LL128 and Tree exist: every protocol for Ring, Tree for
// AllReduce, Simple for SendRecv.
bool allImplemented(dev::Func f, dev::Algo a, dev::Proto p, dev::RedOp, dev::DataType) {
  if (f == dev::kFuncSendRecv) return p == dev::kProtoSimple;
  if (a == dev::kAlgoRing) return true;
  return a == dev::kAlgoTree && f == dev::kFuncAllReduce;
}

bool ringSimpleOnly(dev::Func f, dev::Algo a, dev::Proto p, dev::RedOp, dev::DataType) {
  return p == dev::kProtoSimple && (a == dev::kAlgoRing || f == dev::kFuncSendRecv);
}

// The 2xH200 machine as the model sees it (24 channels of 15 GB/s), with nRanks ranks.
PlanShape nvlinkShape(int rank, int nRanks, int nChannels = 24, SupportFn support = &allImplemented) {
  PlanShape s = test::uniformShape(rank, nRanks, nChannels, std::min(nChannels, 2));
  s.isSupported = support;
  return s;
}

Task coll(TaskKind kind, size_t count, dev::DataType type = dev::kFloat32) { return test::collTask(kind, count, type); }

Task p2p(TaskKind kind, int peer, size_t bytes) { return test::p2pTask(kind, peer, bytes); }

dev::Func funcOf(TaskKind k) {
  switch (k) {
    case TaskKind::kBroadcast: return dev::kFuncBroadcast;
    case TaskKind::kReduce: return dev::kFuncReduce;
    case TaskKind::kAllGather: return dev::kFuncAllGather;
    case TaskKind::kReduceScatter: return dev::kFuncReduceScatter;
    default: return dev::kFuncAllReduce;
  }
}

// What the model alone picks for a task, with the pairs `support` allows for its reduction/type.
graph::TuningChoice modelPick(const PlanShape& s, const Task& t, SupportFn support) {
  graph::TuningInput in = s.tuning;
  dev::Func f = funcOf(t.kind);
  in.supported[f] = 0;
  for (int a = 0; a < dev::kNumAlgos; ++a)
    for (int p = 0; p < dev::kNumProtos; ++p)
      if (support(f, (dev::Algo)a, (dev::Proto)p, t.redOp, t.dataType)) in.supported[f] |= graph::pairBit(a, p);
  size_t bytes = t.bytes();
  if (t.kind == TaskKind::kAllGather || t.kind == TaskKind::kReduceScatter) bytes *= s.nRanks;
  graph::TuningChoice c;
  EXPECT_EQ(graph::selectAlgoProto(in, s.constants ? *s.constants : graph::TuningConstants::defaults(), f, bytes, &c),
            ncclSuccess);
  return c;
}

// Every collective work item of a plan, with the launch's protocol and the channel.
struct Item {
  int launch, proto, channel;
  dev::DevWork w;
};
std::vector<Item> items(const std::vector<PlannedLaunch>& launches) {
  std::vector<Item> out;
  for (size_t l = 0; l < launches.size(); ++l)
    for (size_t b = 0; b < launches[l].channels.size(); ++b)
      for (const dev::DevWork& w : launches[l].works[b]) out.push_back({(int)l, launches[l].proto, launches[l].channels[b], w});
  return out;
}

}  // namespace

TEST(PlannerTuning, PicksTheModelsBestImplementedPair) {
  int checked = 0;
  bool sawLL = false, sawSimple = false;
  for (int n : {2, 4}) {
    for (TaskKind kind : {TaskKind::kAllReduce, TaskKind::kAllGather, TaskKind::kReduceScatter, TaskKind::kBroadcast,
                          TaskKind::kReduce}) {
      for (size_t count = 2; count <= (size_t(1) << 28); count *= 8) {
        PlanShape s = nvlinkShape(0, n);
        Task t = coll(kind, count);
        graph::TuningChoice want = modelPick(s, t, &allImplemented);
        std::vector<PlannedLaunch> launches;
        ASSERT_EQ(planTasks({t}, s, &launches), ncclSuccess);
        ASSERT_EQ(launches.size(), 1u);
        EXPECT_EQ(launches[0].proto, want.proto);
        EXPECT_LE((int)launches[0].channels.size(), want.nChannels);
        if (count >= size_t(want.nChannels) * 1024) EXPECT_EQ((int)launches[0].channels.size(), want.nChannels);
        uint64_t total = 0;
        for (const Item& it : items(launches)) {
          EXPECT_EQ(it.w.algo, want.algo) << count;
          EXPECT_EQ(it.w.proto, want.proto) << count;
          if (want.proto == kSimple) EXPECT_GT(it.w.chunkElems, 0u);
          else EXPECT_EQ(it.w.chunkElems, 0u) << "LL/LL128: the kernel derives its chunk";
          total += it.w.chanCount;
        }
        EXPECT_EQ(total, count);
        sawLL = sawLL || want.proto == kLL;
        sawSimple = sawSimple || want.proto == kSimple;
        ++checked;
      }
    }
  }
  EXPECT_TRUE(sawLL && sawSimple) << "the sweep must cover both ends of the model";
  EXPECT_GT(checked, 50);
}

TEST(PlannerTuning, RealKernelsGetOnlyWhatIsSupported) {
  // Whatever dev::isSupported offers today, the planner's pair is one it accepts.
  PlanShape s = nvlinkShape(0, 2, 24, nullptr);
  for (size_t count : {size_t(1), size_t(1000), size_t(1) << 20, size_t(1) << 26}) {
    for (dev::DataType type : {dev::kFloat32, dev::kInt8, dev::kBfloat16}) {
      Task t = coll(TaskKind::kAllReduce, count, type);
      std::vector<PlannedLaunch> launches;
      ASSERT_EQ(planTasks({t}, s, &launches), ncclSuccess);
      graph::TuningChoice want = modelPick(s, t, &dev::isSupported);
      for (const Item& it : items(launches)) {
        EXPECT_TRUE(dev::isSupported((dev::Func)it.w.func, (dev::Algo)it.w.algo, (dev::Proto)it.w.proto,
                                     (dev::RedOp)it.w.redOp, (dev::DataType)it.w.dataType));
        EXPECT_EQ(it.w.algo, want.algo);
        EXPECT_EQ(it.w.proto, want.proto);
      }
    }
  }
}

TEST(PlannerTuning, SmallAllReducePicksLLWhenImplemented) {
  PlanShape s = nvlinkShape(1, 2);
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({coll(TaskKind::kAllReduce, 256)}, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].proto, kLL);
  EXPECT_EQ(launches[0].channels.size(), 1u);
  s.isSupported = &ringSimpleOnly;
  ASSERT_EQ(planTasks({coll(TaskKind::kAllReduce, 256)}, s, &launches), ncclSuccess);
  EXPECT_EQ(launches[0].proto, kSimple);
  EXPECT_EQ(launches[0].works[0][0].algo, kRing);
}

TEST(PlannerTuning, EnvironmentForcesTheChoice) {
  const Task small = coll(TaskKind::kAllReduce, 256);
  auto pickWith = [&](const char* algo, const char* proto, const Task& t, const graph::TuningConstants* k = nullptr) {
    test::ScopedEnv env;
    if (algo) env.set("NCCL_ALGO", algo);
    if (proto) env.set("NCCL_PROTO", proto);
    PlanShape s = nvlinkShape(0, 2);
    s.tuning.env = graph::algoProtoMasksFromEnv();
    s.constants = k;
    CollChoice c;
    EXPECT_EQ(chooseCollective(t, s, &c), ncclSuccess) << (algo ? algo : "") << " " << (proto ? proto : "");
    return c;
  };
  EXPECT_EQ(pickWith(nullptr, nullptr, small).proto, kLL);
  EXPECT_EQ(pickWith(nullptr, "Simple", small).proto, kSimple);
  int notLL = pickWith(nullptr, "^LL", small).proto;
  EXPECT_NE(notLL, kLL);
  EXPECT_EQ(pickWith(nullptr, "allreduce:LL128", small).proto, kLL128);
  EXPECT_EQ(pickWith("Tree", nullptr, small).algo, kTree);
  EXPECT_EQ(pickWith("allreduce:tree", nullptr, small).algo, kTree);
  // "allreduce:tree" leaves the other collectives alone.
  EXPECT_EQ(pickWith("allreduce:tree", nullptr, coll(TaskKind::kAllGather, 256)).algo, kRing);
  // A model in which Tree wins: NCCL_ALGO=Ring still gets Ring.
  graph::TuningConstants k = graph::TuningConstants::defaults();
  for (double& b : k.baseUs[kTree]) b = 0;
  EXPECT_EQ(pickWith(nullptr, nullptr, small, &k).algo, kTree);
  EXPECT_EQ(pickWith("Ring", nullptr, small, &k).algo, kRing);
  EXPECT_EQ(pickWith("allreduce:ring", nullptr, small, &k).algo, kRing);
}

TEST(PlannerTuning, ForcingAnUnimplementedPairFailsTheCall) {
  test::ScopedEnv env;
  env.set("NCCL_ALGO", "Tree");
  PlanShape s = nvlinkShape(0, 2, 24, &ringSimpleOnly);
  s.tuning.env = graph::algoProtoMasksFromEnv();
  std::vector<PlannedLaunch> launches;
  EXPECT_EQ(planTasks({coll(TaskKind::kAllReduce, 4096)}, s, &launches), ncclInvalidUsage);
  std::string why = log::lastErrorOfThread();
  EXPECT_NE(why.find("AllReduce"), std::string::npos) << why;
  EXPECT_NE(why.find("NCCL_ALGO"), std::string::npos) << why;
  double us = 0;
  EXPECT_EQ(estimateTasks({coll(TaskKind::kAllReduce, 4096)}, s, &us), ncclInvalidUsage);

  env.unset("NCCL_ALGO").set("NCCL_PROTO", "LL128");
  s.tuning.env = graph::algoProtoMasksFromEnv();
  EXPECT_EQ(planTasks({coll(TaskKind::kBroadcast, 4096)}, s, &launches), ncclInvalidUsage);
  why = log::lastErrorOfThread();
  EXPECT_NE(why.find("Broadcast"), std::string::npos) << why;
  EXPECT_NE(why.find("NCCL_PROTO"), std::string::npos) << why;
  // Point-to-point is not subject to NCCL_ALGO/NCCL_PROTO.
  EXPECT_EQ(planTasks({p2p(TaskKind::kSend, 1, 100)}, s, &launches), ncclSuccess);
}

TEST(PlannerTuning, ChannelBoundsAreRespected) {
  PlanShape s = nvlinkShape(0, 2);
  CollChoice c;
  ASSERT_EQ(chooseCollective(coll(TaskKind::kAllReduce, 4096), s, &c), ncclSuccess);
  ASSERT_LT(c.nChannels, 4) << "precondition: the model uses few channels for 16 KiB";
  s.minCollChannels = 4;
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({coll(TaskKind::kAllReduce, 4096)}, s, &launches), ncclSuccess);
  EXPECT_EQ(launches[0].channels.size(), 4u);
  // The minimum cannot exceed the channels that exist.
  s = nvlinkShape(0, 2, 3);
  s.minCollChannels = 8;
  s.tuning.maxChannels = 24;  // the model is told more than the communicator has
  ASSERT_EQ(planTasks({coll(TaskKind::kAllReduce, size_t(1) << 26)}, s, &launches), ncclSuccess);
  EXPECT_EQ(launches[0].channels.size(), 3u);
  ASSERT_EQ(chooseCollective(coll(TaskKind::kAllReduce, 1), s, &c), ncclSuccess);
  EXPECT_EQ(c.nChannels, 3);
}

TEST(PlannerTuning, LaunchesSplitByProtocolInCallOrder) {
  PlanShape s = nvlinkShape(0, 2);
  std::vector<Task> tasks = {coll(TaskKind::kAllReduce, 100), coll(TaskKind::kAllReduce, size_t(1) << 24),
                             coll(TaskKind::kAllReduce, 101), coll(TaskKind::kAllReduce, 102),
                             p2p(TaskKind::kSend, 1, 1000), p2p(TaskKind::kRecv, 1, 1000)};
  ASSERT_EQ(modelPick(s, tasks[0], &allImplemented).proto, kLL);
  ASSERT_EQ(modelPick(s, tasks[1], &allImplemented).proto, kSimple);
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks(tasks, s, &launches), ncclSuccess);
  std::vector<int> protos;
  for (const PlannedLaunch& l : launches) protos.push_back(l.proto);
  EXPECT_EQ(protos, (std::vector<int>{kLL, kSimple, kLL, kSimple}));
  // Channel 0 sees the collectives in call order, then the point-to-point item.
  std::vector<uint64_t> counts;
  for (const Item& it : items(launches)) {
    EXPECT_EQ(it.proto, it.w.proto);
    if (it.channel == 0) counts.push_back(it.w.func == dev::kFuncSendRecv ? 0 : it.w.count);
  }
  EXPECT_EQ(counts, (std::vector<uint64_t>{100, uint64_t(1) << 24, 101, 102, 0}));
  // 40 small LL items on one channel still split at kMaxWorksPerChannel, all LL.
  std::vector<Task> many(40, coll(TaskKind::kAllReduce, 64));
  ASSERT_EQ(planTasks(many, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].proto, kLL);
  EXPECT_EQ(launches[1].proto, kLL);
}

// Ranks that split a collective differently wait forever for each other: every rank must make
// the same choices, channels, offsets and chunks, for any rank count (issue 6: 3 to 64 ranks).
TEST(PlannerTuning, EveryRankPlansTheSameCollectives) {
  std::vector<Task> tasks;
  for (size_t count : {size_t(3), size_t(5000), size_t(1) << 18, size_t(1) << 23, size_t(77)}) {
    tasks.push_back(coll(TaskKind::kAllReduce, count));
    tasks.push_back(coll(TaskKind::kAllGather, count, dev::kBfloat16));
    tasks.push_back(coll(TaskKind::kReduceScatter, count, dev::kInt64));
    tasks.push_back(coll(TaskKind::kBroadcast, count, dev::kUint8));
    tasks.push_back(coll(TaskKind::kReduce, count, dev::kFloat16));
  }
  auto key = [](const std::vector<PlannedLaunch>& p) {
    std::vector<std::vector<uint64_t>> k;
    for (const Item& it : items(p))
      k.push_back({(uint64_t)it.launch, (uint64_t)it.proto, (uint64_t)it.channel, it.w.func, it.w.algo, it.w.proto,
                   it.w.count, it.w.chanOffset, it.w.chanCount, it.w.chunkElems, (uint64_t)it.w.root});
    return k;
  };
  // (ranks, nodes): one NVLink node, or nodes joined by a 12.5 GB/s-per-channel network, where
  // Tree (double binary tree across nodes) competes with Ring.
  for (auto [n, nodes] : {std::pair{3, 1}, {4, 1}, {5, 1}, {8, 1}, {16, 1}, {64, 1}, {16, 2}, {64, 8}}) {
    SCOPED_TRACE(std::to_string(n) + " ranks on " + std::to_string(nodes) + " nodes");
    std::vector<std::vector<PlannedLaunch>> plans(n);
    for (int r = 0; r < n; ++r) {
      PlanShape s = nvlinkShape(r, n);
      s.tuning.nNodes = nodes;
      s.tuning.interBwPerChannel = nodes > 1 ? 12.5 : 0;
      ASSERT_EQ(planTasks(tasks, s, &plans[r]), ncclSuccess);
    }
    EXPECT_GT(plans[0].size(), 1u) << "the mix must use more than one protocol";
    std::set<int> algos;
    for (const Item& it : items(plans[0])) algos.insert(it.w.algo);
    if (nodes > 1) EXPECT_TRUE(algos.count(dev::kAlgoTree)) << "across nodes some AllReduce takes Tree";
    for (int r = 1; r < n; ++r) ASSERT_EQ(key(plans[r]), key(plans[0])) << "rank " << r;
  }
}

TEST(PlannerTuning, EstimateIsTheSumOfTheModelsChoices) {
  PlanShape s = nvlinkShape(0, 4);
  Task ar = coll(TaskKind::kAllReduce, 1 << 18), ag = coll(TaskKind::kAllGather, 1000);
  double want = modelPick(s, ar, &allImplemented).timeUs + modelPick(s, ag, &allImplemented).timeUs;
  double us = -1;
  ASSERT_EQ(estimateTasks({ar, p2p(TaskKind::kSend, 1, 1 << 20), ag, coll(TaskKind::kAllReduce, 0)}, s, &us),
            ncclSuccess);
  EXPECT_DOUBLE_EQ(us, want);
  EXPECT_GT(us, 0);
  ASSERT_EQ(estimateTasks({}, s, &us), ncclSuccess);
  EXPECT_EQ(us, 0);
}

namespace {

// A communicator with just what the planner reads (no GPU, no peers).
std::unique_ptr<ncclComm> plannerOnlyComm(int rank, int nRanks) {
  auto c = std::make_unique<ncclComm>();
  c->rank = rank;
  c->nRanks = nRanks;
  c->nChannels = 2;
  std::vector<int> ring;
  for (int r = 0; r < nRanks; ++r) ring.push_back(r);
  c->rings.assign(2, ring);
  c->connPlan = transport::planConnections(rank, c->rings, 1);
  c->stepBytes = 1 << 19;
  c->tuning = nvlinkShape(rank, nRanks, 2).tuning;
  return c;
}

double realModelTime(const ncclComm& comm, const Task& t) {
  PlanShape s = nvlinkShape(comm.rank, comm.nRanks, comm.nChannels, &dev::isSupported);
  s.tuning = comm.tuning;
  s.tuning.meshChannels = (int)comm.connPlan.meshChannels.size();  // as the planner sets it (Direct)
  return modelPick(s, t, &dev::isSupported).timeUs;
}

}  // namespace

TEST(PlannerTuning, GroupSimulateEndReportsTheModel) {
  auto a = plannerOnlyComm(0, 2), b = plannerOnlyComm(1, 4);
  Task big = coll(TaskKind::kAllReduce, 1 << 22), small = coll(TaskKind::kAllReduce, 64);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;

  // Two tasks on one communicator add up; the slower communicator sets the group's time.
  ASSERT_EQ(groupStart(), ncclSuccess);
  ASSERT_EQ(enqueueTask(a.get(), big), ncclSuccess);
  ASSERT_EQ(enqueueTask(a.get(), small), ncclSuccess);
  ASSERT_EQ(enqueueTask(b.get(), small), ncclSuccess);
  ASSERT_EQ(groupSimulateEnd(&sim), ncclSuccess);
  double wantA = realModelTime(*a, big) + realModelTime(*a, small);
  double wantB = realModelTime(*b, small);
  ASSERT_GT(wantA, wantB);
  EXPECT_FLOAT_EQ(sim.estimatedTime, (float)wantA);
  EXPECT_TRUE(a->tasks.empty() && b->tasks.empty()) << "simulated tasks are dropped";

  // Nested: the inner end only closes a level; the outer one estimates everything.
  sim = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(groupStart(), ncclSuccess);
  ASSERT_EQ(groupStart(), ncclSuccess);
  ASSERT_EQ(enqueueTask(b.get(), big), ncclSuccess);
  ASSERT_EQ(groupSimulateEnd(&sim), ncclSuccess);
  EXPECT_EQ(sim.estimatedTime, -1.0f);
  EXPECT_EQ(b->tasks.size(), 1u);
  ASSERT_EQ(groupSimulateEnd(&sim), ncclSuccess);
  EXPECT_FLOAT_EQ(sim.estimatedTime, (float)realModelTime(*b, big));

  // Nothing queued: zero.
  sim = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(groupStart(), ncclSuccess);
  ASSERT_EQ(groupSimulateEnd(&sim), ncclSuccess);
  EXPECT_EQ(sim.estimatedTime, 0.0f);
  EXPECT_FALSE(inGroup());
}

TEST(TuningInput, NthreadsFollowsNcclsRules) {
  std::string note;
  EXPECT_EQ(graph::nthreadsSetting(-2, 32, 512, 512, &note), 512);
  EXPECT_EQ(note, "");
  EXPECT_EQ(graph::nthreadsSetting(256, 32, 512, 512, &note), 256);
  EXPECT_EQ(note, "accepted");
  EXPECT_EQ(graph::nthreadsSetting(100, 32, 512, 512, &note), 512);
  EXPECT_NE(note.find("multiple"), std::string::npos);
  EXPECT_EQ(graph::nthreadsSetting(1024, 32, 512, 512, &note), 512);
  EXPECT_EQ(graph::nthreadsSetting(32, 32, 512, 512, &note), 64);
}

TEST(TuningInput, FromTheChannelPlan) {
  graph::Topology topo;
  topo.ranks.resize(2);
  graph::ChannelPlan plan;
  plan.nHosts = 1;
  plan.ringSearch.typeIntra = graph::PathType::Nvl;
  plan.bwIntraPerChannel = 15.0;
  graph::TuningInput in = graph::tuningInputFor(topo, plan, 24);
  EXPECT_EQ(in.nRanks, 2);
  EXPECT_EQ(in.nNodes, 1);
  EXPECT_EQ(in.intraLink, graph::kLinkNvlink);
  EXPECT_EQ(in.intraBwPerChannel, 15.0);
  EXPECT_EQ(in.maxChannels, 24);
  plan.ringSearch.typeIntra = graph::PathType::Phb;
  in = graph::tuningInputFor(topo, plan, 4);
  EXPECT_EQ(in.intraLink, graph::kLinkPcie);
  EXPECT_FALSE(graph::ll128Usable(in));
  graph::TuningInput fb = graph::fallbackTuningInput(3, 2);
  EXPECT_EQ(fb.nRanks, 3);
  EXPECT_EQ(fb.maxChannels, 2);
  EXPECT_FALSE(graph::ll128Usable(fb));
}
