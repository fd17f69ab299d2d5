#include "graph/tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/log.h"
#include "core/param.h"

using namespace weft;
using namespace weft::graph;

namespace {

constexpr int kBc = dev::kFuncBroadcast, kAg = dev::kFuncAllGather, kAr = dev::kFuncAllReduce;
constexpr int kTree = dev::kAlgoTree, kRing = dev::kAlgoRing;
constexpr int kLL = dev::kProtoLL, kLL128 = dev::kProtoLL128, kSimple = dev::kProtoSimple;

// The 2xH200 NVLink machine as NCCL's topology search describes it: 24 channels of 15 GB/s.
TuningInput h200x2() {
  TuningInput in;
  in.nRanks = 2;
  in.intraLink = kLinkNvlink;
  in.intraBwPerChannel = 15.0;
  in.maxChannels = 24;
  in.minSm = 90;
  return in;
}

TuningInput nvlinkNode(int nRanks) {
  TuningInput in = h200x2();
  in.nRanks = nRanks;
  return in;
}

TuningInput pcieBox(int nRanks) {
  TuningInput in;
  in.nRanks = nRanks;
  in.intraLink = kLinkPcie;
  in.intraBwPerChannel = 12.0;
  in.maxChannels = 4;
  in.minSm = 80;
  return in;
}

TuningChoice pick(const TuningInput& in, int func, size_t bytes) {
  TuningChoice c;
  EXPECT_EQ(selectAlgoProto(in, TuningConstants::defaults(), func, bytes, &c), ncclSuccess)
      << collFuncName(func) << " " << bytes;
  return c;
}

std::vector<size_t> sizeSweep() {
  std::vector<size_t> v = {0, 1, 3, 100, 1000, 12345};
  for (size_t b = 8; b <= (size_t(1) << 35); b *= 2) {
    v.push_back(b);
    v.push_back(b + b / 3);
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool sameConstants(const TuningConstants& a, const TuningConstants& b) {
  return formatTuningConstants(a) == formatTuningConstants(b);
}

}  // namespace

TEST(Tuning, TinyMessagesOnNvlinkUseLL) {
  for (int n : {2, 4, 8}) {
    for (int f = 0; f < kNumCollFuncs; ++f) {
      TuningChoice c = pick(nvlinkNode(n), f, 8);
      EXPECT_EQ(c.proto, kLL) << n << " ranks " << collFuncName(f);
      EXPECT_EQ(c.nChannels, 1);
      EXPECT_GE(c.nThreads, 128);
      EXPECT_LT(c.nThreads, 512) << "a lone channel with 8 bytes does not need 512 threads";
      EXPECT_GT(c.timeUs, 0);
    }
  }
  TuningChoice pcie = pick(pcieBox(4), kAr, 64);
  EXPECT_EQ(pcie.proto, kLL);
}

TEST(Tuning, HugeMessagesUseSimpleWithAllChannels) {
  const TuningConstants& k = TuningConstants::defaults();
  for (TuningInput in : {h200x2(), nvlinkNode(8), pcieBox(4)}) {
    for (int f = 0; f < kNumCollFuncs; ++f) {
      TuningChoice c = pick(in, f, size_t(8) << 30);
      EXPECT_EQ(c.proto, kSimple) << in.nRanks << " ranks " << collFuncName(f);
      // All channels, or the function's share of them (Broadcast and Reduce: half).
      EXPECT_EQ(c.nChannels, (int)std::ceil(k.funcChannelShare[f] * in.maxChannels)) << collFuncName(f);
      EXPECT_EQ(c.nThreads, TuningConstants::defaults().maxThreads[kSimple]);
    }
  }
}

TEST(Tuning, CrossoversOnTheBaselineMachineFollowTheMeasurements) {
  // Measured with NCCL 2.28.9 (AllReduce): LL best up to ~2 MiB, LL128 at 8 MiB (48.4 us vs
  // Simple 49.6), Simple from 32 MiB (139 us vs LL128 150).
  TuningInput in = h200x2();
  EXPECT_EQ(pick(in, kAr, 512 << 10).proto, kLL);
  EXPECT_EQ(pick(in, kAr, 8 << 20).proto, kLL128);
  EXPECT_EQ(pick(in, kAr, 32 << 20).proto, kSimple);
  EXPECT_EQ(pick(in, kAr, 8 << 20).algo, kRing);
}

TEST(Tuning, LL128OnlyWhere128ByteStoresArriveWhole) {
  EXPECT_TRUE(ll128Usable(h200x2()));
  EXPECT_FALSE(ll128Usable(pcieBox(2))) << "PCIe";
  TuningInput volta = h200x2();
  volta.minSm = 70;
  EXPECT_TRUE(ll128Usable(volta));
  TuningInput pascal = h200x2();
  pascal.minSm = 60;
  EXPECT_FALSE(ll128Usable(pascal)) << "before sm_70";
  TuningInput ampereNodes = h200x2();
  ampereNodes.minSm = 80;
  ampereNodes.nRanks = 4;
  ampereNodes.nNodes = 2;
  ampereNodes.interBwPerChannel = 12;
  EXPECT_FALSE(ll128Usable(ampereNodes)) << "over the network only from sm_90";
  ampereNodes.minSm = 90;
  EXPECT_TRUE(ll128Usable(ampereNodes));
  TuningInput shared = pcieBox(2);  // what ranks sharing one GPU get: the fallback view
  shared.oneGpu = true;
  EXPECT_TRUE(ll128Usable(shared)) << "a hop inside one GPU's memory";

  // PCIe never gets LL128 at any size, even where it would be estimated fastest.
  for (size_t b : sizeSweep()) EXPECT_NE(pick(pcieBox(4), kAr, b).proto, kLL128) << b;
  TuningTable t;
  estimateTable(pcieBox(4), TuningConstants::defaults(), kAr, 1 << 20, &t);
  EXPECT_FALSE(t.estimates[kRing][kLL128].valid());
  EXPECT_FALSE(t.allowed[kRing][kLL128]);
}

TEST(Tuning, RingWhenTreeIsMasked) {
  TuningInput in = nvlinkNode(8);
  // With everything allowed, Tree wins somewhere for 8 ranks...
  bool treeSeen = false;
  for (size_t b : sizeSweep()) treeSeen |= pick(in, kAr, b).algo == kTree;
  EXPECT_TRUE(treeSeen) << "test premise: Tree is the best somewhere";
  // ...and never once NCCL_ALGO excludes it.
  in.env = parseAlgoProtoSettings("^tree", nullptr);
  for (size_t b : sizeSweep()) EXPECT_EQ(pick(in, kAr, b).algo, kRing) << b;
  in.env = parseAlgoProtoSettings("allreduce:ring", nullptr);
  for (size_t b : sizeSweep()) EXPECT_EQ(pick(in, kAr, b).algo, kRing) << b;
}

TEST(Tuning, NeverAPairTheBuildLacksOrTheEnvExcludes) {
  TuningInput in = nvlinkNode(4);
  in.env = parseAlgoProtoSettings(nullptr, "allreduce:^LL;broadcast:LL128,Simple");
  for (uint32_t& s : in.supported) s = pairBit(kRing, kLL) | pairBit(kRing, kLL128) | pairBit(kRing, kSimple);
  in.supported[kAg] = pairBit(kRing, kSimple);  // say AllGather only has Ring/Simple kernels
  for (size_t b : sizeSweep()) {
    for (int f = 0; f < kNumCollFuncs; ++f) {
      TuningChoice c = pick(in, f, b);
      EXPECT_EQ(c.algo, kRing) << "Tree is not in the build";
      EXPECT_TRUE(in.env.allows(f, c.algo, c.proto)) << collFuncName(f) << " " << b;
      EXPECT_TRUE(in.supported[f] & pairBit(c.algo, c.proto)) << collFuncName(f) << " " << b;
    }
    EXPECT_NE(pick(in, kAr, b).proto, kLL);
    EXPECT_NE(pick(in, kBc, b).proto, kLL);
    EXPECT_EQ(pick(in, kAg, b).proto, kSimple);
  }
  // Tiny AllReduce without LL goes to the next-lowest latency, LL128.
  EXPECT_EQ(pick(in, kAr, 8).proto, kLL128);
}

TEST(Tuning, NothingAllowedIsAnErrorNotAFallback) {
  TuningInput in = h200x2();
  in.env = parseAlgoProtoSettings("tree", nullptr);  // Tree only exists for AllReduce
  TuningChoice c;
  log::clearLastError();
  EXPECT_EQ(selectAlgoProto(in, TuningConstants::defaults(), kAg, 1024, &c), ncclInvalidUsage);
  EXPECT_NE(std::strstr(log::lastErrorOfThread(), "AllGather"), nullptr) << log::lastErrorOfThread();
  EXPECT_EQ(selectAlgoProto(in, TuningConstants::defaults(), kAr, 1024, &c), ncclSuccess);
  EXPECT_EQ(c.algo, kTree);

  TuningInput noLL128 = pcieBox(2);
  noLL128.env = parseAlgoProtoSettings(nullptr, "LL128");
  EXPECT_EQ(selectAlgoProto(noLL128, TuningConstants::defaults(), kAr, 1024, &c), ncclInvalidUsage)
      << "LL128 on PCIe stays off even when it is the only protocol asked for";
}

TEST(Tuning, BadInputsAreRejected) {
  TuningChoice c;
  const TuningConstants& k = TuningConstants::defaults();
  EXPECT_EQ(selectAlgoProto(h200x2(), k, dev::kFuncSendRecv, 8, &c), ncclInvalidArgument);
  EXPECT_EQ(selectAlgoProto(h200x2(), k, -1, 8, &c), ncclInvalidArgument);
  TuningInput bad = h200x2();
  bad.maxChannels = 0;
  EXPECT_EQ(selectAlgoProto(bad, k, kAr, 8, &c), ncclInvalidArgument);
  bad = h200x2();
  bad.intraBwPerChannel = 0;
  EXPECT_EQ(selectAlgoProto(bad, k, kAr, 8, &c), ncclInvalidArgument);
  bad = h200x2();
  bad.nRanks = 4;
  bad.nNodes = 2;  // no network bandwidth given
  EXPECT_EQ(selectAlgoProto(bad, k, kAr, 8, &c), ncclInvalidArgument);
  EXPECT_FALSE(estimateCollective(bad, k, kAr, kRing, kSimple, 8).valid());
}

TEST(Tuning, OneRankIsALocalCopy) {
  TuningInput in = h200x2();
  in.nRanks = 1;
  TuningChoice c = pick(in, kAr, 1 << 20);
  EXPECT_EQ(c.algo, kRing);
  EXPECT_EQ(c.proto, kSimple);
  EXPECT_EQ(c.nChannels, 1);
  EXPECT_EQ(c.timeUs, 0.0);
}

TEST(Tuning, EstimatesGrowWithBytes) {
  const TuningConstants& k = TuningConstants::defaults();
  for (TuningInput in : {h200x2(), nvlinkNode(8), pcieBox(4)}) {
    for (int f = 0; f < kNumCollFuncs; ++f) {
      double lastBest = 0;
      double last[dev::kNumAlgos][dev::kNumProtos] = {};
      for (size_t b : sizeSweep()) {
        double best = pick(in, f, b).timeUs;
        EXPECT_GE(best, lastBest) << in.nRanks << " ranks " << collFuncName(f) << " " << b;
        lastBest = best;
        for (int a = 0; a < dev::kNumAlgos; ++a) {
          for (int p = 0; p < dev::kNumProtos; ++p) {
            TuningChoice e = estimateCollective(in, k, f, a, p, b);
            if (!e.valid()) continue;
            EXPECT_GE(e.timeUs, last[a][p]) << algoName(a) << "/" << protoName(p) << " " << b;
            last[a][p] = e.timeUs;
          }
        }
      }
    }
  }
}

TEST(Tuning, ChannelCountGrowsWithSize) {
  const TuningConstants& k = TuningConstants::defaults();
  for (TuningInput in : {h200x2(), nvlinkNode(8), pcieBox(4)}) {
    for (int f = 0; f < kNumCollFuncs; ++f) {
      for (int a = 0; a < dev::kNumAlgos; ++a) {
        for (int p = 0; p < dev::kNumProtos; ++p) {
          int last = 0;
          for (size_t b : sizeSweep()) {
            TuningChoice e = estimateCollective(in, k, f, a, p, b);
            if (!e.valid()) continue;
            EXPECT_GE(e.nChannels, last) << algoName(a) << "/" << protoName(p) << " " << b;
            EXPECT_LE(e.nChannels, in.maxChannels);
            last = e.nChannels;
          }
        }
      }
    }
  }
  // The chosen configuration on the baseline machine as well, from 1 channel to all 24.
  for (int f = 0; f < kNumCollFuncs; ++f) {
    int last = 0;
    for (size_t b : sizeSweep()) {
      TuningChoice c = pick(h200x2(), f, b);
      EXPECT_GE(c.nChannels, last) << collFuncName(f) << " " << b;
      last = c.nChannels;
    }
    EXPECT_EQ(pick(h200x2(), f, 8).nChannels, 1);
    // Broadcast and Reduce (one-way chains) stop at their channel share, the others use all 24.
    const bool chain = f == dev::kFuncBroadcast || f == dev::kFuncReduce;
    EXPECT_EQ(last, chain ? 12 : 24) << collFuncName(f);
  }
}

// channelshare.<func> caps the channel count of a call and leaves its estimate alone; Direct
// (its own channel rule) is not capped.
TEST(Tuning, ChannelShareCapsTheCountNotTheEstimate) {
  TuningInput in = h200x2();
  in.maxChannels = 32;
  TuningConstants k = TuningConstants::defaults();
  const size_t big = size_t(1) << 30;
  TuningChoice half = estimateCollective(in, k, dev::kFuncBroadcast, kRing, kSimple, big);
  EXPECT_EQ(half.nChannels, 16);
  EXPECT_EQ(estimateCollective(in, k, dev::kFuncAllReduce, kRing, kSimple, big).nChannels, 32);
  k.funcChannelShare[dev::kFuncBroadcast] = 1.0;
  TuningChoice all = estimateCollective(in, k, dev::kFuncBroadcast, kRing, kSimple, big);
  EXPECT_EQ(all.nChannels, 32);
  EXPECT_EQ(all.timeUs, half.timeUs);
  k.funcChannelShare[dev::kFuncBroadcast] = 0.3;  // 9.6 channels: rounded up
  EXPECT_EQ(estimateCollective(in, k, dev::kFuncBroadcast, kRing, kSimple, big).nChannels, 10);
  k.funcChannelShare[dev::kFuncBroadcast] = 0;  // never below one channel
  EXPECT_EQ(estimateCollective(in, k, dev::kFuncBroadcast, kRing, kSimple, big).nChannels, 1);
  in.meshChannels = 32;
  k.funcChannelShare[dev::kFuncAllGather] = 0.25;
  EXPECT_EQ(estimateCollective(in, k, dev::kFuncAllGather, dev::kAlgoDirect, kLL, big).nChannels, 32);
  EXPECT_EQ(estimateCollective(in, k, dev::kFuncAllGather, kRing, kSimple, big).nChannels, 8);
}

TEST(Tuning, MoreNodesCostNetworkLatencyAndBandwidth) {
  const TuningConstants& k = TuningConstants::defaults();
  TuningInput one = nvlinkNode(8);
  TuningInput two = one;
  two.nNodes = 2;
  two.interBwPerChannel = 6.0;  // slower than NVLink
  for (int p : {kLL, kLL128, kSimple}) {
    EXPECT_GT(estimateCollective(two, k, kAr, kRing, p, 8).timeUs,
              estimateCollective(one, k, kAr, kRing, p, 8).timeUs) << "network hops cost more";
    EXPECT_GT(estimateCollective(two, k, kAr, kRing, p, 1 << 30).timeUs,
              1.5 * estimateCollective(one, k, kAr, kRing, p, 1 << 30).timeUs) << "network bandwidth limits";
  }
  // PAT: AllGather/ReduceScatter with Simple and one rank per node only.
  TuningInput perNode = two;
  perNode.nRanks = perNode.nNodes = 4;
  EXPECT_TRUE(pairModeled(perNode, kAg, dev::kAlgoPat, kSimple));
  EXPECT_FALSE(pairModeled(perNode, kAg, dev::kAlgoPat, kLL));
  EXPECT_FALSE(pairModeled(perNode, kAr, dev::kAlgoPat, kSimple));
  EXPECT_FALSE(pairModeled(two, kAg, dev::kAlgoPat, kSimple));
  EXPECT_FALSE(pairModeled(one, kAr, dev::kAlgoNvls, kSimple)) << "NVLS is never modeled";
  EXPECT_FALSE(pairModeled(one, kAr, dev::kAlgoCollnetDirect, kSimple));
  EXPECT_FALSE(pairModeled(one, kBc, kTree, kSimple)) << "Tree is AllReduce only";
}

TEST(Tuning, TreeChainRanksForwardTwice) {
  // With 2 ranks each end sends the data once (measured: Tree matches Ring); with more, the
  // middle of the chain sends everything up and down, twice the bytes of the 2-rank case.
  const TuningConstants& k = TuningConstants::defaults();
  double two = estimateCollective(nvlinkNode(2), k, kAr, kTree, kSimple, size_t(1) << 32).timeUs;
  double eight = estimateCollective(nvlinkNode(8), k, kAr, kTree, kSimple, size_t(1) << 32).timeUs;
  EXPECT_GT(eight / two, 1.8);
  EXPECT_LT(eight / two, 2.2);
}

TEST(Tuning, TableMarksWhatIsAllowed) {
  TuningInput in = h200x2();
  in.env = parseAlgoProtoSettings(nullptr, "^LL128");
  in.supported[kAr] &= ~pairBit(kTree, kSimple);
  TuningTable t;
  estimateTable(in, TuningConstants::defaults(), kAr, 1 << 20, &t);
  EXPECT_TRUE(t.estimates[kRing][kLL128].valid()) << "estimates cover excluded pairs too";
  EXPECT_FALSE(t.allowed[kRing][kLL128]);
  EXPECT_TRUE(t.estimates[kTree][kSimple].valid());
  EXPECT_FALSE(t.allowed[kTree][kSimple]);
  EXPECT_TRUE(t.allowed[kRing][kSimple]);
  EXPECT_TRUE(t.allowed[kTree][kLL]);
  EXPECT_FALSE(t.estimates[dev::kAlgoNvls][kSimple].valid());
  std::string summary = formatTuningSummary(in, TuningConstants::defaults());
  EXPECT_NE(summary.find("AllReduce"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Ring/Simple"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("LL128"), std::string::npos) << "excluded pairs are not listed: " << summary;
}

// The fitted constants reproduce the measurements they were fitted to, within the residuals
// stated in tests/unit/data/tuning-fit.md (rms 3.7 %, worst 11.4 %).
TEST(TuningFit, ReproducesTheBaselineMeasurements) {
  std::ifstream data(std::string(WEFT_SOURCE_DIR) + "/tests/unit/data/tuning-baseline-h200x2.txt");
  ASSERT_TRUE(data.is_open());
  TuningInput in = h200x2();
  const TuningConstants& k = TuningConstants::defaults();
  std::string line;
  int fitted = 0, checked = 0;
  double sumSq = 0;
  while (std::getline(data, line)) {
    std::istringstream f(line.substr(0, line.find('#')));
    std::string func, algo, proto, use;
    size_t bytes;
    double us;
    if (!(f >> func >> algo >> proto) || func == "config" || func == "fix") continue;
    ASSERT_TRUE(f >> bytes >> us >> use) << line;
    int fi = -1, ai = -1, pi = -1;
    for (int i = 0; i < kNumCollFuncs; ++i) if (strcasecmp(func.c_str(), collFuncName(i)) == 0) fi = i;
    for (int i = 0; i < dev::kNumAlgos; ++i) if (strcasecmp(algo.c_str(), algoName(i)) == 0) ai = i;
    for (int i = 0; i < dev::kNumProtos; ++i) if (strcasecmp(proto.c_str(), protoName(i)) == 0) pi = i;
    ASSERT_TRUE(fi >= 0 && ai >= 0 && pi >= 0) << line;
    TuningChoice e = estimateCollective(in, k, fi, ai, pi, bytes);
    ASSERT_TRUE(e.valid()) << line;
    double rel = e.timeUs / us - 1.0;
    if (use == "fit") {
      EXPECT_LT(std::fabs(rel), 0.115) << line << " -> model " << e.timeUs;
      sumSq += rel * rel;
      ++fitted;
    } else {
      EXPECT_LT(std::fabs(rel), 0.09) << line << " -> model " << e.timeUs;
      ++checked;
    }
  }
  EXPECT_EQ(fitted, 55);
  EXPECT_EQ(checked, 2);
  EXPECT_LT(std::sqrt(sumSq / fitted), 0.038);
}

TEST(TuningFit, DefaultsAreWhatTheFitScriptWrote) {
  std::string text =
      readFile(std::string(WEFT_SOURCE_DIR) + "/tests/unit/data/tuning-h200x2-nccl-2.28.9.conf");
  ASSERT_FALSE(text.empty());
  TuningConstants k = TuningConstants::defaults();
  std::string why;
  ASSERT_EQ(parseTuningText(text, &k, &why), ncclSuccess) << why;
  EXPECT_TRUE(sameConstants(k, TuningConstants::defaults()))
      << "src/graph/tuning_constants.cc and the fit output differ";
}

TEST(TuningConstantsText, FormatRoundTripsAndParsesEveryKeyKind) {
  TuningConstants k = TuningConstants::defaults();
  std::string why;
  ASSERT_EQ(parseTuningText(
                "# comment\n base.ring.ll = 3.5\nHW.PCIE.Tree.LL128=2.25 ; bweff.tree.simple = 0.5\n"
                "step.ring.simple = 0 # trailing comment\nprotoeff.ll = 0.45\nfuncbw.allgather = 0.9\n"
                "funcstep.reduce = 2\nthreshold.ring.simple = 128\nmaxthreads.ll128 = 512\n"
                "channelshare.broadcast = 0.75\nbwcap.direct.ll = 80\ndefault.LL128 = 0\n\n",
                &k, &why),
            ncclSuccess)
      << why;
  EXPECT_EQ(k.baseUs[kRing][kLL], 3.5);
  EXPECT_EQ(k.hwUs[kLinkPcie][kTree][kLL128], 2.25);
  EXPECT_EQ(k.bwEff[kTree][kSimple], 0.5);
  EXPECT_EQ(k.stepUs[kRing][kSimple], 0.0);
  EXPECT_EQ(k.protoEff[kLL], 0.45);
  EXPECT_EQ(k.funcBwEff[kAg], 0.9);
  EXPECT_EQ(k.funcStepScale[dev::kFuncReduce], 2.0);
  EXPECT_EQ(k.threadThreshold[kRing][kSimple], 128);
  EXPECT_EQ(k.maxThreads[kLL128], 512);
  EXPECT_EQ(k.funcChannelShare[dev::kFuncBroadcast], 0.75);
  EXPECT_EQ(k.bwCapGBs[dev::kAlgoDirect][kLL], 80.0);
  EXPECT_EQ(k.protoByDefault[kLL128], 0.0);
  EXPECT_EQ(k.protoByDefault[kSimple], 1.0);

  TuningConstants back = TuningConstants::defaults();
  ASSERT_EQ(parseTuningText(formatTuningConstants(k), &back, &why), ncclSuccess) << why;
  EXPECT_TRUE(sameConstants(k, back));
  EXPECT_EQ(back.hwUs[kLinkPcie][kTree][kLL128], 2.25);
  EXPECT_FALSE(sameConstants(k, TuningConstants::defaults()));
}

TEST(TuningConstantsText, BadTextIsRejectedWithoutPartialChanges) {
  const char* bad[] = {"base.ring = 3",        "base.ring.ll.x = 3", "base.warp.ll = 3",
                       "bweff.ring.ll = -1",   "step.ring.ll = abc", "maxthreads.ll = 1.5",
                       "threshold.ring.ll = 0", "hw.infiniband.ring.ll = 1", "funcbw.sendrecv = 1",
                       "just words",           "= 4",                "base.ring.ll = nan"};
  for (const char* text : bad) {
    TuningConstants k = TuningConstants::defaults();
    std::string why;
    std::string full = std::string("base.tree.ll = 99\n") + text;
    EXPECT_EQ(parseTuningText(full, &k, &why), ncclInvalidUsage) << text;
    EXPECT_FALSE(why.empty());
    EXPECT_TRUE(sameConstants(k, TuningConstants::defaults())) << text << ": partial update";
  }
}

TEST(TuningConstantsText, EnvironmentFileThenInlineSettings) {
  std::string path = std::string(WEFT_BINARY_DIR) + "/tuning_test_constants.conf";
  {
    std::ofstream out(path);
    out << "base.ring.ll = 1.25\nbase.ring.simple = 2.5\n";
  }
  setenv("NCCL_WEFT_TUNING_FILE", path.c_str(), 1);
  setenv("NCCL_WEFT_TUNING", "base.ring.simple=3.75;bweff.ring.ll=0.5", 1);
  param::resetForTesting();
  TuningConstants k = tuningConstantsFromEnv();
  EXPECT_EQ(k.baseUs[kRing][kLL], 1.25) << "from the file";
  EXPECT_EQ(k.baseUs[kRing][kSimple], 3.75) << "inline settings win over the file";
  EXPECT_EQ(k.bwEff[kRing][kLL], 0.5);
  EXPECT_EQ(k.baseUs[kTree][kSimple], TuningConstants::defaults().baseUs[kTree][kSimple]);

  // A bad file or a missing one is warned about and skipped; the inline part still applies.
  {
    std::ofstream out(path);
    out << "base.ring.ll = 1.25\nbogus.key = 1\n";
  }
  param::resetForTesting();
  log::clearLastError();
  k = tuningConstantsFromEnv();
  EXPECT_EQ(k.baseUs[kRing][kLL], TuningConstants::weftCalibrated().baseUs[kRing][kLL]);
  EXPECT_EQ(k.baseUs[kRing][kSimple], 3.75);
  EXPECT_NE(std::strstr(log::lastErrorOfThread(), "bogus.key"), nullptr) << log::lastErrorOfThread();

  setenv("NCCL_WEFT_TUNING_FILE", "/nonexistent/weft-tuning.conf", 1);
  unsetenv("NCCL_WEFT_TUNING");
  param::resetForTesting();
  log::clearLastError();
  k = tuningConstantsFromEnv();
  EXPECT_TRUE(sameConstants(k, TuningConstants::weftCalibrated()));
  EXPECT_NE(std::strstr(log::lastErrorOfThread(), "weft-tuning.conf"), nullptr);

  unsetenv("NCCL_WEFT_TUNING_FILE");
  param::resetForTesting();
  std::remove(path.c_str());
}

TEST(TuningConstantsText, RefittedConstantsChangeTheChoice) {
  // The lead's path after measuring weft's kernels: a faster Simple protocol moves the crossover.
  TuningConstants k = TuningConstants::defaults();
  std::string why;
  TuningChoice c;
  ASSERT_EQ(selectAlgoProto(h200x2(), k, kAr, 8 << 20, &c), ncclSuccess);
  EXPECT_EQ(c.proto, kLL128);
  ASSERT_EQ(parseTuningText("base.ring.simple = 2; step.ring.simple = 0.2", &k, &why), ncclSuccess);
  ASSERT_EQ(selectAlgoProto(h200x2(), k, kAr, 8 << 20, &c), ncclSuccess);
  EXPECT_EQ(c.proto, kSimple);
}

// weft's calibration overlays three constants of the NCCL fit, and with it the model picks on the
// 2xH200 machine (weft's 32 channels, every one a mesh channel) what weft's kernels measured
// fastest there (session 9): Direct/LL for small all_reduce/all_gather, Ring/Simple from 2 MiB
// (all_reduce) and 4 MiB (all_gather), Ring/LL for small reduce_scatter.
TEST(Tuning, WeftCalibrationMovesTheCrossoversToWhatWeftsKernelsMeasured) {
  const TuningConstants nccl = TuningConstants::defaults(), weft = TuningConstants::weftCalibrated();
  TuningConstants expected = nccl;
  expected.baseUs[kRing][kSimple] = 5.8;
  expected.baseUs[kRing][kLL] = 3.73;
  expected.bwEff[kRing][kLL] = 1.0;
  expected.bwCapGBs[kRing][kLL] = 125;
  expected.baseUs[dev::kAlgoDirect][kLL] = 4.23;
  expected.bwEff[dev::kAlgoDirect][kLL] = 1.2;
  expected.bwCapGBs[dev::kAlgoDirect][kLL] = 80;
  expected.protoByDefault[kLL128] = 0;
  EXPECT_TRUE(sameConstants(weft, expected));
  EXPECT_FALSE(sameConstants(weft, nccl));

  TuningInput in = h200x2();
  in.maxChannels = 32;
  in.meshChannels = 32;  // every pair the build has, LL128 included: default.ll128=0 keeps it out
  auto choose = [&](const TuningConstants& k, int func, size_t bytes) {
    TuningChoice c;
    EXPECT_EQ(selectAlgoProto(in, k, func, bytes, &c), ncclSuccess);
    return std::make_pair(c.algo, c.proto);
  };
  // What session 12 measured fastest on 2xH200 in CUDA graphs (tuning-fit.md).
  const auto direct = std::make_pair((int)dev::kAlgoDirect, kLL), ringSimple = std::make_pair(kRing, kSimple);
  const auto ringLL = std::make_pair(kRing, kLL);
  EXPECT_EQ(choose(weft, kAr, 8), direct);
  EXPECT_EQ(choose(weft, kAr, 64 << 10), direct);
  EXPECT_EQ(choose(weft, kAr, 128 << 10), ringLL);
  EXPECT_EQ(choose(weft, kAr, 512 << 10), ringLL);  // Direct 11.70 us, Ring/LL 8.99
  EXPECT_EQ(choose(weft, kAr, 1 << 20), ringLL);
  EXPECT_EQ(choose(weft, kAr, 2 << 20), ringSimple);
  EXPECT_EQ(choose(nccl, kAr, 2 << 20), direct);  // what the NCCL fit alone picked (0.96x NCCL there)
  EXPECT_EQ(choose(weft, kAr, 4 << 20), ringSimple);
  EXPECT_EQ(choose(weft, kAg, 8), ringLL);  // Direct 4.8 us, Ring/LL 3.8
  EXPECT_EQ(choose(weft, kAg, 1 << 20), ringLL);
  EXPECT_EQ(choose(weft, kAg, 8 << 20), ringSimple);
  EXPECT_EQ(choose(weft, dev::kFuncReduceScatter, 64 << 10), ringLL);
  EXPECT_EQ(choose(weft, dev::kFuncReduceScatter, 8 << 20), ringSimple);
  EXPECT_EQ(choose(weft, kBc, 4 << 10), ringLL);  // the general Simple kernel took 5.3 us, Ring/LL 2.7
  EXPECT_EQ(choose(weft, dev::kFuncReduce, 8), ringLL);
  EXPECT_EQ(choose(weft, kBc, 2 << 20), ringSimple);
}

// default.ll128=0 (weft's calibration until its LL128 kernel is measured on NVLink): the tuner
// never picks LL128 on its own, but does where NCCL_PROTO names it, as NCCL with an explicit LL128.
TEST(Tuning, LL128OnlyWhenNamedWhileItIsNotPickedByDefault) {
  const TuningConstants weft = TuningConstants::weftCalibrated();
  TuningInput in = h200x2();
  in.maxChannels = 32;
  auto choose = [&](const TuningInput& x, int func, size_t bytes) {
    TuningChoice c;
    EXPECT_EQ(selectAlgoProto(x, weft, func, bytes, &c), ncclSuccess) << bytes;
    return c;
  };
  bool ncclPicksIt = false;
  for (size_t b : sizeSweep()) {
    for (int f : {kAr, kAg, (int)dev::kFuncReduceScatter, kBc, (int)dev::kFuncReduce}) EXPECT_NE(choose(in, f, b).proto, kLL128) << b;
    ncclPicksIt = ncclPicksIt || pick(in, kAr, b).proto == kLL128;
  }
  EXPECT_TRUE(ncclPicksIt) << "the NCCL-fitted constants (default.ll128=1) do pick it somewhere";

  TuningInput only = in;
  only.env = parseAlgoProtoSettings(nullptr, "allreduce:LL128");
  EXPECT_EQ(choose(only, kAr, 8).proto, kLL128);
  EXPECT_EQ(choose(only, kAr, 1 << 30).proto, kLL128);
  EXPECT_NE(choose(only, kAg, 1 << 20).proto, kLL128) << "AllGather's protocols were not set";

  TuningTable t;
  TuningInput inverted = in;
  inverted.env = parseAlgoProtoSettings(nullptr, "^LL");  // NCCL: every protocol but LL, explicitly
  estimateTable(inverted, weft, kAr, 4 << 20, &t);
  EXPECT_TRUE(t.allowed[kRing][kLL128]);
  estimateTable(in, weft, kAr, 4 << 20, &t);
  EXPECT_TRUE(t.estimates[kRing][kLL128].valid());
  EXPECT_FALSE(t.allowed[kRing][kLL128]);
  EXPECT_NE(formatTuningSummary(in, weft).find("LL128 only where NCCL_PROTO names it"), std::string::npos);

  TuningInput pcie = pcieBox(2);
  pcie.env = only.env;
  TuningChoice c;
  EXPECT_EQ(selectAlgoProto(pcie, weft, kAr, 8, &c), ncclInvalidUsage) << "named, but stores may tear on PCIe";
}

// bwcap.<algo>.<proto>: channels add bandwidth until together they reach the cap.
TEST(Tuning, BandwidthCapBoundsWhatAllChannelsMoveTogether) {
  TuningInput in = h200x2();
  in.maxChannels = 32;
  TuningConstants k = TuningConstants::defaults();
  const size_t big = 64 << 20;  // 32 channels
  const TuningChoice free = estimateCollective(in, k, kAr, kRing, kLL, big);
  k.bwCapGBs[kRing][kLL] = 50;
  const TuningChoice capped = estimateCollective(in, k, kAr, kRing, kLL, big);
  EXPECT_EQ(capped.nChannels, free.nChannels);  // the cap prices channels, it does not drop them
  // AllReduce on 2 ranks moves `big` bytes per rank; at 50 GB/s that alone is big / 50e3 us.
  EXPECT_GE(capped.timeUs, double(big) / 50e3);
  EXPECT_GT(capped.timeUs, free.timeUs * 1.5);
  // One channel's worth of data stays below the cap: unchanged.
  k.bwCapGBs[kRing][kLL] = 1000;
  EXPECT_DOUBLE_EQ(estimateCollective(in, k, kAr, kRing, kLL, 4096).timeUs,
                   estimateCollective(in, TuningConstants::defaults(), kAr, kRing, kLL, 4096).timeUs);
  // Direct too.
  in.meshChannels = 32;
  TuningConstants d = TuningConstants::defaults();
  const double before = estimateCollective(in, d, kAr, dev::kAlgoDirect, kLL, 1 << 20).timeUs;
  d.bwCapGBs[dev::kAlgoDirect][kLL] = 10;
  EXPECT_GE(estimateCollective(in, d, kAr, dev::kAlgoDirect, kLL, 1 << 20).timeUs, double(1 << 20) / 10e3);
  EXPECT_GT(estimateCollective(in, d, kAr, dev::kAlgoDirect, kLL, 1 << 20).timeUs, before);
}

// Through host memory (kLinkShm) every protocol pays a PCIe round trip per hop and shmcap bounds
// what a rank moves: LL only while latency rules (the session-33 runs crossed between 8 and 32 KiB), then
// Simple; never LL128. The one-GPU test mode (NCCL_WEFT_SHM=2) gives the same input.
TEST(Tuning, HostMemoryHopsLeaveLLForSimpleEarly) {
  TuningInput shm = h200x2();
  shm.intraLink = kLinkShm;
  shm.maxChannels = 32;
  shm.meshChannels = 32;
  const TuningConstants k = TuningConstants::weftCalibrated();
  auto choose = [&](size_t bytes) {
    TuningChoice c;
    EXPECT_EQ(selectAlgoProto(shm, k, kAr, bytes, &c), ncclSuccess) << bytes;
    return c;
  };
  EXPECT_EQ(choose(8).proto, kLL);
  EXPECT_EQ(choose(8 << 10).proto, kLL);
  for (size_t b : {size_t(64) << 10, size_t(256) << 10, size_t(2) << 20, size_t(256) << 20}) {
    const TuningChoice c = choose(b);
    EXPECT_EQ(c.proto, kSimple) << b;
    EXPECT_EQ(c.algo, kRing) << b;
  }
  for (int f = 0; f < kNumCollFuncs; ++f) EXPECT_FALSE(pairModeled(shm, f, kRing, kLL128)) << f;
  // 8 MiB of Ring/Simple: at most shmcap.simple GB/s, so no faster than 8 MiB / 16 GB/s.
  EXPECT_GE(choose(8 << 20).timeUs, double(8 << 20) / (k.shmCapGBs[kSimple] * 1e3));
  // The same call over NVLink is far cheaper: the caps and hops are the host path's only.
  TuningChoice nv;
  ASSERT_EQ(selectAlgoProto(h200x2(), k, kAr, 8 << 20, &nv), ncclSuccess);
  EXPECT_LT(nv.timeUs * 5, choose(8 << 20).timeUs);
  // shmcap and hw.shm read and write back.
  TuningConstants t = k;
  std::string why;
  ASSERT_EQ(parseTuningText("shmcap.simple = 7;hw.shm.ring.ll = 3", &t, &why), ncclSuccess) << why;
  EXPECT_EQ(t.shmCapGBs[kSimple], 7.0);
  EXPECT_EQ(t.hwUs[kLinkShm][kRing][kLL], 3.0);
  TuningConstants back = k;
  ASSERT_EQ(parseTuningText(formatTuningConstants(t), &back, &why), ncclSuccess) << why;
  EXPECT_TRUE(sameConstants(t, back));
  EXPECT_NE(formatTuningSummary(shm, k).find("shm"), std::string::npos);
}
