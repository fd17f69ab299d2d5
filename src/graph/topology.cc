#include "graph/topology.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>

#include "core/log.h"

namespace weft::graph {

int HostGraph::findNode(NodeType type, int64_t id) const {
  for (size_t i = 0; i < nodes.size(); i++) {
    if (nodes[i].type == type && nodes[i].id == id) return (int)i;
  }
  return -1;
}

int HostGraph::gpuIndexOfNode(int node) const {
  for (size_t i = 0; i < gpus.size(); i++) {
    if (gpus[i] == node) return (int)i;
  }
  return -1;
}

int HostGraph::localCpu(int node) const {
  int best = -1, bestHops = INT_MAX;
  for (int c : cpus) {
    if (c == node) return c;
    if (paths.empty()) continue;
    const Path& p = paths[node][c];
    if (p.connected() && p.count() < bestHops) {
      best = c;
      bestHops = p.count();
    }
  }
  return best;
}

int HostGraph::minSm() const {
  int m = 0;
  for (int g : gpus) {
    if (m == 0 || nodes[g].sm < m) m = nodes[g].sm;
  }
  return m;
}

int Topology::minSm() const {
  int m = 0;
  for (const auto& h : hosts) {
    int s = h.minSm();
    if (s > 0 && (m == 0 || s < m)) m = s;
  }
  return m;
}

std::vector<int> Topology::hostOrder() const {
  std::vector<std::pair<int, int>> keyed;  // (lowest rank, host)
  for (size_t h = 0; h < hosts.size(); h++) {
    int low = INT_MAX;
    for (int g : hosts[h].gpus) low = std::min(low, hosts[h].nodes[g].rank);
    keyed.emplace_back(low, (int)h);
  }
  std::stable_sort(keyed.begin(), keyed.end());
  std::vector<int> order;
  for (auto& k : keyed) order.push_back(k.second);
  return order;
}

namespace {

// PCI class codes as NCCL reads them (prefix match on the hex text).
enum class PciKind { Switch, Gpu, Nic, Nvs, Cpu, Other };

PciKind pciKind(const std::string& cls) {
  if (cls.rfind("0x0604", 0) == 0) return PciKind::Switch;
  if (cls == "0x080100") return PciKind::Switch;  // CX8 data-direct function, treated as a bridge
  if (cls.rfind("0x068000", 0) == 0) return PciKind::Nvs;
  if (cls.rfind("0x068001", 0) == 0) return PciKind::Cpu;
  if (cls.rfind("0x03", 0) == 0) return PciKind::Gpu;
  if (cls.rfind("0x02", 0) == 0) return PciKind::Nic;
  return PciKind::Other;
}

uint64_t hexAttr(const XmlNode& x, const char* key) {
  const std::string* v = x.attr(key);
  return v ? strtoull(v->c_str(), nullptr, 0) : 0;
}

uint64_t pciDeviceOf(const XmlNode& x) {
  return (hexAttr(x, "vendor") << 48) | (hexAttr(x, "device") << 32) | (hexAttr(x, "subsystem_vendor") << 16) |
         hexAttr(x, "subsystem_device");
}

// Broadcom PEX switches present one physical switch as two levels of bridges although every port
// gets full bandwidth; NCCL flattens them so that a GPU and a NIC on one chip are PIX, not PXB.
int bcmGen(uint64_t device, int level) {
  if ((device & 0xfffffffffffff000ULL) == 0x1000c0101000a000ULL) return 4;
  if ((device & 0xfffffffffffff000ULL) == (0x1000c03010000000ULL | (uint64_t)level * 0x1000)) return 5;
  return 0;
}

struct PendingGpu {
  int host;
  int node;
  const XmlNode* xml;  // the <gpu> element (nvlink, c2c children)
};

class Builder {
 public:
  Builder(Topology* topo, const XmlNode& system) : topo_(topo), system_(system) {}

  Status run() {
    if (system_.name != "system") {
      WEFT_WARN("topology XML: the root element is <%s>, expected <system>", system_.name.c_str());
      return ncclInvalidArgument;
    }
    for (const XmlNode& x : system_.children) {
      if (x.name == "cpu") WEFT_TRY(addCpu(x));
    }
    for (const PendingGpu& p : pending_) WEFT_TRY(addGpuLinks(p));
    for (HostGraph& h : topo_->hosts) {
      flattenBcmSwitches(&h);
      connectCpus(&h);
      finish(&h);
    }
    return indexRanks();
  }

 private:
  Topology* topo_;
  const XmlNode& system_;
  std::vector<PendingGpu> pending_;

