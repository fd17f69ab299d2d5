#include "graph/topo_options.h"

#include <cstdlib>

#include "core/log.h"
#include "core/param.h"

namespace weft::graph {

bool parsePathLevel(const std::string& text, PathType* out) {
  PathType t;
  if (parsePathTypeName(text, &t) && t <= PathType::Sys) {
    *out = t;
    return true;
  }
  if (!text.empty() && text[0] >= '0' && text[0] <= '9') {
    // Before NVB, C2C, P2C and PXN existed the levels were numbered LOC, PIX, PXB, PHB, SYS.
    static const PathType kOld[] = {PathType::Loc, PathType::Pix, PathType::Pxb,
                                    PathType::Phb, PathType::Sys, PathType::Sys};
    long v = strtol(text.c_str(), nullptr, 0);
    if (v < 0) return false;
    *out = kOld[v > 5 ? 5 : v];
    return true;
  }
  return false;
}

namespace {

std::optional<PathType> levelParam(const char* name) {
  std::optional<std::string> v = param::lookup(name);
  if (!v || v->empty()) return std::nullopt;
  PathType t;
  if (!parsePathLevel(*v, &t)) {
    WEFT_WARN("%s=%s is not a path level (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or 0-5); ignored", name,
              v->c_str());
    return std::nullopt;
  }
  WEFT_INFO(log::kGraph, "%s set to %s", name, pathTypeName(t));
  return t;
}

}  // namespace

TopoOptions readTopoOptions() {
  TopoOptions o;
  if (param::getInt("NCCL_P2P_DISABLE", 0) == 1) o.p2pLevel = PathType::Loc;
  else o.p2pLevel = levelParam("NCCL_P2P_LEVEL");
  o.shmDisable = param::getInt("NCCL_SHM_DISABLE", 0) == 1;
  o.netDisableIntra = param::getInt("NCCL_NET_DISABLE_INTRA", 0) == 1;
  o.pxnDisable = param::getInt("NCCL_PXN_DISABLE", 0) == 1;
  o.nvbDisable = param::getInt("NCCL_NVB_DISABLE", 0) == 1;
  o.pxnC2c = param::getInt("NCCL_PXN_C2C", 1) != 0;
  o.netGdrLevel = levelParam("NCCL_NET_GDR_LEVEL");
  o.netGdrC2c = param::getInt("NCCL_NET_GDR_C2C", 1) != 0;
  o.crossNic = (int)param::getInt("NCCL_CROSS_NIC", 2);
  o.minChannels = (int)param::getInt("NCCL_MIN_NCHANNELS", 0);
  o.maxChannels = (int)param::getInt("NCCL_MAX_NCHANNELS", 64);
  return o;
}

TopoFileSettings readTopoFileSettings() {
  TopoFileSettings f;
  f.topoFile = param::getStr("NCCL_TOPO_FILE", "");
  f.dumpFile = param::getStr("NCCL_TOPO_DUMP_FILE", "");
  f.dumpRank = (int)param::getInt("NCCL_TOPO_DUMP_FILE_RANK", 0);
  return f;
}

}  // namespace weft::graph
