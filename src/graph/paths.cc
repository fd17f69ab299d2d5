#include "graph/paths.h"

#include <algorithm>

namespace weft::graph {

namespace {

// Breadth-first from `src`, hop count first: a node's path is replaced only by one at most as long
// and strictly wider, so among the shortest routes the widest wins. A path may go through a GPU
// only as NVLink-GPU-NVLink right after the source (NVB); NET nodes are endpoints.
void pathsFrom(HostGraph* h, int src, bool nvbDisable) {
  std::vector<Path>& P = h->paths[src];
  P.assign(h->nodes.size(), Path{});
  P[src].type = PathType::Loc;
  P[src].bw = bw::kLoc;
  std::vector<int> frontier{src};
  std::vector<char> queued(h->nodes.size(), 0);
  while (!frontier.empty()) {
    std::vector<int> next;
    std::fill(queued.begin(), queued.end(), 0);
    for (int node : frontier) {
      const Node& nd = h->nodes[node];
      for (int li = 0; li < (int)nd.links.size(); li++) {
        const Link& l = nd.links[li];
        int rem = l.peer;
        const Node& rn = h->nodes[rem];
        if (node != src) {
          if (nd.type == NodeType::Net) continue;
          if (nd.type == NodeType::Gpu &&
              (nvbDisable || h->nodes[src].type != NodeType::Gpu || l.type != LinkType::Nvl ||
               rn.type != NodeType::Gpu || P[node].count() > 1))
            continue;
        }
        const Path& cur = P[node];
        double b = std::min(cur.bw, l.bw);
        Path& R = P[rem];
        if (!((!R.connected() || R.count() > cur.count()) && R.bw < b)) continue;
        PathType step = l.type == LinkType::Net ? PathType::Loc : (PathType)(int)l.type;
        if (nd.type == NodeType::Pci && rn.type == NodeType::Pci) step = PathType::Pxb;
        if (l.type == LinkType::Pci && (nd.type == NodeType::Cpu || rn.type == NodeType::Cpu)) step = PathType::Phb;
        if (nd.type == NodeType::Gpu && node != src && cur.type == PathType::Nvl && step == PathType::Nvl)
          step = PathType::Nvb;
        std::vector<PathHop> hops = cur.hops;
        hops.push_back(PathHop{node, li});
        R.hops = std::move(hops);
        R.bw = b;
        R.type = maxPath(cur.type, step);
        if (!queued[rem]) {
          queued[rem] = 1;
          next.push_back(rem);
        }
      }
    }
    frontier = std::move(next);
  }
}

// C2C to the CPU then PCIe to the NIC is its own class (P2C); otherwise the worse type wins.
PathType mergeTypes(PathType a, PathType b) {
  if (maxPath(a, b) == PathType::Phb && minPath(a, b) == PathType::C2c) return PathType::P2c;
  return maxPath(a, b);
}

// The path a -> via -> b.
Path through(const HostGraph& h, int a, int via, int b) {
  const Path& p1 = h.paths[a][via];
  const Path& p2 = h.paths[via][b];
  Path p;
  p.hops = p1.hops;
  p.hops.insert(p.hops.end(), p2.hops.begin(), p2.hops.end());
  p.type = mergeTypes(p1.type, p2.type);
  p.bw = std::min(p1.bw, p2.bw);
  return p;
}

// The relay GPU of a PXN path: the first GPU the path reaches after leaving its source.
int relayGpu(const HostGraph& h, const Path& p) {
  for (size_t i = 0; i < p.hops.size(); i++) {
    int to = h.nodes[p.hops[i].node].links[p.hops[i].link].peer;
    if (h.nodes[to].type == NodeType::Gpu) return to;
  }
  return -1;
}

}  // namespace

PathType p2pLevel(const HostGraph& h, const TopoOptions& o) {
  if (o.p2pLevel) return *o.p2pLevel;
  // P2P through an AMD root complex works for a pair of GPUs; NCCL allows it there only.
  bool amd = false;
  for (int c : h.cpus) amd |= h.nodes[c].arch == CpuArch::X86 && h.nodes[c].vendor == CpuVendor::Amd;
  return amd && h.gpus.size() <= 2 ? PathType::Sys : PathType::Pxb;
}

bool p2pAllowed(const HostGraph& h, int gpuA, int gpuB, const TopoOptions& o) {
  if (gpuA == gpuB) return true;
  return h.gpuDirect[gpuA][gpuB] <= p2pLevel(h, o);
}

bool netFasterThanP2p(const HostGraph& h, int gpuA, int gpuB, const TopoOptions& o) {
  if (o.netDisableIntra || gpuA == gpuB) return false;
  double direct = h.gpuDirectBw[gpuA][gpuB];
  return h.gpuNearNetBw[gpuA] > direct && h.gpuNearNetBw[gpuB] > direct;
}

bool gdrAllowed(const HostGraph& h, int gpuNode, int netNode, bool read, const TopoOptions& o) {
  const Node& net = h.nodes[netNode];
  const Node& gpu = h.nodes[gpuNode];
  if (!net.netGdr || !gpu.gdr) return false;
  if (read && gpu.sm < 80) {
    // Pre-Ampere GPUs serve NIC reads poorly next to other PCIe traffic; only with NVLink peers.
    bool nvlink = h.gpus.size() == 1;
    for (int g : h.gpus) nvlink |= g != gpuNode && h.paths[gpuNode][g].type == PathType::Nvl;
    if (!nvlink) return false;
  }
  PathType level = o.netGdrLevel ? *o.netGdrLevel : (o.netGdrC2c ? PathType::P2c : PathType::Pxb);
  const Path* p = &h.paths[gpuNode][netNode];
  if (p->type == PathType::Pxn) {
    int relay = relayGpu(h, *p);
    if (relay >= 0) p = &h.paths[relay][netNode];
  }
  return p->type <= level;
}

std::vector<int> localGpusOfNet(const HostGraph& h, int netNode) {
  std::vector<int> best;
  PathType bestType = PathType::Dis;
  double bestBw = 0;
  for (size_t g = 0; g < h.gpus.size(); g++) {
    const Path& p = h.paths[netNode][h.gpus[g]];
    if (!p.connected()) continue;
    if (p.type < bestType || (p.type == bestType && p.bw > bestBw)) {
      best.clear();
      bestType = p.type;
      bestBw = p.bw;
    }
    if (p.type == bestType && p.bw == bestBw) best.push_back((int)g);
  }
  return best;
}

namespace {

// The raw GPU->GPU figures the P2P and "NIC is faster" rules look at.
void recordDirect(HostGraph& h) {
  size_t ng = h.gpus.size();
  h.gpuDirect.assign(ng, std::vector<PathType>(ng, PathType::Loc));
  h.gpuDirectBw.assign(ng, std::vector<double>(ng, bw::kLoc));
  h.gpuNearNetBw.assign(ng, 0.0);
  for (size_t a = 0; a < ng; a++) {
    for (size_t b = 0; b < ng; b++) {
      h.gpuDirect[a][b] = h.paths[h.gpus[a]][h.gpus[b]].type;
      h.gpuDirectBw[a][b] = h.paths[h.gpus[a]][h.gpus[b]].bw;
    }
    for (int net : h.nets) {
      const Path& p = h.paths[h.gpus[a]][net];
      if (p.type <= PathType::Pxb) h.gpuNearNetBw[a] = std::max(h.gpuNearNetBw[a], p.bw);
    }
  }
}

// GPU pairs beyond the P2P level go through the CPU next to the receiver; pairs that can use
// neither P2P nor SHM (or would rather use a NIC) are marked NET: they talk over the network.
void divertGpuPairs(HostGraph& h, const TopoOptions& o) {
  size_t ng = h.gpus.size();
  std::vector<std::vector<Path>> next(ng, std::vector<Path>(ng));
  for (size_t a = 0; a < ng; a++) {
    for (size_t b = 0; b < ng; b++) {
      next[a][b] = h.paths[h.gpus[a]][h.gpus[b]];
      if (a == b) continue;
      bool p2p = p2pAllowed(h, (int)a, (int)b, o);
      if (!p2p) {
        int cpu = h.localCpu(h.gpus[b]);
        if (cpu >= 0) next[a][b] = through(h, h.gpus[a], cpu, h.gpus[b]);
      }
      if (netFasterThanP2p(h, (int)a, (int)b, o) || (!p2p && o.shmDisable)) next[a][b].type = PathType::Net;
    }
  }
  for (size_t a = 0; a < ng; a++) {
    for (size_t b = 0; b < ng; b++) h.paths[h.gpus[a]][h.gpus[b]] = std::move(next[a][b]);
  }
}

// Grace-like hosts: a GPU reaching a NIC over C2C then PCIe through its own CPU is P2C.
void markC2cNics(HostGraph& h) {
  for (int g : h.gpus) {
    int cpu = h.localCpu(g);
    if (cpu < 0) continue;
    for (int net : h.nets) {
      if (mergeTypes(h.paths[g][cpu].type, h.paths[net][cpu].type) == PathType::P2c) {
        h.paths[g][net].type = minPath(PathType::P2c, h.paths[g][net].type);
        h.paths[net][g].type = minPath(PathType::P2c, h.paths[net][g].type);
      }
    }
  }
}

void applyNicRules(HostGraph& h, const TopoOptions& o) {
  for (int net : h.nets) {
    std::vector<int> locals = localGpusOfNet(h, net);
    int local = locals.empty() ? -1 : h.gpus[locals[0]];
    for (int g : h.gpus) {
      // PXN: send through the GPU next to the NIC when it is reached over NVLink and either has a
      // wider path to the NIC or spares us a trip through the CPU.
      if (!o.pxnDisable && local >= 0 && local != g) {
        const Path& peerNet = h.paths[local][net];
        const Path& mine = h.paths[g][net];
        PathType relayLevel = o.pxnC2c ? PathType::P2c : PathType::Pxb;
        if (peerNet.type <= relayLevel && gdrAllowed(h, local, net, true, o) &&
            h.paths[local][g].type <= PathType::Nvl && (peerNet.bw > mine.bw || mine.type > PathType::Pxn)) {
          Path p = through(h, g, local, net);
          p.type = PathType::Pxn;
          h.paths[g][net] = std::move(p);
        }
      }
      // Without GPU Direct RDMA the data is staged in host memory next to the GPU.
      if (h.paths[g][net].type < PathType::Phb && !gdrAllowed(h, g, net, false, o)) {
        int cpu = h.localCpu(g);
        if (cpu >= 0) {
          Path in = through(h, net, cpu, g);
          Path out = through(h, g, cpu, net);
          h.paths[net][g] = std::move(in);
          h.paths[g][net] = std::move(out);
        }
      }
    }
  }
}

}  // namespace

void computePaths(Topology* topo, const TopoOptions& o) {
  for (HostGraph& h : topo->hosts) {
    h.paths.assign(h.nodes.size(), {});
    for (size_t s = 0; s < h.nodes.size(); s++) pathsFrom(&h, (int)s, o.nvbDisable);
    recordDirect(h);
    divertGpuPairs(h, o);
    markC2cNics(h);
    applyNicRules(h, o);
  }
  topo->pathsReady = true;
}

}  // namespace weft::graph