  int hostIndex(uint64_t hash) {
    for (size_t i = 0; i < topo_->hosts.size(); i++) {
      if (topo_->hosts[i].hostHash == hash) return (int)i;
    }
    topo_->hosts.emplace_back();
    topo_->hosts.back().hostHash = hash;
    return (int)topo_->hosts.size() - 1;
  }

  static int addNode(HostGraph* h, NodeType type, int64_t id) {
    Node n;
    n.type = type;
    n.id = id;
    h->nodes.push_back(std::move(n));
    return (int)h->nodes.size() - 1;
  }

  // Adds bandwidth to an existing link of that type and peer (NVLinks are counted per link), or a
  // new link.
  static void connect(HostGraph* h, int a, int b, LinkType type, double bw) {
    for (Link& l : h->nodes[a].links) {
      if (l.peer == b && l.type == type) {
        l.bw += bw;
        return;
      }
    }
    h->nodes[a].links.push_back(Link{type, bw, b});
  }

  Status addCpu(const XmlNode& x) {
    uint64_t hash = strtoull(x.attrOr("host_hash", "0").c_str(), nullptr, 16);
    int hi = hostIndex(hash);
    HostGraph* h = &topo_->hosts[hi];
    int numa = (int)x.intAttr("numaid", -1);
    int existing = h->findNode(NodeType::Cpu, numa);
    int cpu = existing >= 0 ? existing : addNode(h, NodeType::Cpu, numa);
    Node& c = h->nodes[cpu];
    c.numaId = numa;
    c.arch = parseCpuArch(x.attrOr("arch", ""));
    c.vendor = parseCpuVendor(x.attrOr("vendor", ""));
    c.model = classifyCpuModel(c.arch, c.vendor, (int)x.intAttr("familyid", 0), (int)x.intAttr("modelid", 0));
    int nicIndex = 0;
    for (const XmlNode& sub : x.children) {
      if (sub.name == "pci") WEFT_TRY(addPci(hi, sub, cpu, numa));
      if (sub.name == "nic") {
        // A NIC without a PCI device (virtio, or unknown): hangs off the CPU at local bandwidth.
        int64_t id = ((int64_t)(numa & 0xff) << 48) | (int64_t)(0xfff00000 + nicIndex++);
        int nic = addNode(h, NodeType::Nic, id);
        connect(h, cpu, nic, LinkType::Pci, bw::kLoc);
        connect(h, nic, cpu, LinkType::Pci, bw::kLoc);
        WEFT_TRY(addNets(h, sub, nic));
      }
    }
    return ncclSuccess;
  }

  Status addPci(int hi, const XmlNode& x, int parent, int numa) {
    HostGraph* h = &topo_->hosts[hi];
    const std::string* busIdText = x.attr("busid");
    if (!busIdText) {
      WEFT_WARN("topology XML: a <pci> element has no busid attribute");
      return ncclInvalidArgument;
    }
    int64_t busId = busIdToInt64(*busIdText);
    PciKind kind = pciKind(x.attrOr("class", ""));
    double linkBw = bw::pci(x.attrOr("link_speed", ""), (int)x.intAttr("link_width", 0));

    int ranked = 0;
    for (const XmlNode& g : x.children) {
      if (g.name != "gpu" || !g.hasAttr("rank")) continue;
      if (++ranked > 1) {
        WEFT_WARN("topology XML: GPU %s carries two ranks; one rank per GPU is supported", busIdText->c_str());
        return ncclInvalidUsage;
      }
      int gpu = addNode(h, NodeType::Gpu, busId);
      Node& n = h->nodes[gpu];
      n.rank = (int)g.intAttr("rank", -1);
      n.dev = (int)g.intAttr("dev", -1);
      n.sm = (int)g.intAttr("sm", 0);
      n.gdr = g.intAttr("gdr", 0) != 0;
      connect(h, gpu, parent, LinkType::Pci, linkBw);
      connect(h, parent, gpu, LinkType::Pci, linkBw);
      pending_.push_back(PendingGpu{hi, gpu, &g});
    }
    if (ranked) return ncclSuccess;

    if (const XmlNode* nicXml = x.child("nic")) {
      int64_t id = ((int64_t)(numa & 0xff) << 48) | busId;
      int nic = h->findNode(NodeType::Nic, id);
      if (nic < 0) {
        nic = addNode(h, NodeType::Nic, id);
        connect(h, nic, parent, LinkType::Pci, linkBw);
        connect(h, parent, nic, LinkType::Pci, linkBw);
      }
      return addNets(h, *nicXml, nic);
    }
    if (kind == PciKind::Switch || kind == PciKind::Other) {
      int pci = addNode(h, NodeType::Pci, busId);
      h->nodes[pci].pciDevice = pciDeviceOf(x);
      connect(h, pci, parent, LinkType::Pci, linkBw);
      connect(h, parent, pci, LinkType::Pci, linkBw);
      for (const XmlNode& sub : x.children) {
        if (sub.name == "pci") WEFT_TRY(addPci(hi, sub, pci, numa));
      }
    }
    // GPUs without a rank, NVSwitch functions and NICs without <nic> take no part in the graph;
    // they stay in the description.
    return ncclSuccess;
  }

