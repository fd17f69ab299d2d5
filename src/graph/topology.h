// The topology of the machines a communicator spans, as a value: the description in NCCL's XML
// schema (what NCCL_TOPO_FILE holds and NCCL_TOPO_DUMP_FILE writes) and, derived from it, one graph
// per host of GPUs, PCI switches, NVSwitch fabric, NUMA domains, NICs and network ports joined by
// directed links with bandwidths. Paths (paths.h), transports (transport_choice.h) and channel search
// (search.h, channels.h) are pure functions of this value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/topo_types.h"
#include "graph/xml.h"

namespace weft::graph {

// A directed link; its reverse is a separate Link on the peer.
struct Link {
  LinkType type = LinkType::Loc;
  double bw = 0;  // GB/s in this direction
  int peer = -1;  // node index in the same HostGraph
};

struct Node {
  NodeType type = NodeType::Pci;
  // GPU, PCI: the bus id as an integer (busIdToInt64); NIC: NUMA id << 48 | bus id (or an index for
  // a NIC without a PCI device); CPU: the NUMA id; NET: the network plugin's device index; NVS: 0.
  int64_t id = 0;
  std::vector<Link> links;

  // GPU
  int rank = -1;  // communicator rank using this GPU
  int dev = -1;   // NVML/CUDA index on its host
  int sm = 0;     // compute capability, major*10 + minor
  bool gdr = false;

  // CPU
  int numaId = -1;
  CpuArch arch = CpuArch::Unknown;
  CpuVendor vendor = CpuVendor::Unknown;
  CpuModel model = CpuModel::Unknown;

  // PCI switch: vendor << 48 | device << 32 | subsystem vendor << 16 | subsystem device.
  uint64_t pciDevice = 0;

  // NET (one port of a NIC, as the network plugin lists it)
  std::string netName;
  double netBw = 0;  // GB/s
  int port = 0;
  uint64_t guid = 0;
  bool netGdr = false;
  bool coll = false;
  int maxConn = 64;
  double latency = 0;

  std::string busId() const { return int64ToBusId(id); }
};

// The link `link` of node `node` (a hop of a path).
struct PathHop {
  int node = -1;
  int link = -1;
};

struct Path {
  PathType type = PathType::Dis;
  double bw = 0;  // the narrowest link on the path, GB/s
  std::vector<PathHop> hops;
  int count() const { return (int)hops.size(); }
  bool connected() const { return type != PathType::Dis; }
};

struct HostGraph {
  uint64_t hostHash = 0;
  std::vector<Node> nodes;
  std::vector<int> gpus;  // node indices of the GPUs that have a rank, in description order
  std::vector<int> nets;  // node indices of the network ports, in description order
  std::vector<int> cpus;  // node indices of the NUMA domains
  int nvs = -1;           // node index of the NVSwitch fabric, -1 without one

  // Set by computePaths: paths[a][b] from node a to node b; gpuDirect[i][j] is the type of the path
  // from gpus[i] to gpus[j] as the links give it, before a P2P-level rule diverted it through a CPU;
  // the P2P and "NIC is faster" decisions are taken on these raw figures, as NCCL takes them.
  std::vector<std::vector<Path>> paths;
  std::vector<std::vector<PathType>> gpuDirect;
  std::vector<std::vector<double>> gpuDirectBw;  // bandwidth of those direct paths
  std::vector<double> gpuNearNetBw;  // per GPU: widest raw path to a NIC within PXB (0 if none)

  int findNode(NodeType type, int64_t id) const;
  // Index into `gpus` of the GPU with this node index, or -1.
  int gpuIndexOfNode(int node) const;
  const Path& path(int from, int to) const { return paths[from][to]; }
  const Path& gpuPath(int gpuA, int gpuB) const { return paths[gpus[gpuA]][gpus[gpuB]]; }
  // The NUMA domain closest (fewest hops) to a node; needs paths. -1 if none.
  int localCpu(int node) const;
  // Smallest compute capability among ranked GPUs (0 without GPUs).
  int minSm() const;
};

// Where a rank's GPU is: host index and index into that host's `gpus`.
struct RankLocation {
  int host = -1;
  int gpu = -1;
};

struct Topology {
  XmlNode system{"system"};          // the description, root element <system>
  std::vector<HostGraph> hosts;      // one graph per host_hash, in description order
  std::vector<RankLocation> ranks;   // indexed by rank; host -1 for ranks not present
  bool pathsReady = false;

  int nRanks() const { return (int)ranks.size(); }
  const HostGraph& hostOfRank(int rank) const { return hosts[ranks[rank].host]; }
  const Node& gpuOfRank(int rank) const {
    const HostGraph& h = hostOfRank(rank);
    return h.nodes[h.gpus[ranks[rank].gpu]];
  }
  // Smallest compute capability over all hosts.
  int minSm() const;
  // Host indices ordered by their lowest rank: the order in which rings and trees visit hosts.
  std::vector<int> hostOrder() const;
};

// Builds the graphs from a <system> description (consumes it). A description the graphs cannot be
// built from (no <system> root, a <pci> without busid, one rank on two GPUs) is an error that names
// the offending element.
[[nodiscard]] Status buildTopology(XmlNode system, Topology* out);

}  // namespace weft::graph
