// Vocabulary of the topology model: node, link and path types with NCCL's numbering and names,
// the bandwidth figures (GB/s) NCCL assigns to each kind of link, and PCI bus id helpers.
// Keeping NCCL's numbers matters: users set NCCL_P2P_LEVEL=PXB or =2 and read "NVL"/"PHB" in logs.
#pragma once

#include <cstdint>
#include <string>

namespace weft::graph {

// Node kinds. CPU stands for one NUMA domain; NVS for the whole NVSwitch fabric of a host (a GPU's
// traffic spreads over all switches, so modelling them one by one would only add bookkeeping).
enum class NodeType : uint8_t { Gpu = 0, Pci = 1, Nvs = 2, Cpu = 3, Nic = 4, Net = 5 };

// Link types share their numbers with the path types below so that a one-hop path has the type
// of its link.
enum class LinkType : uint8_t { Loc = 0, Nvl = 1, C2c = 3, Pci = 4, Sys = 9, Net = 10 };

// Path types, from closest to farthest. A path's type is the worst step on it.
enum class PathType : uint8_t {
  Loc = 0,  // same device
  Nvl = 1,  // NVLink, directly or through NVSwitch
  Nvb = 2,  // NVLink through one intermediate GPU
  C2c = 3,  // chip-to-chip link between a GPU and its CPU (Grace)
  Pix = 4,  // at most one PCIe switch
  Pxb = 5,  // several PCIe switches, no host bridge
  P2c = 6,  // GPU to NIC through C2C, then PCIe
  Pxn = 7,  // GPU to NIC through another GPU reached over NVLink
  Phb = 8,  // through a PCIe host bridge (the CPU)
  Sys = 9,  // across the inter-socket link (QPI/UPI/xGMI)
  Net = 10, // across the network
  Dis = 11, // no path
};

const char* nodeTypeName(NodeType t);   // "GPU", "PCI", "NVS", "CPU", "NIC", "NET"
const char* linkTypeName(LinkType t);   // "LOC", "NVL", "C2C", "PCI", "SYS", "NET"
const char* pathTypeName(PathType t);   // "LOC" ... "DIS"
// Parses a path type name ("PXB"); returns false for text that is not one.
bool parsePathTypeName(const std::string& text, PathType* out);

inline bool operator<(PathType a, PathType b) { return (int)a < (int)b; }
inline bool operator<=(PathType a, PathType b) { return (int)a <= (int)b; }
inline bool operator>(PathType a, PathType b) { return (int)a > (int)b; }
inline bool operator>=(PathType a, PathType b) { return (int)a >= (int)b; }
inline PathType maxPath(PathType a, PathType b) { return a < b ? b : a; }
inline PathType minPath(PathType a, PathType b) { return a < b ? a : b; }

// CPU facts that change bandwidths and defaults.
enum class CpuArch : uint8_t { Unknown = 0, X86, Arm, Power };
enum class CpuVendor : uint8_t { Unknown = 0, Intel, Amd, Zhaoxin };
enum class CpuModel : uint8_t {
  Unknown = 0,
  IntelBdw, IntelSkl, IntelSrp, IntelErp,  // Broadwell, Skylake, Sapphire Rapids, Emerald Rapids+
  AmdZen12, AmdZen34, AmdZen5,
  ZhaoxinYongfeng,
};
CpuArch parseCpuArch(const std::string& text);         // "x86_64", "arm64", "ppc64"
CpuVendor parseCpuVendor(const std::string& text);     // "GenuineIntel", "AuthenticAMD", ...
CpuModel classifyCpuModel(CpuArch arch, CpuVendor vendor, int familyId, int modelId);

// Bandwidths in GB/s. These are NCCL's deliberately conservative figures (what one can expect to
// move, not the signalling rate); the search and the tuning model are calibrated against them.
namespace bw {
constexpr double kLoc = 5000.0;          // inside one device
constexpr double kNet100G = 12.0;        // a 100 Gb/s NIC
constexpr double kIntelP2pOverhead = 1.2;  // Intel root complexes split P2P into 64 B TLPs
// Per NVLink, by compute capability (sm = major*10 + minor).
double nvlinkPerLink(int sm);
// Between two NUMA domains of one host.
double interCpu(CpuArch arch, CpuVendor vendor, CpuModel model);
// A PCIe link: speed text as sysfs writes it ("32.0 GT/s PCIe"), width in lanes. Unknown speed
// counts as Gen3 and width 0 as x16, as NCCL does, so that a VM without link files still works.
double pci(const std::string& speedText, int width);
// A NIC port: speed in Mb/s as the network plugin reports it; <= 0 means unknown (10 Gb/s).
double net(int64_t speedMbps);
}  // namespace bw

// Bandwidths are accounted in integer thousandths of GB/s (MB/s) so that subtracting channels from
// links is exact and the search is deterministic across compilers.
using MilliGBps = int64_t;
inline MilliGBps toMilli(double gbps) { return (MilliGBps)(gbps * 1000.0 + (gbps >= 0 ? 0.5 : -0.5)); }
inline double fromMilli(MilliGBps m) { return (double)m / 1000.0; }

// PCI bus ids. NCCL canonicalises every id through a 64-bit integer made of its hex digits, so
// "00000000:07:00.0" and "0000:07:00.0" are the same device; we do the same.
int64_t busIdToInt64(const std::string& busId);
std::string int64ToBusId(int64_t id);
inline std::string canonicalBusId(const std::string& busId) { return int64ToBusId(busIdToInt64(busId)); }

}  // namespace weft::graph
