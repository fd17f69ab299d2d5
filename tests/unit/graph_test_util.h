// Helpers shared by the graph tests: loading fixtures (optionally as a cluster of identical hosts),
// looking up paths by rank, and structural checks of rings and trees.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "graph/channels.h"
#include "graph/paths.h"
#include "graph/topo_xml.h"

namespace weft::graph::testing {

inline std::string fixturePath(const std::string& name) {
  return std::string(WEFT_SOURCE_DIR) + "/tests/unit/data/topo/" + name;
}

inline std::string dataPath(const std::string& rel) { return std::string(WEFT_SOURCE_DIR) + "/tests/unit/data/" + rel; }

// Loads a fixture, makes `nodes` copies of it (one per host) and computes paths.
inline Topology loadFixture(const std::string& name, int nodes = 1, const TopoOptions& opts = {}) {
  Topology one;
  EXPECT_EQ(loadTopologyXml(fixturePath(name), &one), ncclSuccess) << name;
  Topology t;
  if (nodes == 1) t = std::move(one);
  else EXPECT_EQ(buildTopology(replicateHosts(one.system, nodes), &t), ncclSuccess);
  computePaths(&t, opts);
  return t;
}

inline const Path& rankPath(const Topology& t, int a, int b) {
  const HostGraph& h = t.hostOfRank(a);
  return h.paths[h.gpus[t.ranks[a].gpu]][h.gpus[t.ranks[b].gpu]];
}

// Path from a rank's GPU to the NET with plugin device index `dev` on its host.
inline const Path& rankNetPath(const Topology& t, int rank, int dev) {
  const HostGraph& h = t.hostOfRank(rank);
  int net = h.findNode(NodeType::Net, dev);
  EXPECT_GE(net, 0);
  return h.paths[h.gpus[t.ranks[rank].gpu]][net];
}

inline std::vector<int> iota(int from, int to) {
  std::vector<int> v;
  for (int i = from; i < to; i++) v.push_back(i);
  return v;
}

// A ring is a permutation of all ranks in which each host's ranks are contiguous.
inline void expectValidRing(const Topology& t, const RingChannel& r) {
  std::vector<int> sorted = r.order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(0, t.nRanks()));
  int changes = 0;
  for (size_t i = 0; i < r.order.size(); i++) {
    int a = r.order[i], b = r.order[(i + 1) % r.order.size()];
    changes += t.ranks[a].host != t.ranks[b].host;
  }
  int hosts = 0;
  for (const HostGraph& h : t.hosts) hosts += !h.gpus.empty();
  EXPECT_EQ(changes, hosts > 1 ? hosts : 0) << "a host's ranks are split in the ring";
}

// A tree spans all ranks from one root, parents and children agree, at most 3 children each.
inline void expectValidTree(const Topology& t, const TreeChannel& tree) {
  int n = t.nRanks();
  ASSERT_EQ((int)tree.links.size(), n);
  int roots = 0;
  for (int r = 0; r < n; r++) {
    const TreeLinks& l = tree.links[r];
    if (l.up < 0) {
      roots++;
      EXPECT_EQ(r, tree.root);
    } else {
      const TreeLinks& p = tree.links[l.up];
      EXPECT_TRUE(std::find(std::begin(p.down), std::end(p.down), r) != std::end(p.down))
          << "rank " << r << " not a child of its parent " << l.up;
    }
    for (int d : l.down) {
      if (d >= 0) EXPECT_EQ(tree.links[d].up, r);
    }
  }
  EXPECT_EQ(roots, 1);
  // Everything reachable from the root exactly once.
  std::vector<int> seen(n, 0), stack{tree.root};
  while (!stack.empty()) {
    int r = stack.back();
    stack.pop_back();
    ASSERT_GE(r, 0);
    ASSERT_EQ(seen[r]++, 0) << "cycle at rank " << r;
    for (int d : tree.links[r].down) {
      if (d >= 0) stack.push_back(d);
    }
  }
  for (int r = 0; r < n; r++) EXPECT_EQ(seen[r], 1) << "rank " << r << " unreachable";
}

}  // namespace weft::graph::testing
