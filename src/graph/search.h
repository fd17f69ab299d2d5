// Channel search inside one host. A channel is an order of the host's GPUs (and, when several hosts
// take part, the NIC it enters and leaves the host through); every channel reserves a bandwidth on
// each link it crosses. The search looks for as many channels as the links carry at the highest
// per-channel bandwidth that gives the most in total, as NCCL's does:
//   Ring, one host:    GPU a -> GPU b -> ... -> GPU x -> GPU a
//   Ring, many hosts:  NET n -> GPU a -> ... -> GPU x -> NET n (another NIC only if crossNic allows)
//   Tree, one host:    GPU a -> GPU b -> ... -> GPU x (a chain; data goes both ways along it)
//   Tree, many hosts:  NET n <-> GPU a -> GPU b -> ... -> GPU x (the head talks to other hosts)
// channels.h assembles the hosts' channels into rings and trees over ranks.
#pragma once

#include <vector>

#include "graph/topology.h"

namespace weft::graph {

enum class Pattern : uint8_t { Ring = 0, Tree = 1 };
const char* patternName(Pattern p);  // "Ring", "Tree"

struct SearchOptions {
  int minChannels = 1;
  int maxChannels = 32;  // half of the 64 channels: the plan duplicates what the search finds
  // 0: a channel leaves a host through the NIC it entered by (rail-aligned); 1: any NIC;
  // 2: rail-aligned unless that finds nothing at a given bandwidth.
  int crossNic = 2;
  long stepBudget = 1 << 14;  // search steps allowed per channel attempt (bounds search time)
};

// One channel inside one host. `gpus` are indices into HostGraph::gpus, in channel order;
// netIn/netOut are NET node indices (-1 on a single-host search).
struct HostChannel {
  std::vector<int> gpus;
  int netIn = -1;
  int netOut = -1;
  bool operator==(const HostChannel& o) const { return gpus == o.gpus && netIn == o.netIn && netOut == o.netOut; }
};

struct HostSearch {
  Pattern pattern = Pattern::Ring;
  bool inter = false;                      // channels cross hosts through NICs
  std::vector<HostChannel> channels;
  double bwIntra = 0;                      // GB/s reserved per channel inside the host
  double bwInter = 0;                      // GB/s reserved per channel on the NICs
  PathType typeIntra = PathType::Loc;      // farthest GPU->GPU path type used
  PathType typeInter = PathType::Loc;      // farthest GPU<->NIC path type used
  bool crossNic = false;                   // some channel leaves through another NIC
  bool fallback = false;                   // nothing fit: one channel in plain order
  int nChannels() const { return (int)channels.size(); }
};

// The per-channel bandwidths tried, highest first (NCCL's tables, by architecture).
std::vector<double> searchSpeeds(int ccMin, bool inter);

// Searches host `host`. `inter`: other hosts take part (channels pass through NICs). `ccMin`: the
// smallest compute capability of the communicator. Needs computePaths.
HostSearch searchHost(const HostGraph& host, Pattern pattern, bool inter, int ccMin, const SearchOptions& opts);

}  // namespace weft::graph
