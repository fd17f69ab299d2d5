#include "graph/topo_xml.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/log.h"

namespace weft::graph {

Status parseTopologyXml(const std::string& text, Topology* out) {
  XmlNode root;
  WEFT_TRY(parseXml(text, &root));
  return buildTopology(std::move(root), out);
}

Status loadTopologyXml(const std::string& path, Topology* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    WEFT_WARN("cannot read topology file %s: %s; check NCCL_TOPO_FILE", path.c_str(), strerror(errno));
    return ncclSystemError;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  Status s = parseTopologyXml(ss.str(), out);
  if (isError(s)) WEFT_WARN("topology file %s could not be used", path.c_str());
  return s;
}

std::string dumpTopologyXml(const Topology& topo) { return writeXml(topo.system); }

Status writeTopologyXmlFile(const Topology& topo, const std::string& path) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    WEFT_WARN("cannot write topology dump %s: %s; check NCCL_TOPO_DUMP_FILE", path.c_str(), strerror(errno));
    return ncclSystemError;
  }
  std::string text = dumpTopologyXml(topo);
  size_t n = fwrite(text.data(), 1, text.size(), f);
  int closeRc = fclose(f);
  if (n != text.size() || closeRc != 0) {
    WEFT_WARN("writing topology dump %s failed: %s", path.c_str(), strerror(errno));
    return ncclSystemError;
  }
  WEFT_INFO(log::kGraph, "topology written to %s", path.c_str());
  return ncclSuccess;
}

namespace {

// What makes two elements "the same thing" when fusing descriptions.
std::string identity(const XmlNode& x) {
  if (x.name == "cpu") return x.attrOr("host_hash", "0") + "/" + x.attrOr("numaid", "-1");
  if (x.name == "pci") return canonicalBusId(x.attrOr("busid", ""));
  if (x.name == "net") return x.attrOr("name", "") + "/" + x.attrOr("dev", "");
  if (x.name == "nvlink") return canonicalBusId(x.attrOr("target", "")) + "/" + x.attrOr("tclass", "");
  if (x.name == "nic") {
    // A <nic> is known by its first port.
    const XmlNode* net = x.child("net");
    return net ? net->attrOr("name", "") : std::string();
  }
  return std::string();  // gpu, c2c, ...: one per parent
}

}  // namespace

void fuseSystemXml(XmlNode* into, const XmlNode& from) {
  for (const auto& kv : from.attrs) into->initAttr(kv.first, kv.second);
  for (const XmlNode& c : from.children) {
    std::string id = identity(c);
    XmlNode* match = nullptr;
    for (XmlNode& mine : into->children) {
      if (mine.name == c.name && identity(mine) == id) {
        match = &mine;
        break;
      }
    }
    if (match) fuseSystemXml(match, c);
    else into->children.push_back(c);
  }
}

namespace {

void maxRank(const XmlNode& x, long long* m) {
  if (x.name == "gpu" && x.hasAttr("rank")) *m = std::max(*m, x.intAttr("rank", -1));
  for (const XmlNode& c : x.children) maxRank(c, m);
}

void shiftRanks(XmlNode* x, long long by) {
  if (x->name == "gpu" && x->hasAttr("rank")) x->setAttr("rank", std::to_string(x->intAttr("rank", 0) + by));
  for (XmlNode& c : x->children) shiftRanks(&c, by);
}

}  // namespace

XmlNode replicateHosts(const XmlNode& system, int nHosts) {
  long long ranksPerHost = -1;
  maxRank(system, &ranksPerHost);
  ranksPerHost += 1;
  XmlNode out(system.name);
  out.attrs = system.attrs;
  for (int i = 0; i < nHosts; i++) {
    for (const XmlNode& c : system.children) {
      XmlNode copy = c;
      if (copy.name == "cpu") {
        unsigned long long hash = strtoull(copy.attrOr("host_hash", "0").c_str(), nullptr, 16) + (unsigned long long)i;
        char buf[32];
        snprintf(buf, sizeof(buf), "0x%llx", hash);
        copy.setAttr("host_hash", buf);
      }
      shiftRanks(&copy, i * ranksPerHost);
      out.children.push_back(std::move(copy));
    }
  }
  return out;
}

}  // namespace weft::graph
