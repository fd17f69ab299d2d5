#include "transport/connection_plan.h"

#include <algorithm>

#include "device/abi.h"

namespace weft::transport {

namespace {

// Rank `rank`'s send connections (sendOn[c][p]; sendFull: those with every protocol's buffers)
// and, when recvOn is given, its receive connections (recvP2pOnly: those that carry only point-to-point traffic).
void connectionsOf(int rank, const std::vector<std::vector<int>>& rings, int p2pChannels,
                   const std::vector<std::vector<TreePeers>>& trees, int p2pOnlyChannels,
                   std::vector<std::vector<bool>>* sendOn, std::vector<std::vector<bool>>* sendFull,
                   std::vector<std::vector<bool>>* recvOn, std::vector<std::vector<bool>>* recvP2pOnly) {
  const int nChannels = (int)rings.size();
  const int n = rings.empty() ? 1 : (int)rings[0].size();
  sendOn->assign(nChannels, std::vector<bool>(n, false));
  sendFull->assign(nChannels, std::vector<bool>(n, false));
  std::vector<std::vector<bool>> recvFull(nChannels, std::vector<bool>(n, false));
  for (int c = 0; c < nChannels; ++c) {
    const std::vector<int>& ring = rings[c];
    int pos = (int)(std::find(ring.begin(), ring.end(), rank) - ring.begin());
    int next = ring[(pos + 1) % n];
    int prev = ring[(pos + n - 1) % n];
    if (next != rank) (*sendFull)[c][next] = true;
    if (prev != rank) recvFull[c][prev] = true;
    if (c < (int)trees.size() && rank < (int)trees[c].size()) {
      const TreePeers& t = trees[c][rank];
      for (int peer : {t.up, t.down[0], t.down[1], t.down[2]}) {
        if (peer < 0 || peer >= n || peer == rank) continue;
        (*sendFull)[c][peer] = true;
        recvFull[c][peer] = true;
      }
    }
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      if (c < p2pChannels) (*sendFull)[c][p] = recvFull[c][p] = true;
      (*sendOn)[c][p] = (*sendFull)[c][p] || c < p2pOnlyChannels;
    }
  }
  if (!recvOn) return;
  recvOn->assign(nChannels, std::vector<bool>(n, false));
  recvP2pOnly->assign(nChannels, std::vector<bool>(n, false));
  for (int c = 0; c < nChannels; ++c) {
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      (*recvOn)[c][p] = recvFull[c][p] || c < p2pOnlyChannels;
      (*recvP2pOnly)[c][p] = !recvFull[c][p] && c < p2pOnlyChannels;
    }
  }
}

}  // namespace

ConnectionPlan planConnections(int rank, const std::vector<std::vector<int>>& rings, int p2pChannels,
                               const std::vector<std::vector<TreePeers>>& trees, int p2pOnlyChannels) {
  ConnectionPlan plan;
  plan.rank = rank;
  plan.nChannels = (int)rings.size();
  plan.nRanks = rings.empty() ? 1 : (int)rings[0].size();
  std::vector<std::vector<bool>> ownFull;
  connectionsOf(rank, rings, p2pChannels, trees, p2pOnlyChannels, &plan.sendOn, &ownFull, &plan.recvOn,
                &plan.recvP2pOnly);
  // A channel is a full mesh when every rank sends to every other rank on it with every
  // protocol's buffers (each such send is the peer's receive). Direct only serves small
  // communicators: skip the n^2 check beyond.
  const int n = plan.nRanks;
  if (n >= 2 && n <= dev::kDirectMaxRanks) {
    std::vector<bool> mesh(plan.nChannels, true);
    std::vector<std::vector<bool>> sendOn, sendFull;
    for (int r = 0; r < n; ++r) {
      if (r == rank) sendFull = ownFull;
      else connectionsOf(r, rings, p2pChannels, trees, p2pOnlyChannels, &sendOn, &sendFull, nullptr, nullptr);
      for (int c = 0; c < plan.nChannels; ++c)
        for (int p = 0; p < n; ++p)
          if (p != r && !sendFull[c][p]) mesh[c] = false;
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

int p2pOnlyChannelsFor(int nChannels, int nRanks, int64_t setting) {
  constexpr int kPerPeerChannels = 24, kConnectionBudget = 96;
  if (setting >= 0) return (int)std::min<int64_t>(setting, nChannels);
  if (nRanks <= 1) return 0;
  return std::min(nChannels, std::min(kPerPeerChannels, kConnectionBudget / (nRanks - 1)));
}

}  // namespace weft::transport
