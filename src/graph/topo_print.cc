#include "graph/topo_print.h"

#include <cstdio>

#include "graph/transport_choice.h"
#include "util/format.h"

namespace weft::graph {

namespace {


std::string nodeLabel(const HostGraph& h, int n) {
  const Node& x = h.nodes[n];
  char buf[160];
  switch (x.type) {
    case NodeType::Gpu:
      snprintf(buf, sizeof(buf), "GPU %s rank %d dev %d sm %d%s", x.busId().c_str(), x.rank, x.dev, x.sm,
               x.gdr ? " gdr" : "");
      break;
    case NodeType::Pci:
      snprintf(buf, sizeof(buf), "PCI %s (%04llx:%04llx)", x.busId().c_str(),
               (unsigned long long)(x.pciDevice >> 48), (unsigned long long)((x.pciDevice >> 32) & 0xffff));
      break;
    case NodeType::Nvs: snprintf(buf, sizeof(buf), "NVSwitch"); break;
    case NodeType::Cpu: snprintf(buf, sizeof(buf), "CPU numa %d", x.numaId); break;
    case NodeType::Nic:
      if ((x.id & 0xffffffffffffLL) >= 0xfff00000LL) snprintf(buf, sizeof(buf), "NIC (no PCI device)");
      else snprintf(buf, sizeof(buf), "NIC %s", int64ToBusId(x.id & 0xffffffffffffLL).c_str());
      break;
    case NodeType::Net:
      snprintf(buf, sizeof(buf), "NET %d %s %.2f GB/s%s", (int)x.id, x.netName.c_str(), x.netBw,
               x.netGdr ? " gdr" : "");
      break;
  }
  return buf;
}

void printTree(const HostGraph& h, int n, int from, int depth, std::vector<char>* seen, std::string* out) {
  (*seen)[n] = 1;
  out->append(2 * depth, ' ');
  *out += nodeLabel(h, n);
  *out += '\n';
  for (const Link& l : h.nodes[n].links) {
    if (l.peer == from) continue;
    bool treeLink = (l.type == LinkType::Pci || l.type == LinkType::Net) && !(*seen)[l.peer] &&
                    h.nodes[l.peer].type != NodeType::Cpu;
    if (treeLink) {
      out->append(2 * depth + 2, ' ');
      *out += util::formatText("+ %s %.1f GB/s\n", linkTypeName(l.type), l.bw);
      printTree(h, l.peer, n, depth + 2, seen, out);
    } else if (l.type != LinkType::Pci && l.type != LinkType::Net) {
      out->append(2 * depth + 2, ' ');
      *out += util::formatText("~ %s %.1f GB/s -> %s\n", linkTypeName(l.type), l.bw, nodeLabel(h, l.peer).c_str());
    }
  }
}

}  // namespace

std::string describeTopology(const Topology& topo) {
  std::string out;
  for (size_t hi = 0; hi < topo.hosts.size(); hi++) {
    const HostGraph& h = topo.hosts[hi];
    out += util::formatText("Host %zu (hash %016llx): %zu GPUs with ranks, %zu network ports\n", hi,
            (unsigned long long)h.hostHash, h.gpus.size(), h.nets.size());
    std::vector<char> seen(h.nodes.size(), 0);
    for (int c : h.cpus) printTree(h, c, -1, 1, &seen, &out);
    if (h.nvs >= 0) {
      out += "  ";
      out += nodeLabel(h, h.nvs);
      out += '\n';
    }
  }
  return out;
}

std::string describePaths(const Topology& topo) {
  std::string out;
  if (!topo.pathsReady) return "paths not computed\n";
  for (size_t hi = 0; hi < topo.hosts.size(); hi++) {
    const HostGraph& h = topo.hosts[hi];
    out += util::formatText("Host %zu paths (type/hops/GB/s):\n", hi);
    out += "        ";
    for (int g : h.gpus) out += util::formatText(" %16s", ("rank " + std::to_string(h.nodes[g].rank)).c_str());
    for (int n : h.nets) out += util::formatText(" %16s", ("net " + std::to_string(h.nodes[n].id)).c_str());
    out += '\n';
    for (int g : h.gpus) {
      out += util::formatText("rank %-3d", h.nodes[g].rank);
      for (int o : h.gpus) {
        const Path& p = h.paths[g][o];
        out += util::formatText(" %5s/%d/%7.1f", pathTypeName(p.type), p.count(), p.bw);
      }
      for (int o : h.nets) {
        const Path& p = h.paths[g][o];
        out += util::formatText(" %5s/%d/%7.1f", pathTypeName(p.type), p.count(), p.bw);
      }
      out += '\n';
    }
  }
  return out;
}

std::string describeTransports(const Topology& topo, const TopoOptions& opts) {
  std::string out = "Transports (row sends to column):\n      ";
  int n = topo.nRanks();
  for (int b = 0; b < n; b++) out += util::formatText(" %4d", b);
  out += '\n';
  for (int a = 0; a < n; a++) {
    out += util::formatText("%5d ", a);
    for (int b = 0; b < n; b++) {
      if (topo.ranks[a].host < 0 || topo.ranks[b].host < 0) out += "    -";
      else out += util::formatText(" %4s", a == b ? "." : transportName(chooseTransport(topo, a, b, opts)));
    }
    out += '\n';
  }
  return out;
}

namespace {

void appendRing(const RingChannel& r, std::string* out) {
  for (size_t i = 0; i < r.order.size(); i++) *out += util::formatText("%s%d", i ? " " : "", r.order[i]);
}

void appendTree(const TreeChannel& t, std::string* out) {
  *out += util::formatText("root %d;", t.root);
  for (size_t r = 0; r < t.links.size(); r++) {
    const TreeLinks& l = t.links[r];
    *out += util::formatText(" %d->%zu->", l.up, r);
    bool any = false;
    for (int d : l.down) {
      if (d < 0) continue;
      *out += util::formatText("%s%d", any ? "/" : "", d);
      any = true;
    }
    if (!any) *out += "-1";
  }
}

void appendNets(const std::vector<int>& in, const std::vector<int>* outNets, std::string* out) {
  bool any = false;
  for (size_t h = 0; h < in.size(); h++) any |= in[h] >= 0;
  if (!any) return;
  *out += "  nets";
  for (size_t h = 0; h < in.size(); h++) {
    if (outNets) *out += util::formatText(" h%zu:%d>%d", h, in[h], (*outNets)[h]);
    else *out += util::formatText(" h%zu:%d", h, in[h]);
  }
}

}  // namespace

std::string describeSearch(const Topology& topo, const SearchResult& r) {
  std::string out;
  out += util::formatText("%s search: %d channels, %.1f/%.1f GB/s per channel (intra/inter), types %s/%s\n",
          patternName(r.pattern), r.nChannels, r.bwIntra, r.bwInter, pathTypeName(r.typeIntra),
          pathTypeName(r.typeInter));
  for (int c = 0; c < r.nChannels; c++) {
    out += util::formatText("  %2d: ", c);
    if (r.pattern == Pattern::Ring) {
      appendRing(r.rings[c], &out);
      appendNets(r.rings[c].netIn, &r.rings[c].netOut, &out);
    } else {
      appendTree(r.trees[c], &out);
      appendNets(r.trees[c].net, nullptr, &out);
    }
    out += '\n';
  }
  (void)topo;
  return out;
}

std::string describePlan(const Topology& topo, const ChannelPlan& plan) {
  std::string out;
  out += describeSearch(topo, plan.ringSearch);
  out += describeSearch(topo, plan.treeSearch);
  out += util::formatText("Channels: %d\n", plan.nChannels);
  for (int c = 0; c < plan.nChannels; c++) {
    out += util::formatText("  Ring %02d : ", c);
    appendRing(plan.rings[c], &out);
    out += '\n';
  }
  for (int c = 0; c < plan.nChannels; c++) {
    out += util::formatText("  Tree %02d : ", c);
    appendTree(plan.trees[c], &out);
    out += '\n';
  }
  return out;
}

std::string topologyDot(const Topology& topo) {
  std::string out = "digraph topology {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (size_t hi = 0; hi < topo.hosts.size(); hi++) {
    const HostGraph& h = topo.hosts[hi];
    out += util::formatText("  subgraph cluster_h%zu {\n    label=\"host %016llx\";\n", hi, (unsigned long long)h.hostHash);
    for (size_t n = 0; n < h.nodes.size(); n++) {
      const char* color = "black";
      switch (h.nodes[n].type) {
        case NodeType::Gpu: color = "forestgreen"; break;
        case NodeType::Nvs: color = "darkorange"; break;
        case NodeType::Cpu: color = "royalblue"; break;
        case NodeType::Nic:
        case NodeType::Net: color = "purple"; break;
        default: break;
      }
      out += util::formatText("    h%zun%zu [label=\"%s\", color=%s];\n", hi, n, nodeLabel(h, (int)n).c_str(), color);
    }
    // One undirected edge per pair; the label gives both directions when they differ.
    for (size_t n = 0; n < h.nodes.size(); n++) {
      for (const Link& l : h.nodes[n].links) {
        if ((size_t)l.peer < n) continue;
        double back = 0;
        for (const Link& r : h.nodes[l.peer].links) {
          if (r.peer == (int)n && r.type == l.type) back = r.bw;
        }
        const char* style = l.type == LinkType::Nvl ? "bold" : (l.type == LinkType::Sys ? "dashed" : "solid");
        if (back == l.bw || back == 0)
          out += util::formatText("    h%zun%zu -> h%zun%d [dir=both, style=%s, label=\"%s %.1f\"];\n", hi, n, hi, l.peer,
                  style, linkTypeName(l.type), l.bw);
        else
          out += util::formatText("    h%zun%zu -> h%zun%d [dir=both, style=%s, label=\"%s %.1f/%.1f\"];\n", hi, n, hi,
                  l.peer, style, linkTypeName(l.type), l.bw, back);
      }
    }
    out += "  }\n";
  }
  out += "}\n";
  return out;
}

}  // namespace weft::graph
