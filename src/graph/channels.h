// Rings and trees over ranks, assembled from the per-host searches (search.h), and the channel plan
// a communicator uses: how many channels, and for each one the ring order, the tree links and the
// NICs it crosses hosts through.
//   Rings: hosts in the order of their lowest rank, each host's GPUs in the order its search found;
//          channel c of every host is joined into ring c (all hosts use the same channel count).
//   Trees: inside a host a chain (head first); across hosts a double binary tree over the hosts'
//          heads. The first half of the channels uses one binary tree, the second half the other
//          (shifted for an even host count, mirrored for an odd one), so that every host is a leaf
//          in one of them and the root's links are shared out.
#pragma once

#include <vector>

#include "graph/search.h"
#include "graph/topo_options.h"
#include "graph/topology.h"

namespace weft::graph {

constexpr int kMaxChannels = 64;

struct TreeLinks {
  int up = -1;                  // parent rank, -1 at the root
  int down[3] = {-1, -1, -1};   // children: the next GPU of the chain, then child hosts' heads
};

struct RingChannel {
  std::vector<int> order;       // ranks in ring order (each sends to the next, the last to the first)
  std::vector<int> netIn;       // per host (Topology::hosts index): NET device entered by, -1 if none
  std::vector<int> netOut;      // per host: NET device left by
};

struct TreeChannel {
  int root = -1;
  std::vector<TreeLinks> links;  // indexed by rank
  std::vector<int> net;          // per host: NET device of the head's link to other hosts, -1 if none
};

struct SearchResult {
  Pattern pattern = Pattern::Ring;
  int nChannels = 0;
  double bwIntra = 0, bwInter = 0;       // per channel, the smallest over hosts
  PathType typeIntra = PathType::Loc;    // the farthest over hosts
  PathType typeInter = PathType::Loc;
  std::vector<RingChannel> rings;        // Ring: one per channel
  std::vector<TreeChannel> trees;        // Tree: one per channel, first binary tree
  std::vector<HostSearch> hosts;         // per Topology::hosts entry
};

// Every host searched with the same options; the channel count is the smallest any host reached.
SearchResult searchRings(const Topology& topo, const SearchOptions& opts);
// Trees try for exactly opts.maxChannels channels when minChannels == maxChannels (set both to the
// ring count, as NCCL does, so that rings and trees share channels); a host that cannot reach that
// many gives what it can.
SearchResult searchTrees(const Topology& topo, const SearchOptions& opts);

// The two binary trees over n hosts: parent and children of host position `p` in tree `variant`
// (0 or 1). Exposed for tests.
void doubleBinaryTree(int n, int p, int variant, int* up, int* down0, int* down1);

struct ChannelPlan {
  int nChannels = 0;
  std::vector<RingChannel> rings;   // per channel
  std::vector<TreeChannel> trees;   // per channel
  SearchResult ringSearch;          // what the searches found, before duplication
  SearchResult treeSearch;
  // For the tuning model: hosts taking part, and the GB/s one channel moves inside a host and
  // across hosts once the searched bandwidth is shared out over the duplicated channels (the
  // total of the searched rings, divided by the channel count before NCCL_MIN/MAX_NCHANNELS).
  int nHosts = 0;
  double bwIntraPerChannel = 0;
  double bwInterPerChannel = 0;
};

// Runs both searches and duplicates channels as NCCL does: twice the searched count (channel
// c + n repeats ring c and uses the second binary tree), twice again on Hopper+ across hosts when
// ring channels are faster than 45 GB/s, then opts.maxChannels / opts.minChannels. Needs
// computePaths.
ChannelPlan planChannels(const Topology& topo, const TopoOptions& opts);

// Ring neighbours of a rank in a channel.
int ringNext(const RingChannel& ring, int rank);
int ringPrev(const RingChannel& ring, int rank);

}  // namespace weft::graph
