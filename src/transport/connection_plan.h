// Which connections a communicator sets up: on every channel a send connection to the ring's next
// rank and a receive connection from its previous rank, plus, on the first p2pChannels channels,
// connections between every pair of ranks (the mesh: Direct's channels and point-to-point
// traffic), plus, when trees are given, both directions between every rank and its tree parent
// and children (the Tree algorithm sends up and down each tree edge), plus, on the first
// p2pOnlyChannels channels, connections between every pair of ranks that carry only point-to-point
// traffic: those hold a Simple staging buffer and, where the communicator runs point-to-point LL
// on them, LL slots (ConnLayout), never LL128, so that a send to a rank that is no ring neighbour
// gets as many channels as one to a neighbour at less than half the memory. Every rank computes
// the same plan from the same ring orders, so a connection a->b on channel c exists at a (send
// side) exactly when it exists at b (receive side), and is point-to-point-only at both or at neither.
#pragma once

#include <cstdint>
#include <vector>

namespace weft::transport {

// A rank's place in one channel's tree (device/abi.h DevTree).
struct TreePeers {
  int up = -1;                  // parent, -1 at the root
  int down[3] = {-1, -1, -1};   // children, -1 where none
};

struct ConnectionPlan {
  int rank = 0;
  int nRanks = 1;
  int nChannels = 0;
  // sendOn[c][p] / recvOn[c][p]: this rank has a connection to / from peer p on channel c.
  std::vector<std::vector<bool>> sendOn;
  std::vector<std::vector<bool>> recvOn;
  // recvP2pOnly[c][p]: the receive connection from p on channel c only carries point-to-point
  // traffic, so its staging buffer lives apart and holds only what point-to-point uses (ConnLayout).
  std::vector<std::vector<bool>> recvP2pOnly;
  // Channels on which every rank of the communicator (not only this one) has connections with
  // every protocol's buffers to and from every other rank, in increasing order: where the Direct
  // algorithm may run. All ranks compute the same list. Left empty above dev::kDirectMaxRanks ranks.
  std::vector<int> meshChannels;

  // The channels carrying traffic to / from a peer, in increasing order (for the planner).
  std::vector<int> sendChannels(int peer) const;
  std::vector<int> recvChannels(int peer) const;
  // Number of connections this rank receives on (each needs a staging buffer here).
  int recvConnectionCount() const;
};

// rings[c] lists the ranks of channel c's ring in order. trees[c][r] is rank r's place in channel
// c's tree (all ranks, so that a rank can compute its peers' plans); empty: no tree connections.
// The rank itself is never connected to itself: self traffic is a local copy, spread over every
// channel.
ConnectionPlan planConnections(int rank, const std::vector<std::vector<int>>& rings, int p2pChannels,
                               const std::vector<std::vector<TreePeers>>& trees = {}, int p2pOnlyChannels = 0);

// The p2pOnlyChannels of planConnections for a communicator of nRanks ranks and nChannels
// channels: `setting` (NCCL_WEFT_P2P_SIMPLE_NCHANNELS) when >= 0, else as many channels as one
// peer's point-to-point traffic uses (24, the planner's cap) while a rank keeps at most 96
// point-to-point-only receive connections (4 MiB each by default: 384 MiB): 24 channels up to 5 ranks,
// 13 at 8 ranks, 6 at 16.
int p2pOnlyChannelsFor(int nChannels, int nRanks, int64_t setting);

}  // namespace weft::transport
