// Which connections a communicator sets up: on every channel a send connection to the ring's next
// rank and a receive connection from its previous rank, plus, on the first p2pChannels channels,
// connections between every pair of ranks for point-to-point traffic, plus, when trees are given,
// both directions between every rank and its tree parent and children (the Tree algorithm sends
// up and down each tree edge). Every rank computes the same
// plan from the same ring orders, so a connection a->b on channel c exists at a (send side) exactly
// when it exists at b (receive side).
#pragma once

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
  // Channels on which every rank of the communicator (not only this one) has connections to
  // and from every other rank, in increasing order: where the Direct algorithm may run. All
  // ranks compute the same list. Left empty above dev::kDirectMaxRanks ranks.
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
                               const std::vector<std::vector<TreePeers>>& trees = {});

}  // namespace weft::transport
