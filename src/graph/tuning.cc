#include "graph/tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/log.h"

namespace weft::graph {
namespace {

constexpr int kMinThreads = 128;  // four warps: below that a channel cannot keep a link busy

bool isCollFunc(int func) { return func >= 0 && func < kNumCollFuncs; }

int ceilLog2(int v) {
  int r = 0;
  while ((1 << r) < v) ++r;
  return r;
}

bool inputUsable(const TuningInput& in) {
  return in.nRanks >= 1 && in.nNodes >= 1 && in.nNodes <= in.nRanks && in.maxChannels >= 1 &&
         in.intraBwPerChannel > 0 && (in.nNodes == 1 || in.interBwPerChannel > 0) &&
         (in.intraLink == kLinkNvlink || in.intraLink == kLinkPcie || in.intraLink == kLinkShm);
}

// How many times the call's bytes cross the busiest link of a channel, relative to `bytes`.
double busFactor(int func, int algo, int n) {
  if (algo == dev::kAlgoTree) return n <= 2 ? 1.0 : 2.0;
  if (func == dev::kFuncAllReduce) return 2.0 * (n - 1) / n;
  if (func == dev::kFuncAllGather || func == dev::kFuncReduceScatter) return double(n - 1) / n;
  return 1.0;
}

// nccl-tests' bus bandwidth factor, to report bandwidths users can compare.
double testsBusFactor(int func, int n) {
  if (func == dev::kFuncAllReduce) return 2.0 * (n - 1) / n;
  if (func == dev::kFuncAllGather || func == dev::kFuncReduceScatter) return double(n - 1) / n;
  return 1.0;
}

double latencyUs(const TuningInput& in, const TuningConstants& k, int func, int algo, int proto) {
  int n = in.nRanks, nodes = in.nNodes, local = std::max(1, n / nodes);
  double hwIntra = k.hwUs[in.intraLink][algo][proto];
  double hwNet = k.hwUs[kLinkNet][algo][proto];
  double hops = 0;
  if (algo == dev::kAlgoRing) {
    bool twoPasses = func == dev::kFuncAllReduce;  // reduce-scatter pass, then all-gather pass
    int steps = (twoPasses ? 2 : 1) * (n - 1);
    int netSteps = nodes > 1 ? (twoPasses ? 2 : 1) * (nodes - 1) : 0;
    hops = (steps - netSteps) * hwIntra + netSteps * hwNet;
  } else if (algo == dev::kAlgoTree) {
    // Up the tree then down: a chain inside each node, a binary tree across nodes.
    hops = 2.0 * ((local - 1) * hwIntra + ceilLog2(nodes) * hwNet);
  } else if (algo == dev::kAlgoPat) {
    hops = ceilLog2(n) * hwNet;
  }
  return k.baseUs[algo][proto] + hops;
}

// Pipelining s bytes through steps that each cost alpha us, at b bytes/us: with chunks of size
// c the cost is (s/c) alpha + c/b (per-chunk syncs plus filling the pipe), smallest at
// c = sqrt(s alpha b); a chunk cannot exceed one buffer step.
double pipelineUs(double s, double alpha, double b, double stepBytes) {
  if (alpha <= 0 || s <= 0) return 0;
  double best = std::sqrt(s * alpha * b);
  if (best <= stepBytes) return 2.0 * std::sqrt(s * alpha / b);
  return s * alpha / stepBytes + stepBytes / b;
}

TuningChoice fastestAllowed(const TuningTable& table) {
  TuningChoice best;
  for (int a = 0; a < dev::kNumAlgos; ++a) {
    for (int p = 0; p < dev::kNumProtos; ++p) {
      if (table.allowed[a][p] && table.estimates[a][p].timeUs < best.timeUs) best = table.estimates[a][p];
    }
  }
  return best;
}

// One channel's bandwidth b (bytes/us) when `channels` channels share the pair's cap (bwcap), and
// through host memory the protocol's shmcap as well.
double cappedChannelBw(const TuningInput& in, const TuningConstants& k, int algo, int proto, double b,
                       double channels) {
  const double cap = k.bwCapGBs[algo][proto] * 1e3;
  if (cap > 0) b = std::min(b, cap / channels);
  const double shmCap = in.intraLink == kLinkShm ? k.shmCapGBs[proto] * 1e3 : 0;
  return shmCap > 0 ? std::min(b, shmCap / channels) : b;
}

// Direct (pairModeled checked): see tuning.h. A channel per threshold x maxThreads bytes of the
// call (Ring's rule), within the mesh channels (LL) or all channels (Simple: no connections).
TuningChoice estimateDirect(const TuningInput& in, const TuningConstants& k, int func, int p, size_t bytes) {
  constexpr int a = dev::kAlgoDirect;
  const int n = in.nRanks;
  const bool symmetric = p == dev::kProtoSimple;
  const int maxChannels = std::max(1, symmetric ? in.maxChannels : std::min(in.maxChannels, in.meshChannels));
  const double perChannel = double(std::max(1, k.threadThreshold[a][p])) * k.maxThreads[p];
  const double b = in.intraBwPerChannel * 1e3 * k.protoEff[p] * k.bwEff[a][p];  // bytes/us
  TuningChoice best;
  if (!(b > 0)) return best;
  // hops and bytes sent per rank relative to `bytes`, per variant
  auto consider = [&](int hops, double factor, bool twoShot) {
    const double sent = double(bytes) * factor;
    const double channels = std::clamp(double(bytes) / perChannel, 1.0, double(maxChannels));
    const double bc = cappedChannelBw(in, k, a, p, b, channels);
    TuningChoice c;
    c.algo = a;
    c.proto = p;
    c.nChannels = (int)std::clamp<double>(std::ceil(double(bytes) / perChannel), 1.0, maxChannels);
    c.nThreads = k.maxThreads[p];
    c.twoShot = twoShot;
    c.timeUs = k.baseUs[a][p] + hops * k.hwUs[in.intraLink][a][p] + sent / channels / bc;
    if (c.timeUs < best.timeUs) best = c;
  };
  if (symmetric) {
    // AllReduce is always two-shot here (the one-shot way would race in place: run_symmetric.cuh).
    if (func == dev::kFuncAllReduce) consider(4, busFactor(func, dev::kAlgoRing, n), true);
    else consider(3, busFactor(func, dev::kAlgoRing, n), false);
  } else if (func == dev::kFuncAllGather) {
    consider(1, double(n - 1) / n, false);
  } else {
    if (in.directTwoShot != 1) consider(1, double(n - 1), false);
    if (in.directTwoShot != 0) consider(2, 2.0 * (n - 1) / n, true);
  }
  return best;
}

// For logs: why LL128 may not be picked.
const char* ll128Note(const TuningInput& in, const TuningConstants& k) {
  if (!ll128Usable(in)) return ", no LL128";
  return k.protoByDefault[dev::kProtoLL128] > 0 ? "" : ", LL128 only where NCCL_PROTO names it";
}

}  // namespace

bool ll128Usable(const TuningInput& in) {
  if (in.minSm < 70) return false;
  if (in.oneGpu) return true;
  if (in.intraLink != kLinkNvlink) return false;
  return in.nNodes == 1 || in.minSm >= 90;
}

bool pairModeled(const TuningInput& in, int func, int algo, int proto) {
  if (!isCollFunc(func) || algo < 0 || algo >= dev::kNumAlgos || proto < 0 || proto >= dev::kNumProtos)
    return false;
  if (!inputUsable(in) || in.nRanks < 2) return false;
  if (proto == dev::kProtoLL128 && !ll128Usable(in)) return false;
  switch (algo) {
    case dev::kAlgoRing:
      return true;
    case dev::kAlgoTree:
      return func == dev::kFuncAllReduce;
    case dev::kAlgoPat:
      return (func == dev::kFuncAllGather || func == dev::kFuncReduceScatter) &&
             proto == dev::kProtoSimple && in.nNodes == in.nRanks;
    case dev::kAlgoDirect:
      if (proto == dev::kProtoSimple)  // the symmetric collectives
        return func != dev::kFuncBroadcast && func != dev::kFuncReduce && in.symmetric && in.nNodes == 1 &&
               in.nRanks <= dev::kSymMaxRanks;
      return (func == dev::kFuncAllReduce || func == dev::kFuncAllGather) && proto == dev::kProtoLL &&
             in.nNodes == 1 && in.nRanks <= dev::kDirectMaxRanks && in.meshChannels >= 1;
    default:
      return false;  // CollNet needs a CollNet plugin, NVLS NVLink multicast: not in weft
  }
}

TuningChoice estimateCollective(const TuningInput& in, const TuningConstants& k, int func, int algo,
                                int proto, size_t bytes) {
  TuningChoice c;
  if (!pairModeled(in, func, algo, proto)) return c;
  if (algo == dev::kAlgoDirect) return estimateDirect(in, k, func, proto, bytes);
  int n = in.nRanks;

  int64_t threshold = int64_t(k.threadThreshold[algo][proto]) *
                      (algo == dev::kAlgoRing && proto == dev::kProtoLL ? n : 1);
  threshold = std::max<int64_t>(threshold, 1);
  double perChannel = double(threshold) * k.maxThreads[proto];
  double channels = std::clamp(double(bytes) / perChannel, 1.0, double(in.maxChannels));
  // channelshare.<func> caps the count, not the estimate: the fewer channels reach the link's rate.
  const int shareCap = (int)std::ceil(std::max(0.0, k.funcChannelShare[func]) * in.maxChannels - 1e-9);
  const int maxChannels = std::clamp(shareCap, 1, in.maxChannels);
  int nChannels = (int)std::clamp<double>(std::ceil(double(bytes) / perChannel), 1.0, maxChannels);
  int nThreads = k.maxThreads[proto];
  // A lone channel with little data does not need all its threads (NCCL halves them too).
  while (nChannels == 1 && nThreads / 2 >= kMinThreads && int64_t(bytes) <= int64_t(nThreads / 2) * threshold)
    nThreads /= 2;

  double bwGBs = in.intraBwPerChannel;
  if (algo == dev::kAlgoPat) bwGBs = in.interBwPerChannel;
  else if (in.nNodes > 1) bwGBs = std::min(bwGBs, in.interBwPerChannel);
  double b = bwGBs * 1e3 * k.protoEff[proto] * k.bwEff[algo][proto] * k.funcBwEff[func];  // bytes/us
  if (!(b > 0)) return c;
  b = cappedChannelBw(in, k, algo, proto, b, channels);
  double s = double(bytes) * busFactor(func, algo, n) / channels;
  double alpha = k.stepUs[algo][proto] * k.funcStepScale[func];
  double stepBytes = double(std::max<int64_t>(in.stepBytes[proto], 1));

  c.algo = algo;
  c.proto = proto;
  c.nChannels = nChannels;
  c.nThreads = nThreads;
  c.timeUs = latencyUs(in, k, func, algo, proto) + s / b + pipelineUs(s, alpha, b, stepBytes);
  return c;
}

void estimateTable(const TuningInput& in, const TuningConstants& k, int func, size_t bytes,
                   TuningTable* table) {
  *table = TuningTable{};
  for (int a = 0; a < dev::kNumAlgos; ++a) {
    for (int p = 0; p < dev::kNumProtos; ++p) {
      table->estimates[a][p] = estimateCollective(in, k, func, a, p, bytes);
      table->allowed[a][p] = table->estimates[a][p].valid() && isCollFunc(func) &&
                             (in.supported[func] & pairBit(a, p)) && in.env.allows(func, a, p) &&
                             (k.protoByDefault[p] > 0 || in.env.protoNamed[func]);
    }
  }
}

Status selectAlgoProto(const TuningInput& in, const TuningConstants& k, int func, size_t bytes,
                       TuningChoice* choice) {
  WEFT_CHECK_ARG(isCollFunc(func), "selectAlgoProto: function %d is not a collective the tuning "
                 "model prices (Broadcast..AllReduce)", func);
  WEFT_CHECK_ARG(inputUsable(in), "selectAlgoProto: unusable topology description (nRanks %d, "
                 "nNodes %d, maxChannels %d, bandwidth %.1f/%.1f GB/s per channel, link %d)",
                 in.nRanks, in.nNodes, in.maxChannels, in.intraBwPerChannel, in.interBwPerChannel,
                 (int)in.intraLink);
  if (in.nRanks == 1) {
    *choice = TuningChoice{dev::kAlgoRing, dev::kProtoSimple, 1, k.maxThreads[dev::kProtoSimple], 0.0};
    return ncclSuccess;
  }
  TuningTable table;
  estimateTable(in, k, func, bytes, &table);
  TuningChoice best = fastestAllowed(table);
  const uint8_t directBit = uint8_t(1u << dev::kAlgoDirect);
  if (!best.valid() && (in.env.algo[func] & directBit)) {
    // NCCL_ALGO allows weft's Direct, which cannot run this call: the other algorithms it names,
    // or all of them (see tuning.h).
    TuningInput rest = in;
    const uint8_t others = uint8_t(in.env.algo[func] & ~directBit);
    rest.env.algo[func] = others ? others : uint8_t(kAllAlgosMask & ~directBit);
    estimateTable(rest, k, func, bytes, &table);
    best = fastestAllowed(table);
  }
  if (!best.valid()) {
    WEFT_WARN("No algorithm/protocol can run %s of %zu bytes on %d ranks: NCCL_ALGO/NCCL_PROTO allow "
              "algorithms %s and protocols %s for it, and this build and topology (%s%s) do not "
              "offer any of those pairs. Unset NCCL_ALGO/NCCL_PROTO or include Ring and Simple.",
              collFuncName(func), bytes, in.nRanks, algoMaskString(in.env.algo[func]).c_str(),
              protoMaskString(in.env.proto[func]).c_str(), linkTypeName(in.intraLink), ll128Note(in, k));
    return ncclInvalidUsage;
  }
  WEFT_TRACE(log::kTuning, "%s %zu bytes -> %s/%s, %d channels x %d threads, %.1f us",
             collFuncName(func), bytes, algoName(best.algo), protoName(best.proto), best.nChannels,
             best.nThreads, best.timeUs);
  *choice = best;
  return ncclSuccess;
}

std::string formatTuningSummary(const TuningInput& in, const TuningConstants& k) {
  std::string s;
  char buf[160];
  snprintf(buf, sizeof(buf), "%d ranks, %d node(s), %s, %d channels x %.1f GB/s%s\n", in.nRanks, in.nNodes,
           linkTypeName(in.intraLink), in.maxChannels, in.intraBwPerChannel, ll128Note(in, k));
  s += buf;
  for (int f = 0; f < kNumCollFuncs; ++f) {
    snprintf(buf, sizeof(buf), "%13s |", collFuncName(f));
    s += buf;
    // Latency at 0 bytes; bandwidth from a size large enough to hide latency and pipeline costs.
    TuningTable zero, big;
    estimateTable(in, k, f, 0, &zero);
    const size_t kBig = size_t(1) << 40;
    estimateTable(in, k, f, kBig, &big);
    bool any = false;
    for (int a = 0; a < dev::kNumAlgos; ++a) {
      for (int p = 0; p < dev::kNumProtos; ++p) {
        if (!zero.allowed[a][p]) continue;
        double lat = zero.estimates[a][p].timeUs;
        double busbw = double(kBig) * testsBusFactor(f, in.nRanks) / (big.estimates[a][p].timeUs - lat) / 1e3;
        snprintf(buf, sizeof(buf), " %s/%s %.1f us %.0f GB/s |", algoName(a), protoName(p), lat, busbw);
        s += buf;
        any = true;
      }
    }
    s += any ? "\n" : " none\n";
  }
  return s;
}

}  // namespace weft::graph
