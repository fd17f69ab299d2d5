#include "graph/topo_types.h"

#include <cstdio>
#include <cstring>

namespace weft::graph {

const char* nodeTypeName(NodeType t) {
  switch (t) {
    case NodeType::Gpu: return "GPU";
    case NodeType::Pci: return "PCI";
    case NodeType::Nvs: return "NVS";
    case NodeType::Cpu: return "CPU";
    case NodeType::Nic: return "NIC";
    case NodeType::Net: return "NET";
  }
  return "?";
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::Loc: return "LOC";
    case LinkType::Nvl: return "NVL";
    case LinkType::C2c: return "C2C";
    case LinkType::Pci: return "PCI";
    case LinkType::Sys: return "SYS";
    case LinkType::Net: return "NET";
  }
  return "?";
}

namespace {
const char* const kPathNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
}  // namespace

const char* pathTypeName(PathType t) {
  int i = (int)t;
  return i >= 0 && i <= (int)PathType::Dis ? kPathNames[i] : "?";
}

bool parsePathTypeName(const std::string& text, PathType* out) {
  for (int i = 0; i <= (int)PathType::Dis; i++) {
    if (text == kPathNames[i]) {
      *out = (PathType)i;
      return true;
    }
  }
  return false;
}

CpuArch parseCpuArch(const std::string& text) {
  if (text == "x86_64") return CpuArch::X86;
  if (text == "arm64" || text == "aarch64") return CpuArch::Arm;
  if (text == "ppc64" || text == "ppc64le") return CpuArch::Power;
  return CpuArch::Unknown;
}

CpuVendor parseCpuVendor(const std::string& text) {
  if (text == "GenuineIntel") return CpuVendor::Intel;
  if (text == "AuthenticAMD") return CpuVendor::Amd;
  if (text == "CentaurHauls" || text == "  Shanghai  ") return CpuVendor::Zhaoxin;
  return CpuVendor::Unknown;
}

CpuModel classifyCpuModel(CpuArch arch, CpuVendor vendor, int familyId, int modelId) {
  if (arch != CpuArch::X86) return CpuModel::Unknown;
  if (vendor == CpuVendor::Intel) {
    if (familyId != 6) return CpuModel::IntelBdw;
    // Granite Rapids and Sierra Forest carry model ids below Emerald Rapids' but are newer.
    if (modelId >= 0xCF || modelId == 0xAD || modelId == 0xAE || modelId == 0xAF) return CpuModel::IntelErp;
    if (modelId >= 0x8F) return CpuModel::IntelSrp;
    if (modelId >= 0x55) return CpuModel::IntelSkl;
    return CpuModel::IntelBdw;
  }
  if (vendor == CpuVendor::Amd) {
    // CPUID family: 0x17 Zen 1/2 (Naples, Rome), 0x19 Zen 3/4 (Milan, Genoa), 0x1A Zen 5 (Turin).
    if (familyId == 26) return CpuModel::AmdZen5;
    if (familyId == 25) return CpuModel::AmdZen34;
    return CpuModel::AmdZen12;
  }
  if (vendor == CpuVendor::Zhaoxin) {
    return familyId == 7 && modelId == 0x5B ? CpuModel::ZhaoxinYongfeng : CpuModel::Unknown;
  }
  return CpuModel::Unknown;
}

namespace bw {

double nvlinkPerLink(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 80) return 20.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;
}

double interCpu(CpuArch arch, CpuVendor vendor, CpuModel model) {
  if (arch == CpuArch::Power) return 32.0;
  if (arch == CpuArch::Arm) return 6.0;
  if (arch == CpuArch::X86 && vendor == CpuVendor::Intel) {
    switch (model) {
      case CpuModel::IntelErp: return 40.0;
      case CpuModel::IntelSrp: return 22.0;
      case CpuModel::IntelSkl: return 10.0;
      default: return 6.0;
    }
  }
  if (arch == CpuArch::X86 && vendor == CpuVendor::Amd) {
    if (model == CpuModel::AmdZen5) return 32.0;
    if (model == CpuModel::AmdZen34) return 24.0;
    return 16.0;
  }
  if (arch == CpuArch::X86 && vendor == CpuVendor::Zhaoxin) return model == CpuModel::ZhaoxinYongfeng ? 9.0 : 6.0;
  return kLoc;
}

double pci(const std::string& speedText, int width) {
  // Per-lane figure in units of 100 Mb/s of payload: Gen1 15, Gen2 30, Gen3 60, Gen4 120, ...
  double gts = 0;
  if (sscanf(speedText.c_str(), "%lf", &gts) != 1) gts = 0;
  int perLane = 60;  // unknown: Gen3
  if (gts > 0) {
    if (gts < 4) perLane = 15;
    else if (gts < 6) perLane = 30;
    else if (gts < 12) perLane = 60;
    else if (gts < 24) perLane = 120;
    else if (gts < 48) perLane = 240;
    else perLane = 480;
  }
  if (width <= 0) width = 16;
  return width * perLane / 80.0;
}

double net(int64_t speedMbps) {
  if (speedMbps <= 0) speedMbps = 10000;
  return speedMbps / 8000.0;
}

}  // namespace bw

int64_t busIdToInt64(const std::string& busId) {
  // Hex digits in order, ':' and '.' skipped, stop at anything else; at most 16 digits.
  uint64_t v = 0;
  int digits = 0;
  for (char c : busId) {
    if (c == ':' || c == '.') continue;
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else break;
    if (digits == 16) break;
    v = (v << 4) | (uint64_t)d;
    digits++;
  }
  return (int64_t)v;
}

std::string int64ToBusId(int64_t id) {
  char buf[40];
  uint64_t u = (uint64_t)id;
  snprintf(buf, sizeof(buf), "%04llx:%02llx:%02llx.%01llx", (unsigned long long)(u >> 20),
           (unsigned long long)((u >> 12) & 0xff), (unsigned long long)((u >> 4) & 0xff),
           (unsigned long long)(u & 0xf));
  return buf;
}

}  // namespace weft::graph
