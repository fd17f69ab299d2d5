#include "transport/connection_plan.h"

#include <algorithm>

#include "device/abi.h"

namespace weft::transport {

namespace {

// Rank `rank`'s send (sendOn[c][p]) and, when recvOn is given, receive connections.
void connectionsOf(int rank, const std::vector<std::vector<int>>& rings, int p2pChannels,
                   const std::vector<std::vector<TreePeers>>& trees, std::vector<std::vector<bool>>* sendOn,
                   std::vector<std::vector<bool>>* recvOn) {
  const int nChannels = (int)rings.size();
  const int n = rings.empty() ? 1 : (int)rings[0].size();
  sendOn->assign(nChannels, std::vector<bool>(n, false));
  if (recvOn) recvOn->assign(nChannels, std::vector<bool>(n, false));
  for (int c = 0; c < nChannels; ++c) {
    const std::vector<int>& ring = rings[c];
    int pos = (int)(std::find(ring.begin(), ring.end(), rank) - ring.begin());
    int next = ring[(pos + 1) % n];
    int prev = ring[(pos + n - 1) % n];
    if (next != rank) (*sendOn)[c][next] = true;
    if (recvOn && prev != rank) (*recvOn)[c][prev] = true;
    if (c < (int)trees.size() && rank < (int)trees[c].size()) {
      const TreePeers& t = trees[c][rank];
      for (int peer : {t.up, t.down[0], t.down[1], t.down[2]}) {
        if (peer < 0 || peer >= n || peer == rank) continue;
        (*sendOn)[c][peer] = true;
        if (recvOn) (*recvOn)[c][peer] = true;
      }
    }
    if (c < p2pChannels) {
      for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        (*sendOn)[c][p] = true;
        if (recvOn) (*recvOn)[c][p] = true;
      }
    }
  }
}

}  // namespace

ConnectionPlan planConnections(int rank, const std::vector<std::vector<int>>& rings, int p2pChannels,
                               const std::vector<std::vector<TreePeers>>& trees) {
  ConnectionPlan plan;
  plan.rank = rank;
  plan.nChannels = (int)rings.size();
  plan.nRanks = rings.empty() ? 1 : (int)rings[0].size();
  connectionsOf(rank, rings, p2pChannels, trees, &plan.sendOn, &plan.recvOn);
  // A channel is a full mesh when every rank sends to every other rank on it (each such send is
  // the peer's receive). Direct only serves small communicators: skip the n^2 check beyond.
  const int n = plan.nRanks;
  if (n >= 2 && n <= dev::kDirectMaxRanks) {
    std::vector<bool> mesh(plan.nChannels, true);
    std::vector<std::vector<bool>> sendOn;
    for (int r = 0; r < n; ++r) {
      if (r == rank) sendOn = plan.sendOn;
      else connectionsOf(r, rings, p2pChannels, trees, &sendOn, nullptr);
      for (int c = 0; c < plan.nChannels; ++c)
        for (int p = 0; p < n; ++p)
          if (p != r && !sendOn[c][p]) mesh[c] = false;
    }
    for (int c = 0; c < plan.nChannels; ++c)
      if (mesh[c]) plan.meshChannels.push_back(c);
  }
  return plan;
}

std::vector<int> ConnectionPlan::sendChannels(int peer) const {
  std::vector<int> out;
  for (int c = 0; c < nChannels; ++c) {
    if (peer == rank || sendOn[c][peer]) out.push_back(c);
  }
  return out;
}

std::vector<int> ConnectionPlan::recvChannels(int peer) const {
  std::vector<int> out;
  for (int c = 0; c < nChannels; ++c) {
    if (peer == rank || recvOn[c][peer]) out.push_back(c);
  }
  return out;
}

int ConnectionPlan::recvConnectionCount() const {
  int n = 0;
  for (const auto& row : recvOn) n += (int)std::count(row.begin(), row.end(), true);
  return n;
}

}  // namespace weft::transport