  Status addNets(HostGraph* h, const XmlNode& nicXml, int nic) {
    for (const XmlNode& x : nicXml.children) {
      if (x.name != "net" || !x.hasAttr("dev")) continue;
      int dev = (int)x.intAttr("dev", -1);
      if (h->findNode(NodeType::Net, dev) >= 0) {
        WEFT_WARN("topology XML: two network ports have dev=\"%d\"", dev);
        return ncclInvalidArgument;
      }
      int net = addNode(h, NodeType::Net, dev);
      Node& n = h->nodes[net];
      n.netName = x.attrOr("name", "");
      n.netBw = bw::net(x.intAttr("speed", 0));
      n.port = (int)x.intAttr("port", 0);
      n.guid = strtoull(x.attrOr("guid", "0").c_str(), nullptr, 16);
      n.netGdr = x.intAttr("gdr", 0) != 0;
      n.coll = x.intAttr("coll", 0) != 0;
      n.maxConn = (int)x.intAttr("maxconn", 64);
      n.latency = x.floatAttr("latency", 0);
      connect(h, nic, net, LinkType::Net, n.netBw);
      connect(h, net, nic, LinkType::Net, n.netBw);
    }
    return ncclSuccess;
  }

  // Up the PCI tree to the NUMA domain the device hangs off.
  static int cpuAbove(const HostGraph& h, int node) {
    std::vector<char> seen(h.nodes.size(), 0);
    std::vector<int> stack{node};
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      if (seen[n]) continue;
      seen[n] = 1;
      if (h.nodes[n].type == NodeType::Cpu) return n;
      for (const Link& l : h.nodes[n].links) {
        NodeType t = h.nodes[l.peer].type;
        if (l.type == LinkType::Pci && (t == NodeType::Pci || t == NodeType::Cpu)) stack.push_back(l.peer);
      }
    }
    return -1;
  }

  Status addGpuLinks(const PendingGpu& p) {
    HostGraph* h = &topo_->hosts[p.host];
    Node& gpu = h->nodes[p.node];
    double perLink = bw::nvlinkPerLink(gpu.sm);
    for (const XmlNode& x : p.xml->children) {
      if (x.name == "nvlink") {
        int count = (int)x.intAttr("count", 0);
        if (count <= 0) continue;
        PciKind kind = pciKind(x.attrOr("tclass", ""));
        double linkBw = count * perLink;
        if (kind == PciKind::Gpu) {
          int peer = h->findNode(NodeType::Gpu, busIdToInt64(x.attrOr("target", "")));
          // The peer's own <nvlink> gives the reverse direction; a peer without a rank is not in
          // the graph and its links do not matter.
          if (peer >= 0) connect(h, p.node, peer, LinkType::Nvl, linkBw);
        } else if (kind == PciKind::Cpu) {
          int cpu = cpuAbove(*h, p.node);
          if (cpu >= 0) {
            connect(h, p.node, cpu, LinkType::Nvl, linkBw);
            connect(h, cpu, p.node, LinkType::Nvl, linkBw);
          }
        } else {
          if (h->nvs < 0) h->nvs = addNode(h, NodeType::Nvs, 0);
          connect(h, p.node, h->nvs, LinkType::Nvl, linkBw);
          connect(h, h->nvs, p.node, LinkType::Nvl, linkBw);
        }
      } else if (x.name == "c2c") {
        double c2cBw = x.intAttr("bw", 0) * x.intAttr("count", 0) / 1000.0;
        int cpu = cpuAbove(*h, p.node);
        if (cpu >= 0 && c2cBw > 0) {
          connect(h, p.node, cpu, LinkType::C2c, c2cBw);
          connect(h, cpu, p.node, LinkType::C2c, c2cBw);
        }
      }
    }
    return ncclSuccess;
  }

  static void removeNodes(HostGraph* h, const std::vector<char>& dead) {
    std::vector<int> remap(h->nodes.size(), -1);
    std::vector<Node> kept;
    for (size_t i = 0; i < h->nodes.size(); i++) {
      if (dead[i]) continue;
      remap[i] = (int)kept.size();
      kept.push_back(std::move(h->nodes[i]));
    }
    for (Node& n : kept) {
      std::vector<Link> links;
      for (Link l : n.links) {
        if (remap[l.peer] < 0) continue;
        l.peer = remap[l.peer];
        links.push_back(l);
      }
      n.links = std::move(links);
    }
    if (h->nvs >= 0) h->nvs = remap[h->nvs];
    h->nodes = std::move(kept);
  }

