// The tuning model: for one collective call (function, bytes) it estimates the time of every
// (algorithm, protocol) pair and picks the fastest one the build implements and NCCL_ALGO /
// NCCL_PROTO allow, with the number of channels and threads to use. Pure: plain values in, plain
// values out, no communicator, no GPU.
//
// Time of one operation, in microseconds (constants in graph/tuning_constants.h):
//   t = base[a][p] + latency hops + s / b + pipe(s)
//   hops   Ring: 2(n-1) steps for AllReduce, n-1 otherwise, priced at hw[link][a][p], with the
//          steps that cross nodes priced at hw[net]; Tree: 2 x (chain inside the node + log2
//          nodes); PAT: log2 n network hops
//   c      channels, as NCCL's thread thresholds do: one per threshold x maxThreads bytes, at
//          least 1 and at most maxChannels (the continuous value is used for the time, so that
//          the estimate never drops when a channel is added; the reported count is rounded up)
//   s      bytes each channel must move over its busiest link = bytes x busFactor / c;
//          busFactor Ring: 2(n-1)/n AllReduce, (n-1)/n AllGather/ReduceScatter, 1 Broadcast/Reduce;
//          Tree: 1 for 2 ranks, else 2 (a chain rank forwards the data up and down)
//   b      bytes/us of one channel = bwPerChannel x protoEff[p] x bwEff[a][p] x funcBw[f]
//          (bwPerChannel: the node's, or the smaller of node and network for several nodes),
//          at most bwCap[a][p] / c when the pair has a cap: c channels together never move more
//          than the cap
//   pipe   cost of pipelining s through steps that each cost alpha = step[a][p] x funcStep[f]:
//          2 sqrt(s alpha / b) with the best chunk size, or s alpha / stepBytes + stepBytes / b
//          once that chunk would exceed one buffer step
// Direct (weft extension, LL only, AllReduce/AllGather on one node of 2..kDirectMaxRanks ranks
// with a channel connecting every pair, TuningInput::meshChannels): one hop for one-shot
// AllReduce and AllGather, two for two-shot AllReduce; s = bytes x (n-1) / c one-shot,
// bytes x 2(n-1)/n / c two-shot, bytes x (n-1)/n / c AllGather, c as for Ring but at most
// meshChannels; no pipeline or per-function terms. AllReduce takes the faster of one-shot and
// two-shot (TuningChoice::twoShot).
// Direct on Simple (weft extension): the symmetric collectives (device/coll/run_symmetric.cuh),
// AllReduce, AllGather and ReduceScatter on one node of 2..kSymMaxRanks ranks whose buffers lie in
// symmetric windows (TuningInput::symmetric): a barrier, the data moved by loads and stores of the
// peers' buffers, a barrier. Hops: AllReduce 4 (barrier, reads, writes, barrier), the others 3;
// s = bytes x busFactor / c (Ring's factors), c as for Ring within maxChannels.
// `bytes` is NCCL's nBytes: count x type size for Broadcast/Reduce/AllReduce, and count x type
// size x nRanks (the whole gathered array) for AllGather/ReduceScatter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "core/status.h"
#include "device/abi.h"
#include "graph/algo_proto_env.h"
#include "graph/tuning_constants.h"

