#include "transport/connection_plan.h"

#include <algorithm>

namespace weft::transport {

ConnectionPlan planConnections(int rank, const std::vector<std::vector<int>>& rings, int p2pChannels,
                               const std::vector<std::vector<TreePeers>>& trees) {
  ConnectionPlan plan;
  plan.rank = rank;
  plan.nChannels = (int)rings.size();
  plan.nRanks = rings.empty() ? 1 : (int)rings[0].size();
  const int n = plan.nRanks;
  plan.sendOn.assign(plan.nChannels, std::vector<bool>(n, false));
  plan.recvOn.assign(plan.nChannels, std::vector<bool>(n, false));
  for (int c = 0; c < plan.nChannels; ++c) {
    const std::vector<int>& ring = rings[c];
    int pos = (int)(std::find(ring.begin(), ring.end(), rank) - ring.begin());
    int next = ring[(pos + 1) % n];
    int prev = ring[(pos + n - 1) % n];
    if (next != rank) plan.sendOn[c][next] = true;
    if (prev != rank) plan.recvOn[c][prev] = true;
    if (c < (int)trees.size() && rank < (int)trees[c].size()) {
      const TreePeers& t = trees[c][rank];
      for (int peer : {t.up, t.down[0], t.down[1], t.down[2]}) {
        if (peer < 0 || peer >= n || peer == rank) continue;
        plan.sendOn[c][peer] = true;
        plan.recvOn[c][peer] = true;
      }
    }
    if (c < p2pChannels) {
      for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        plan.sendOn[c][p] = true;
        plan.recvOn[c][p] = true;
      }
    }
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
