#include "graph/channels.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "core/log.h"

namespace weft::graph {

namespace {

// Hosts that hold ranks, in ring order.
std::vector<int> activeHosts(const Topology& topo) {
  std::vector<int> out;
  for (int h : topo.hostOrder()) {
    if (!topo.hosts[h].gpus.empty()) out.push_back(h);
  }
  return out;
}

int netDev(const HostGraph& h, int netNode) { return netNode >= 0 ? (int)h.nodes[netNode].id : -1; }

// What the search result of a host depends on: its nodes and links (not bus ids or ranks). Hosts
// of a cluster are usually identical, so each distinct host is searched once.
std::string hostSignature(const HostGraph& h) {
  std::string sig;
  char buf[96];
  for (const Node& n : h.nodes) {
    snprintf(buf, sizeof(buf), "|%d:%d:%d:%d:%lld:%.3f:%d:%d:%d:%d", (int)n.type, n.sm, (int)n.gdr, (int)n.netGdr,
             n.type == NodeType::Net ? (long long)n.id : 0LL, n.netBw, (int)n.arch, (int)n.vendor, (int)n.model,
             n.type == NodeType::Gpu ? 1 : 0);
    sig += buf;
    for (const Link& l : n.links) {
      snprintf(buf, sizeof(buf), ",%d/%.3f/%d", (int)l.type, l.bw, l.peer);
      sig += buf;
    }
  }
  return sig;
}

SearchResult searchAll(const Topology& topo, Pattern pattern, const SearchOptions& opts) {
  SearchResult r;
  r.pattern = pattern;
  std::vector<int> hosts = activeHosts(topo);
  bool inter = hosts.size() > 1;
  int ccMin = topo.minSm();
  r.hosts.resize(topo.hosts.size());
  r.nChannels = hosts.empty() ? 0 : kMaxChannels;
  bool first = true;
  std::map<std::string, HostSearch> seen;
  for (int hi : hosts) {
    const HostGraph& h = topo.hosts[hi];
    if (inter && h.nets.empty())
      WEFT_WARN("host %lx has no network device: its ranks cannot reach the other hosts", (unsigned long)h.hostHash);
    std::string sig = hostSignature(h);
    auto it = seen.find(sig);
    HostSearch s;
    if (it != seen.end()) {
      s = it->second;
    } else {
      s = searchHost(h, pattern, inter, ccMin, opts);
      if (s.fallback && opts.minChannels > 1) {
        // Cannot match the ring count: take the most this host can do instead of a single channel.
        SearchOptions relaxed = opts;
        relaxed.minChannels = 1;
        s = searchHost(h, pattern, inter, ccMin, relaxed);
      }
      seen.emplace(sig, s);
    }
    r.nChannels = std::min(r.nChannels, s.nChannels());
    r.bwIntra = first ? s.bwIntra : std::min(r.bwIntra, s.bwIntra);
    r.bwInter = first ? s.bwInter : std::min(r.bwInter, s.bwInter);
    r.typeIntra = first ? s.typeIntra : maxPath(r.typeIntra, s.typeIntra);
    r.typeInter = first ? s.typeInter : maxPath(r.typeInter, s.typeInter);
    first = false;
    r.hosts[hi] = std::move(s);
  }
  return r;
}

RingChannel buildRing(const Topology& topo, const std::vector<HostSearch>& hs, int c) {
  RingChannel ring;
  ring.netIn.assign(topo.hosts.size(), -1);
  ring.netOut.assign(topo.hosts.size(), -1);
  for (int hi : activeHosts(topo)) {
    const HostGraph& h = topo.hosts[hi];
    const HostChannel& ch = hs[hi].channels[c];
    for (int g : ch.gpus) ring.order.push_back(h.nodes[h.gpus[g]].rank);
    ring.netIn[hi] = netDev(h, ch.netIn);
    ring.netOut[hi] = netDev(h, ch.netOut);
  }
  return ring;
}

void addChild(TreeLinks* t, int child) {
  for (int& d : t->down) {
    if (d < 0) {
      d = child;
      return;
    }
  }
}

TreeChannel buildTree(const Topology& topo, const std::vector<HostSearch>& hs, int c, int variant) {
  TreeChannel tree;
  tree.links.assign(topo.nRanks(), TreeLinks{});
  tree.net.assign(topo.hosts.size(), -1);
  std::vector<int> hosts = activeHosts(topo);
  int nh = (int)hosts.size();
  std::vector<std::vector<int>> chains(nh);
  for (int p = 0; p < nh; p++) {
    const HostGraph& h = topo.hosts[hosts[p]];
    const HostChannel& ch = hs[hosts[p]].channels[c];
    for (int g : ch.gpus) chains[p].push_back(h.nodes[h.gpus[g]].rank);
    tree.net[hosts[p]] = netDev(h, ch.netIn);
  }
  for (int p = 0; p < nh; p++) {
    const std::vector<int>& chain = chains[p];
    for (size_t i = 0; i < chain.size(); i++) {
      TreeLinks& t = tree.links[chain[i]];
      if (i > 0) t.up = chain[i - 1];
      if (i + 1 < chain.size()) addChild(&t, chain[i + 1]);
    }
    int up, d0, d1;
    doubleBinaryTree(nh, p, variant, &up, &d0, &d1);
    TreeLinks& head = tree.links[chain[0]];
    if (up >= 0) head.up = chains[up][0];
    else tree.root = chain[0];
    if (d0 >= 0) addChild(&head, chains[d0][0]);
    if (d1 >= 0) addChild(&head, chains[d1][0]);
  }
  return tree;
}

// One binary tree over positions 0..n-1: position 0 is the root with one child; every other
// position's parent is found by moving its lowest set bit up one place.
void binaryTree(int n, int p, int* up, int* d0, int* d1) {
  *up = *d0 = *d1 = -1;
  if (p == 0) {
    int top = 1;
    while (top * 2 < n) top *= 2;
    if (n > 1) *d1 = top;
    return;
  }
  int bit = p & -p;
  int parent = (p ^ bit) | (bit << 1);
  *up = parent < n ? parent : (p ^ bit);
  for (int low = bit >> 1; low > 0; low >>= 1) {
    // Children sit half the bit below and above; the upper one may fall past the end.
    if (*d0 < 0) *d0 = p - low;
    if (p + low < n) {
      *d1 = p + low;
      break;
    }
  }
}

}  // namespace

void doubleBinaryTree(int n, int p, int variant, int* up, int* down0, int* down1) {
  if (variant == 0 || n <= 1) {
    binaryTree(n, p, up, down0, down1);
    return;
  }
  // The second tree is the first with positions shifted by one (even n) or mirrored (odd n), so
  // that leaves of one tree are inner nodes of the other.
  auto to = [&](int x) { return n % 2 == 0 ? (x - 1 + n) % n : n - 1 - x; };
  auto from = [&](int x) { return x < 0 ? -1 : (n % 2 == 0 ? (x + 1) % n : n - 1 - x); };
  int u, a, b;
  binaryTree(n, to(p), &u, &a, &b);
  *up = from(u);
  *down0 = from(a);
  *down1 = from(b);
}

SearchResult searchRings(const Topology& topo, const SearchOptions& opts) {
  SearchResult r = searchAll(topo, Pattern::Ring, opts);
  for (int c = 0; c < r.nChannels; c++) r.rings.push_back(buildRing(topo, r.hosts, c));
  return r;
}

SearchResult searchTrees(const Topology& topo, const SearchOptions& opts) {
  SearchResult r = searchAll(topo, Pattern::Tree, opts);
  for (int c = 0; c < r.nChannels; c++) r.trees.push_back(buildTree(topo, r.hosts, c, 0));
  return r;
}

int ringNext(const RingChannel& ring, int rank) {
  size_t n = ring.order.size();
  for (size_t i = 0; i < n; i++) {
    if (ring.order[i] == rank) return ring.order[(i + 1) % n];
  }
  return -1;
}

int ringPrev(const RingChannel& ring, int rank) {
  size_t n = ring.order.size();
  for (size_t i = 0; i < n; i++) {
    if (ring.order[i] == rank) return ring.order[(i + n - 1) % n];
  }
  return -1;
}

ChannelPlan planChannels(const Topology& topo, const TopoOptions& opts) {
  ChannelPlan plan;
  SearchOptions so;
  so.crossNic = opts.crossNic;
  so.maxChannels = kMaxChannels / 2;
  plan.ringSearch = searchRings(topo, so);
  int n = plan.ringSearch.nChannels;
  if (n == 0) return plan;
  SearchOptions to = so;
  to.minChannels = to.maxChannels = n;
  plan.treeSearch = searchTrees(topo, to);
  n = std::min(n, plan.treeSearch.nChannels);

  // Channel c + n repeats channel c with the other binary tree.
  for (int variant = 0; variant < 2; variant++) {
    for (int c = 0; c < n && (int)plan.rings.size() < kMaxChannels; c++) {
      plan.rings.push_back(plan.ringSearch.rings[c]);
      plan.trees.push_back(buildTree(topo, plan.treeSearch.hosts, c, variant));
    }
  }
  int total = (int)plan.rings.size();
  // Hopper and newer across hosts need more CTAs per NIC to reach line rate on fast rings.
  int nHosts = (int)activeHosts(topo).size();
  if (topo.minSm() >= 90 && nHosts > 1 && plan.ringSearch.bwIntra > 45.0 && 2 * total <= kMaxChannels) {
    for (int c = 0; c < total; c++) {
      plan.rings.push_back(plan.rings[c]);
      plan.trees.push_back(plan.trees[c]);
    }
    total *= 2;
  }
  plan.nHosts = nHosts;
  plan.bwIntraPerChannel = plan.ringSearch.bwIntra * plan.ringSearch.nChannels / total;
  plan.bwInterPerChannel = plan.ringSearch.bwInter * plan.ringSearch.nChannels / total;
  int maxC = std::max(1, std::min(opts.maxChannels, kMaxChannels));
  total = std::min(total, maxC);
  plan.rings.resize(total);
  plan.trees.resize(total);
  // NCCL_MIN_NCHANNELS: repeat the channels we have.
  int minC = std::min(opts.minChannels, kMaxChannels);
  for (int c = total; c < minC; c++) {
    plan.rings.push_back(plan.rings[c - total]);
    plan.trees.push_back(plan.trees[c - total]);
  }
  plan.nChannels = (int)plan.rings.size();
  return plan;
}

}  // namespace weft::graph