namespace weft::graph {

// Bit of TuningInput::supported for one (algorithm, protocol) pair.
constexpr uint32_t pairBit(int algo, int proto) { return 1u << (algo * dev::kNumProtos + proto); }
constexpr uint32_t kAllPairs = (1u << (dev::kNumAlgos * dev::kNumProtos)) - 1;

// Payload bytes one buffer step carries per channel with NCCL's default buffers: Simple
// 4 MiB / 8 steps; LL 512 KiB / 8 steps, half of it flags; LL128 4.69 MiB / 8 steps x 120/128.
constexpr int64_t kDefaultStepBytes[dev::kNumProtos] = {32768, 576000, 524288};

struct TuningInput {
  int nRanks = 1;
  int nNodes = 1;                   // ranks are assumed spread evenly over the nodes
  HopLink intraLink = kLinkNvlink;   // what a hop inside a node crosses (kLinkNvlink, kLinkPcie, kLinkShm)
  double intraBwPerChannel = 0;     // GB/s one channel moves between neighbours in a node
  double interBwPerChannel = 0;     // GB/s one channel moves across the network (nNodes > 1)
  int maxChannels = 1;
  int minSm = 90;                   // lowest compute capability in the communicator, x10
  // Every rank on the same GPU (tests only: NCCL_WEFT_ALLOW_GPU_SHARING): a hop stays in that
  // GPU's memory, where 128-byte stores land whole, so LL128 may run whatever intraLink says.
  bool oneGpu = false;
  // Pairs the build implements, per function (pairBit); the model adds what the topology allows.
  uint32_t supported[kNumCollFuncs] = {kAllPairs, kAllPairs, kAllPairs, kAllPairs, kAllPairs};
  AlgoProtoMasks env;               // NCCL_ALGO / NCCL_PROTO
  int64_t stepBytes[dev::kNumProtos] = {kDefaultStepBytes[0], kDefaultStepBytes[1], kDefaultStepBytes[2]};
  // Channels on which every rank has connections to and from every other rank (Direct runs on
  // them only); 0: Direct cannot run. The planner fills it from PlanShape::directChannels.
  int meshChannels = 0;
  // Direct AllReduce: -1 one-shot or two-shot as the model says, 0 always one-shot, 1 always
  // two-shot (NCCL_WEFT_DIRECT_TWO_SHOT, for tests and measurements).
  int directTwoShot = -1;
  // The call's buffers lie in symmetric windows mapped flat on every rank (Direct on Simple may run).
  bool symmetric = false;
};

struct TuningChoice {
  int algo = -1;
  int proto = -1;
  int nChannels = 0;
  int nThreads = 0;
  double timeUs = std::numeric_limits<double>::infinity();
  bool twoShot = false;  // Direct AllReduce: two-shot (reduce-scatter + all-gather) is faster than one-shot
  bool valid() const { return algo >= 0 && timeUs < std::numeric_limits<double>::infinity(); }
};

// Every pair's estimate for one call. estimates[a][p] is invalid where the model has no formula
// or the topology forbids the pair; allowed[a][p] additionally requires the build and the env.
struct TuningTable {
  TuningChoice estimates[dev::kNumAlgos][dev::kNumProtos];
  bool allowed[dev::kNumAlgos][dev::kNumProtos] = {};
};

// LL128 needs 128-byte stores that arrive whole: NVLink inside the node (or one shared GPU),
// sm_70 or newer, and for several nodes sm_90 or newer (NCCL's rule for paths through the network).
// Where it is usable the tuner still picks it only if TuningConstants::protoByDefault allows it or
// NCCL_PROTO names it (AlgoProtoMasks::protoNamed).
bool ll128Usable(const TuningInput& in);

// True when the model has a formula for the pair for this function and topology (Ring: all
// functions; Tree: AllReduce with 2+ ranks; PAT: AllGather/ReduceScatter with Simple and one rank
// per node on 2+ nodes; Direct: AllReduce/AllGather with LL on one node of 2..kDirectMaxRanks
// ranks with meshChannels > 0; LL128 only where ll128Usable). CollNet and NVLS are never modeled.
bool pairModeled(const TuningInput& in, int func, int algo, int proto);

// The estimate for one pair (ignores `supported` and `env`); invalid when !pairModeled.
TuningChoice estimateCollective(const TuningInput& in, const TuningConstants& k, int func, int algo,
                                int proto, size_t bytes);

// All pairs for one call, for weft-topo and ncclGroupSimulateEnd.
void estimateTable(const TuningInput& in, const TuningConstants& k, int func, size_t bytes,
                   TuningTable* table);

// The fastest allowed pair. Fails with ncclInvalidUsage (and a WARN naming the function, the size
// and the settings) when the build, the topology and NCCL_ALGO/NCCL_PROTO leave nothing, as NCCL
// does: there is no silent fallback to Ring. One exception, for weft's own Direct: when
// NCCL_ALGO allows Direct for the function but Direct cannot run this call (other function, too
// many ranks, no mesh channel, not LL) and nothing else it allows can, the call runs with the
// other algorithms NCCL_ALGO names, or with every algorithm but Direct if it names none (so
// NCCL_ALGO=direct forces Direct wherever it applies). One rank: Ring/Simple, one channel, 0 us.
[[nodiscard]] Status selectAlgoProto(const TuningInput& in, const TuningConstants& k, int func,
                                     size_t bytes, TuningChoice* choice);

// A readable table of latency (us, at 0 bytes) and large-message bus bandwidth (GB/s) per
// function and allowed pair, like NCCL's TUNING log.
std::string formatTuningSummary(const TuningInput& in, const TuningConstants& k);

}  // namespace weft::graph
