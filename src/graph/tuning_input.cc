#include "graph/tuning_input.h"

#include <algorithm>

namespace weft::graph {
namespace {

constexpr double kFallbackBwGBs = 12.0;  // one PCIe Gen3 x16 link, NCCL's PCI_BW

}  // namespace

TuningInput tuningInputFor(const Topology& topo, const ChannelPlan& plan, int nChannels) {
  TuningInput in;
  in.nRanks = topo.nRanks();
  in.nNodes = std::max(1, plan.nHosts);
  in.intraLink = plan.ringSearch.typeIntra <= PathType::Nvb ? kLinkNvlink : kLinkPcie;
  in.intraBwPerChannel = plan.bwIntraPerChannel > 0 ? plan.bwIntraPerChannel : kFallbackBwGBs;
  in.interBwPerChannel = plan.bwInterPerChannel > 0 ? plan.bwInterPerChannel : kFallbackBwGBs;
  in.maxChannels = std::max(1, nChannels);
  in.minSm = topo.minSm() > 0 ? topo.minSm() : 70;
  return in;
}

TuningInput fallbackTuningInput(int nRanks, int nChannels) {
  TuningInput in;
  in.nRanks = std::max(1, nRanks);
  in.nNodes = 1;
  in.intraLink = kLinkPcie;
  in.intraBwPerChannel = kFallbackBwGBs;
  in.interBwPerChannel = kFallbackBwGBs;
  in.maxChannels = std::max(1, nChannels);
  return in;
}

int nthreadsSetting(int64_t value, int warpSize, int maxThreads, int def, std::string* note) {
  const int minThreads = 2 * warpSize;
  note->clear();
  if (value <= 0) return def;
  if (value % warpSize != 0) {
    *note = "not a multiple of the warp size " + std::to_string(warpSize) + "; using " + std::to_string(maxThreads);
    return maxThreads;
  }
  if (value > maxThreads) {
    *note = "above the maximum " + std::to_string(maxThreads) + "; using " + std::to_string(maxThreads);
    return maxThreads;
  }
  if (value < minThreads) {
    *note = "below the minimum " + std::to_string(minThreads) + "; using " + std::to_string(minThreads);
    return minThreads;
  }
  *note = "accepted";
  return (int)value;
}

}  // namespace weft::graph