  static void flattenBcmSwitches(HostGraph* h) {
    std::vector<char> dead(h->nodes.size(), 0);
    for (size_t s = 0; s < h->nodes.size(); s++) {
      Node& sw = h->nodes[s];
      if (dead[s] || sw.type != NodeType::Pci) continue;
      int gen = bcmGen(sw.pciDevice, 0);
      if (!gen) continue;
      std::vector<int> subs;
      for (const Link& l : sw.links) {
        const Node& sub = h->nodes[l.peer];
        if (sub.type == NodeType::Pci && !dead[l.peer] && bcmGen(sub.pciDevice, 1) == gen) subs.push_back(l.peer);
      }
      for (int sub : subs) {
        // Drop the switch <-> sub links, move the sub's other links onto the switch.
        auto& swLinks = h->nodes[s].links;
        swLinks.erase(std::remove_if(swLinks.begin(), swLinks.end(), [&](const Link& l) { return l.peer == sub; }),
                      swLinks.end());
        for (const Link& l : h->nodes[sub].links) {
          if (l.peer == (int)s) continue;
          h->nodes[s].links.push_back(l);
          for (Link& back : h->nodes[l.peer].links) {
            if (back.peer == sub) back.peer = (int)s;
          }
        }
        h->nodes[sub].links.clear();
        dead[sub] = 1;
      }
      h->nodes[s].pciDevice |= 0xffff;  // never merge this switch again
    }
    removeNodes(h, dead);
  }

  static void connectCpus(HostGraph* h) {
    std::vector<int> cpus;
    for (size_t i = 0; i < h->nodes.size(); i++) {
      if (h->nodes[i].type == NodeType::Cpu) cpus.push_back((int)i);
    }
    for (int a : cpus) {
      const Node& c = h->nodes[a];
      double b = bw::interCpu(c.arch, c.vendor, c.model);
      for (int o : cpus) {
        if (o != a) connect(h, a, o, LinkType::Sys, b);
      }
    }
  }

  static void finish(HostGraph* h) {
    h->gpus.clear();
    h->nets.clear();
    h->cpus.clear();
    for (size_t i = 0; i < h->nodes.size(); i++) {
      Node& n = h->nodes[i];
      // Widest links first: path search meets them first, as NCCL's does.
      std::stable_sort(n.links.begin(), n.links.end(), [](const Link& a, const Link& b) { return a.bw > b.bw; });
      if (n.type == NodeType::Gpu) h->gpus.push_back((int)i);
      if (n.type == NodeType::Net) h->nets.push_back((int)i);
      if (n.type == NodeType::Cpu) h->cpus.push_back((int)i);
    }
  }

  Status indexRanks() {
    int maxRank = -1;
    for (const HostGraph& h : topo_->hosts) {
      for (int g : h.gpus) maxRank = std::max(maxRank, h.nodes[g].rank);
    }
    topo_->ranks.assign(maxRank + 1, RankLocation{});
    for (size_t hi = 0; hi < topo_->hosts.size(); hi++) {
      const HostGraph& h = topo_->hosts[hi];
      for (size_t gi = 0; gi < h.gpus.size(); gi++) {
        int r = h.nodes[h.gpus[gi]].rank;
        if (r < 0) {
          WEFT_WARN("topology XML: GPU %s has a negative rank %d", h.nodes[h.gpus[gi]].busId().c_str(), r);
          return ncclInvalidArgument;
        }
        RankLocation& loc = topo_->ranks[r];
        if (loc.host >= 0) {
          const HostGraph& other = topo_->hosts[loc.host];
          WEFT_WARN("topology: rank %d is on two GPUs, %s (host %lx) and %s (host %lx)", r,
                    other.nodes[other.gpus[loc.gpu]].busId().c_str(), (unsigned long)other.hostHash,
                    h.nodes[h.gpus[gi]].busId().c_str(), (unsigned long)h.hostHash);
          return ncclInvalidUsage;
        }
        loc.host = (int)hi;
        loc.gpu = (int)gi;
      }
    }
    return ncclSuccess;
  }
};

}  // namespace

Status buildTopology(XmlNode system, Topology* out) {
  Topology t;
  t.system = std::move(system);
  Builder b(&t, t.system);
  WEFT_TRY(b.run());
  *out = std::move(t);
  return ncclSuccess;
}

}  // namespace weft::graph
