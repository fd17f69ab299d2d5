#include "graph/search.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/log.h"
#include "graph/paths.h"

namespace weft::graph {

const char* patternName(Pattern p) { return p == Pattern::Ring ? "Ring" : "Tree"; }

std::vector<double> searchSpeeds(int ccMin, bool inter) {
  if (ccMin >= 100) {
    if (inter) return {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
    return {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
  }
  if (ccMin >= 90) {
    if (inter) return {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
    return {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
  }
  if (inter) return {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
  return {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
}

namespace {

// Limits of one search attempt.
struct Attempt {
  MilliGBps speed = 0;
  PathType typeIntra = PathType::Sys;
  PathType typeInter = PathType::Sys;
  bool crossNic = false;
};

// Finds channels one after another on a copy of the host's link bandwidths. Each channel is a
// depth-first search over GPU orders; a hop is allowed when its path type is within the attempt's
// limit and every link on the path still has the channel's bandwidth.
class HostSearcher {
 public:
  HostSearcher(const HostGraph& h, Pattern pattern, bool inter, const SearchOptions& o)
      : h_(h), pattern_(pattern), inter_(inter), opts_(o), ng_((int)h.gpus.size()) {
    nets_ = h.nets;
    std::stable_sort(nets_.begin(), nets_.end(), [&](int a, int b) { return h.nodes[a].id < h.nodes[b].id; });
    reverse_.resize(h.nodes.size());
    for (size_t n = 0; n < h.nodes.size(); n++) {
      for (const Link& l : h.nodes[n].links) {
        int rev = -1;
        const auto& back = h.nodes[l.peer].links;
        for (size_t k = 0; k < back.size(); k++) {
          if (back[k].peer == (int)n && back[k].type == l.type) rev = (int)k;
        }
        reverse_[n].push_back(rev);
      }
    }
  }

  std::vector<HostChannel> run(const Attempt& a) {
    attempt_ = a;
    rem_.assign(h_.nodes.size(), {});
    for (size_t n = 0; n < h_.nodes.size(); n++) {
      for (const Link& l : h_.nodes[n].links) rem_[n].push_back(toMilli(l.bw));
    }
    std::vector<HostChannel> found;
    while ((int)found.size() < opts_.maxChannels) {
      HostChannel c;
      const HostChannel* hint = found.empty() ? nullptr : &found.back();
      if (!oneChannel((int)found.size(), hint, &c)) break;
      found.push_back(std::move(c));
    }
    return found;
  }

 private:
  struct Demand {
    int node, link;
    MilliGBps amount;
  };

  const HostGraph& h_;
  Pattern pattern_;
  bool inter_;
  SearchOptions opts_;
  int ng_;
  std::vector<int> nets_;                      // NET nodes by device index: the rails
  std::vector<std::vector<int>> reverse_;      // reverse_[node][link]: the peer's link back, or -1
  std::vector<std::vector<MilliGBps>> rem_;    // bandwidth left per directed link
  Attempt attempt_;
  long budget_ = 0;
  std::vector<int> order_;
  std::vector<char> used_;
  int netIn_ = -1, netOut_ = -1;

  // What crossing path `p` from `start` at the attempt's speed costs on each link. Intel root
  // complexes turn GPU-to-GPU traffic through the CPU into small TLPs (20% more PCIe bandwidth);
  // pre-Ampere GPUs written to by a NIC also use 1/8 of the reverse direction.
  void demands(const Path& p, int start, std::vector<Demand>* out) const {
    MilliGBps s = attempt_.speed;
    MilliGBps pciS = s;
    if (p.type == PathType::Phb && h_.nodes[start].type == NodeType::Gpu) {
      for (const PathHop& hop : p.hops) {
        const Node& to = h_.nodes[h_.nodes[hop.node].links[hop.link].peer];
        if (to.type == NodeType::Cpu && to.arch == CpuArch::X86 && to.vendor == CpuVendor::Intel) pciS = s * 6 / 5;
      }
    }
    out->clear();
    for (const PathHop& hop : p.hops) {
      const Link& l = h_.nodes[hop.node].links[hop.link];
      MilliGBps fw = l.type == LinkType::Pci ? pciS : s;
      out->push_back(Demand{hop.node, hop.link, fw});
      const Node& to = h_.nodes[l.peer];
      int rev = reverse_[hop.node][hop.link];
      if (rev < 0) continue;
      if (to.type == NodeType::Gpu && to.sm < 80 && h_.nodes[start].type != NodeType::Gpu)
        out->push_back(Demand{l.peer, rev, fw / 8});
      if (to.type == NodeType::Cpu && to.arch == CpuArch::Power && l.type == LinkType::Nvl)
        out->push_back(Demand{l.peer, rev, fw});
    }
  }

  // Reserves the path from node `from` to node `to` if its type is within `limit` and it has room.
  bool take(int from, int to, PathType limit) {
    const Path& p = h_.paths[from][to];
    if (!p.connected() || p.type > limit) return false;
    std::vector<Demand> d;
    demands(p, from, &d);
    for (const Demand& x : d) {
      if (rem_[x.node][x.link] < x.amount) return false;
    }
    for (const Demand& x : d) rem_[x.node][x.link] -= x.amount;
    return true;
  }

  void give(int from, int to) {
    std::vector<Demand> d;
    demands(h_.paths[from][to], from, &d);
    for (const Demand& x : d) rem_[x.node][x.link] += x.amount;
  }

  int gpuNode(int g) const { return h_.gpus[g]; }

  // A GPU->GPU hop. Chains carry data both ways, so a tree hop also needs the way back in range.
  bool takeGpuHop(int a, int b) {
    if (pattern_ == Pattern::Tree && h_.paths[gpuNode(b)][gpuNode(a)].type > attempt_.typeIntra) return false;
    return take(gpuNode(a), gpuNode(b), attempt_.typeIntra);
  }

  MilliGBps roomOn(const Path& p) const {
    MilliGBps m = INT64_MAX;
    for (const PathHop& hop : p.hops) m = std::min(m, rem_[hop.node][hop.link]);
    return m;
  }

  // Next-GPU candidates from `cur`, best first: closer path type, more bandwidth left (spreads
  // channels over parallel links), fewer hops, then the next index (so that on a switch, where
  // every order is equal, rings follow GPU order). Before the last GPU of a multi-host ring, GPUs
  // close to the exit NIC come first.
  std::vector<int> candidates(int cur, bool nextIsLast) const {
    using Key = std::tuple<int, double, int, MilliGBps, int, int>;
    std::vector<std::pair<Key, int>> keyed;
    for (int g = 0; g < ng_; g++) {
      if (used_[g]) continue;
      const Path& p = h_.paths[gpuNode(cur)][gpuNode(g)];
      if (!p.connected() || p.type > attempt_.typeIntra) continue;
      int exitType = 0;
      double exitBw = 0;
      if (nextIsLast && inter_ && pattern_ == Pattern::Ring && netIn_ >= 0) {
        const Path& e = h_.paths[gpuNode(g)][netIn_];
        exitType = (int)e.type;
        exitBw = -e.bw;
      }
      keyed.emplace_back(Key{exitType, exitBw, (int)p.type, -roomOn(p), p.count(), (g - cur + ng_) % ng_}, g);
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<int> out;
    for (auto& k : keyed) out.push_back(k.second);
    return out;
  }

  // Closes the channel: back to the first GPU (ring, one host) or out through a NIC (ring, many hosts).
  bool finish() {
    int last = order_.back();
    if (pattern_ == Pattern::Tree) return true;
    if (!inter_) {
      if (ng_ == 1) return true;
      return takeGpuHop(last, order_.front());
    }
    std::vector<int> outs{netIn_};
    if (attempt_.crossNic) {
      std::vector<int> others;
      for (int n : nets_) {
        if (n != netIn_) others.push_back(n);
      }
      std::stable_sort(others.begin(), others.end(), [&](int a, int b) {
        const Path& pa = h_.paths[gpuNode(last)][a];
        const Path& pb = h_.paths[gpuNode(last)][b];
        return std::make_pair((int)pa.type, -pa.bw) < std::make_pair((int)pb.type, -pb.bw);
      });
      outs.insert(outs.end(), others.begin(), others.end());
    }
    for (int n : outs) {
      if (take(gpuNode(last), n, attempt_.typeInter)) {
        netOut_ = n;
        return true;
      }
    }
    return false;
  }

  // Whether some GPU not yet in the channel can still close it: reach the first GPU (ring, one
  // host) or an allowed exit NIC (ring, many hosts). Cuts orders that cannot end well early.
  bool canStillClose() const {
    if (pattern_ != Pattern::Ring || ng_ == 1) return true;
    for (int g = 0; g < ng_; g++) {
      if (used_[g]) continue;
      if (!inter_) {
        if (h_.paths[gpuNode(g)][gpuNode(order_.front())].type <= attempt_.typeIntra) return true;
        continue;
      }
      for (int n : nets_) {
        if ((n == netIn_ || attempt_.crossNic) && h_.paths[gpuNode(g)][n].type <= attempt_.typeInter) return true;
      }
    }
    return false;
  }

  // Extends order_ (which holds `step` GPUs) to a full channel; on failure leaves no reservation.
  bool extend(int step, const std::vector<int>* forced) {
    if (--budget_ < 0) return false;
    if (step == ng_) return finish();
    if (!canStillClose()) return false;
    int cur = order_.back();
    std::vector<int> cands = forced ? std::vector<int>{(*forced)[step]} : candidates(cur, step == ng_ - 1);
    for (int g : cands) {
      if (used_[g] || !takeGpuHop(cur, g)) continue;
      order_.push_back(g);
      used_[g] = 1;
      if (extend(step + 1, forced)) return true;
      used_[g] = 0;
      order_.pop_back();
      give(gpuNode(cur), gpuNode(g));
    }
    return false;
  }

  // Starts a channel at `head`, entering from NET `net` (-1 on one host).
  bool startAt(int head, int net, const std::vector<int>* forced) {
    if (net >= 0) {
      if (!take(net, gpuNode(head), attempt_.typeInter)) return false;
      // A tree's head also sends up through the same NIC: trees are symmetric.
      if (pattern_ == Pattern::Tree && !take(gpuNode(head), net, attempt_.typeInter)) {
        give(net, gpuNode(head));
        return false;
      }
    }
    order_.assign(1, head);
    used_.assign(ng_, 0);
    used_[head] = 1;
    netIn_ = net;
    netOut_ = pattern_ == Pattern::Tree ? net : -1;
    if (extend(1, forced)) return true;
    if (net >= 0) {
      give(net, gpuNode(head));
      if (pattern_ == Pattern::Tree) give(gpuNode(head), net);
    }
    return false;
  }

  // GPUs to start from when entering through `net`: the ones next to it first.
  std::vector<int> headsFor(int net) const {
    std::vector<int> local = localGpusOfNet(h_, net);
    std::vector<int> rest;
    for (int g = 0; g < ng_; g++) {
      if (std::find(local.begin(), local.end(), g) == local.end()) rest.push_back(g);
    }
    std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) {
      const Path& pa = h_.paths[net][gpuNode(a)];
      const Path& pb = h_.paths[net][gpuNode(b)];
      return std::make_pair((int)pa.type, -pa.bw) < std::make_pair((int)pb.type, -pb.bw);
    });
    local.insert(local.end(), rest.begin(), rest.end());
    return local;
  }

  bool tryStart(int head, int net, const std::vector<int>* forced, HostChannel* out) {
    if (budget_ <= 0) return false;
    if (!startAt(head, net, forced)) return false;
    out->gpus = order_;
    out->netIn = netIn_;
    out->netOut = netOut_;
    return true;
  }

  // One more channel; channel `index` prefers NIC index % nNics (rail index), and every channel
  // first tries to repeat the previous one's GPU order.
  bool oneChannel(int index, const HostChannel* hint, HostChannel* out) {
    budget_ = opts_.stepBudget;  // shared by all starts: bounds the cost of the last, failing channel
    if (!inter_) {
      if (hint && tryStart(hint->gpus[0], -1, &hint->gpus, out)) return true;
      // A ring is the same from any start; a chain is not, so trees try every head.
      int heads = pattern_ == Pattern::Ring ? 1 : ng_;
      for (int head = 0; head < heads; head++) {
        if (tryStart(head, -1, nullptr, out)) return true;
      }
      return false;
    }
    int nn = (int)nets_.size();
    for (int i = 0; i < nn; i++) {
      int net = nets_[(index + i) % nn];
      if (hint && tryStart(hint->gpus[0], net, &hint->gpus, out)) return true;
      for (int head : headsFor(net)) {
        if (tryStart(head, net, nullptr, out)) return true;
      }
    }
    return false;
  }
};

// Path types that occur between the host's GPUs (or between GPUs and NICs), sorted: the limits
// worth trying, since a limit no path has gives the same result as the one below it.
std::vector<PathType> typesBetweenGpus(const HostGraph& h) {
  std::vector<PathType> t;
  for (size_t a = 0; a < h.gpus.size(); a++) {
    for (size_t b = 0; b < h.gpus.size(); b++) {
      if (a != b) t.push_back(h.paths[h.gpus[a]][h.gpus[b]].type);
    }
  }
  if (t.empty()) t.push_back(PathType::Loc);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  while (!t.empty() && t.back() >= PathType::Net) t.pop_back();
  if (t.empty()) t.push_back(PathType::Sys);
  return t;
}

std::vector<PathType> typesGpuNet(const HostGraph& h) {
  std::vector<PathType> t;
  for (int g : h.gpus) {
    for (int n : h.nets) {
      if (h.paths[g][n].connected()) t.push_back(h.paths[g][n].type);
      if (h.paths[n][g].connected()) t.push_back(h.paths[n][g].type);
    }
  }
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

// The widest path from any GPU to another GPU (or to a NIC): no channel can be faster.
double maxPathBw(const HostGraph& h, bool inter) {
  if (!inter && h.gpus.size() == 1) return bw::kLoc;
  double m = 0;
  for (int g : h.gpus) {
    for (int o : inter ? h.nets : h.gpus) {
      if (o != g && h.paths[g][o].connected()) m = std::max(m, h.paths[g][o].bw);
    }
  }
  return m;
}

// What one GPU can push at most: its NVLinks together, or its PCIe link.
double totalGpuBw(const HostGraph& h, bool inter) {
  if (!inter && h.gpus.size() == 1) return bw::kLoc;
  double m = 0;
  for (int g : h.gpus) {
    double nvl = 0, pci = 0;
    for (const Link& l : h.nodes[g].links) {
      if (l.type == LinkType::Nvl) nvl += l.bw;
      if (l.type == LinkType::Pci) pci = l.bw;
    }
    m = std::max(m, std::max(nvl, pci));
  }
  return m;
}

// Whether the host's GPUs form exactly two NVLink islands (of two GPUs or more) not joined by NVLink.
bool splitNvLink(const HostGraph& h) {
  int ng = (int)h.gpus.size();
  std::vector<int> island(ng);
  for (int g = 0; g < ng; g++) island[g] = g;
  for (int g = 0; g < ng; g++) {
    for (int p = g + 1; p < ng; p++) {
      if (h.gpuDirect[g][p] != PathType::Nvl) continue;
      int from = island[p], to = island[g];
      for (int& x : island) {
        if (x == from) x = to;
      }
    }
  }
  std::vector<int> size(ng, 0);
  for (int g = 0; g < ng; g++) size[island[g]]++;
  int islands = 0;
  for (int c : size) islands += c > 1;
  return islands == 2;
}

}  // namespace

namespace {

// Channels at one bandwidth: the tightest path-type limits that give any channel (GPU<->NIC limit
// first, then GPU<->GPU), rail-aligned NICs before crossing NICs when crossNic is 2.
HostSearch atSpeed(HostSearcher& searcher, double speed, bool inter, int crossNic,
                   const std::vector<PathType>& intraTypes, const std::vector<PathType>& interTypes) {
  HostSearch found;
  std::vector<bool> crossPhases;
  if (crossNic == 1) crossPhases = {true};
  else if (crossNic == 2 && inter) crossPhases = {false, true};
  else crossPhases = {false};
  for (bool cross : crossPhases) {
    for (PathType tInter : interTypes) {
      for (PathType tIntra : intraTypes) {
        // Across hosts, GPU-to-GPU hops may not be farther than the GPU-to-NIC ones.
        if (inter && tIntra > tInter && tIntra != intraTypes.front()) break;
        std::vector<HostChannel> chans = searcher.run(Attempt{toMilli(speed), tIntra, inter ? tInter : PathType::Sys, cross});
        if (!chans.empty()) {
          found.channels = std::move(chans);
          found.typeIntra = tIntra;
          found.typeInter = inter ? tInter : PathType::Loc;
          return found;
        }
      }
    }
  }
  return found;
}

// Nothing fits even the slowest channel: one channel in plain order, as NCCL falls back to.
void fallback(const HostGraph& h, HostSearch* out) {
  HostChannel c;
  for (int g = 0; g < (int)h.gpus.size(); g++) c.gpus.push_back(g);
  if (out->inter) c.netIn = c.netOut = h.nets.front();
  out->channels.assign(1, c);
  out->fallback = true;
  out->bwIntra = out->bwInter = 0.1;
  out->typeIntra = PathType::Sys;
  out->typeInter = out->inter ? PathType::Sys : PathType::Loc;
  WEFT_INFO(log::kGraph, "search: no %s channel fits host %lx; falling back to one channel in GPU order",
            patternName(out->pattern), (unsigned long)h.hostHash);
}

// Fast links: one channel cannot drive them alone, so spread the same orders over twice as many
// channels at half the bandwidth each. Hopper and newer only do it for the fastest channels.
void duplicate(int ccMin, int maxChannels, HostSearch* s) {
  int n = s->nChannels();
  if (s->bwIntra < 25.0 || (ccMin > 80 && s->bwIntra < 50.0 && n > 4)) return;
  int target = std::min(2 * n, maxChannels);
  for (int c = n; c < target; c++) s->channels.push_back(s->channels[c - n]);
  int factor = (target + n - 1) / n;
  s->bwIntra /= factor;
  s->bwInter /= factor;
}

}  // namespace

HostSearch searchHost(const HostGraph& h, Pattern pattern, bool inter, int ccMin, const SearchOptions& opts) {
  HostSearch best;
  best.pattern = pattern;
  int ng = (int)h.gpus.size();
  if (ng == 0) return best;
  if (inter && h.nets.empty()) inter = false;  // nothing to cross hosts with; the caller reports it
  best.inter = inter;

  std::vector<double> speeds = searchSpeeds(ccMin, inter);
  std::vector<PathType> intraTypes = typesBetweenGpus(h);
  std::vector<PathType> interTypes = inter ? typesGpuNet(h) : std::vector<PathType>{PathType::Loc};
  if (interTypes.empty()) interTypes.push_back(PathType::Sys);
  double maxBw = maxPathBw(h, inter);
  double totalBw = totalGpuBw(h, inter);
  // A chain need not come back to its start, so a tree can move more than a ring over the same links.
  if (pattern == Pattern::Tree && ng > 1) totalBw *= (double)ng / (ng - 1);

  SearchOptions o = opts;
  // Two NVLink islands joined by a slow link (two sockets, one NVLink pair each): trees do better
  // there but need two channels, and rings and trees share the channel count.
  if (pattern == Pattern::Ring && splitNvLink(h) && o.maxChannels >= 2) o.minChannels = std::max(o.minChannels, 2);

  size_t si = 0;
  while (si + 1 < speeds.size() && (speeds[si] > maxBw || speeds[si] * o.minChannels > totalBw)) si++;

  HostSearcher searcher(h, pattern, inter, o);
  int bestCount = 0;
  double bestSpeed = 0;
  for (; si < speeds.size(); si++) {
    double s = speeds[si];
    // A lower bandwidth only pays if it about doubles the channel count.
    if (bestCount > 0 && s / bestSpeed <= 0.49) break;
    HostSearch found = atSpeed(searcher, s, inter, o.crossNic, intraTypes, interTypes);
    int n = found.nChannels();
    if (n >= o.minChannels && n * s > bestCount * bestSpeed + 1e-9) {
      best.channels = std::move(found.channels);
      best.typeIntra = found.typeIntra;
      best.typeInter = found.typeInter;
      bestCount = n;
      bestSpeed = s;
    }
    if (bestCount > 0 && (bestCount * bestSpeed >= totalBw || bestCount >= o.maxChannels)) break;
  }
  if (bestCount == 0) {
    fallback(h, &best);
    return best;
  }
  best.bwIntra = best.bwInter = bestSpeed;
  for (const HostChannel& c : best.channels) best.crossNic |= c.netOut != c.netIn;
  duplicate(ccMin, o.maxChannels, &best);
  return best;
}

}  // namespace weft::graph
