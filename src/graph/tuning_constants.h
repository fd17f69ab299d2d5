// The numbers behind the tuning model (graph/tuning.h): latencies, bandwidth efficiencies,
// pipeline step costs, channel/thread thresholds. Defaults are fitted to NCCL 2.28.9 measured on
// the 2xH200 NVLink machine (see tuning_constants.cc and tests/unit/data/tuning-fit.md); the lead
// refits them for weft's own kernels with tests/unit/data/tuning_fit.py and loads the result
// without rebuilding:
//   NCCL_WEFT_TUNING_FILE=/path/file   "key = value" lines, '#' comments
//   NCCL_WEFT_TUNING="base.ring.ll=4.1;bweff.ring.simple=0.97"   applied after the file
// Keys (names case-insensitive; algo: tree ring collnetdirect collnetchain nvls nvlstree pat direct;
// proto: ll ll128 simple; link: nvlink pcie net shm; func: broadcast reduce allgather reducescatter
// allreduce):
//   base.<algo>.<proto>        us, fixed cost of one operation
//   hw.<link>.<algo>.<proto>   us per hop over that link type
//   protoeff.<proto>           payload fraction of what the protocol writes (LL 0.5)
//   bweff.<algo>.<proto>       fraction of the nominal channel bandwidth this pair reaches
//   bwcap.<algo>.<proto>       GB/s of payload one rank moves at most on all channels together
//                              (0: no cap; channels then add bandwidth without limit)
//   shmcap.<proto>             the same cap for any algorithm whose hops go through host memory
//                              (SHM transport), on top of bwcap
//   step.<algo>.<proto>        us of synchronisation per pipeline step (drives the pipeline term)
//   funcbw.<func>, funcstep.<func>   per-collective multipliers of bweff and step (AllReduce = 1)
//   channelshare.<func>        fraction of the channels a Ring/Tree call of that collective uses at most
//   threshold.<algo>.<proto>   bytes per thread a channel needs before another channel is added
//   maxthreads.<proto>         threads per channel at full size
//   default.<proto>            1: the tuner may pick the protocol on its own; 0: only when NCCL_PROTO
//                              names it for that collective (NCCL's rule for LL128, weft's until its
//                              LL128 kernel is measured on NVLink)
#pragma once

#include <string>

#include "core/status.h"
#include "device/abi.h"
#include "graph/algo_proto_env.h"

namespace weft::graph {

// Kinds of hop the model prices (rows of hwUs). kLinkShm: through a host shared-memory segment
// (transport/shm), where every flag and every LL line is polled across PCIe.
enum HopLink : int { kLinkNvlink = 0, kLinkPcie = 1, kLinkNet = 2, kLinkShm = 3, kNumLinkTypes = 4 };

const char* linkTypeName(int link);  // "nvlink", "pcie", "net", "shm"

struct TuningConstants {
  double baseUs[dev::kNumAlgos][dev::kNumProtos];
  double hwUs[kNumLinkTypes][dev::kNumAlgos][dev::kNumProtos];
  double protoEff[dev::kNumProtos];
  double bwEff[dev::kNumAlgos][dev::kNumProtos];
  // Channels add bandwidth until the pair reaches what its kernel and the link carry together: on
  // 2xH200, Ring/LL moved ~10 GB/s on one channel but ~130 GB/s (not 32 x 10) on 32 (session 12).
  double bwCapGBs[dev::kNumAlgos][dev::kNumProtos];
  double shmCapGBs[dev::kNumProtos];  // per protocol, where intraLink is kLinkShm
  double stepUs[dev::kNumAlgos][dev::kNumProtos];
  double funcBwEff[kNumCollFuncs];
  double funcStepScale[kNumCollFuncs];
  // Broadcast and Reduce move data one way along a chain: on 2xH200 (weft's own kernels, session
  // 6) they ran fastest on half the channels (1 GiB: 343/348 GB/s on 16 of 32, 312/316 on all 32),
  // the collectives that use both directions of every link on all of them.
  double funcChannelShare[kNumCollFuncs];
  int threadThreshold[dev::kNumAlgos][dev::kNumProtos];  // Ring/LL: multiplied by nRanks
  int maxThreads[dev::kNumProtos];
  // 1 where the tuner may choose the protocol without NCCL_PROTO naming it, 0 where it may not.
  double protoByDefault[dev::kNumProtos];

  // The defaults fitted to NCCL's measurements (tests/unit/data/tuning-fit.md).
  static TuningConstants defaults();
  // defaults() with the fixed costs and Direct's bandwidth of weft's own kernels where they differ
  // (tuning_constants.cc kWeftKernelCalibration): what communicators start from.
  static TuningConstants weftCalibrated();
};

// Applies "key = value" settings to *k. Lines (or ';'-separated items) that are empty or start
// with '#' are skipped. On an unknown key or a bad value returns ncclInvalidUsage with the reason
// (naming the line) in *why and leaves *k unchanged; no logging.
[[nodiscard]] Status parseTuningText(const std::string& text, TuningConstants* k, std::string* why);

// Every constant as "key = value" lines that parseTuningText reads back to the same values.
std::string formatTuningConstants(const TuningConstants& k);

// weftCalibrated(), then NCCL_WEFT_TUNING_FILE, then NCCL_WEFT_TUNING. A file that cannot be read or a
// setting that does not parse is WARNed about and skipped as a whole.
TuningConstants tuningConstantsFromEnv();

}  // namespace weft::graph
