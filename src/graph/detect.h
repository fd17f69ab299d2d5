// Topology detection: builds the NCCL-schema description of this host from plain facts the caller
// gathers (which GPUs the ranks use, their compute capability, NVLinks from NVML, the network devices
// the network layer knows) and from sysfs (PCI switches, link speeds, NUMA domains). Nothing missing
// is fatal: what sysfs or NVML cannot tell is logged under GRAPH and estimated (no link files: PCIe
// Gen3 x16; no NUMA node: one CPU with numaid -1; no NVML: no NVLinks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/topology.h"

namespace weft::graph {

struct DetectGpu {
  std::string busId;  // "0000:06:00.0" (any case, any domain width)
  int rank = -1;      // communicator rank using it; -1 for a GPU present but not used
  int dev = -1;       // CUDA/NVML index on this host
  int sm = 0;         // compute capability major*10 + minor
  bool gdr = true;    // GPU Direct RDMA possible (the driver's peer-memory support)
};

// NVLinks of one GPU toward one remote device (from NVML).
struct DetectNvLink {
  std::string targetBusId;
  std::string targetClass;  // PCI class: "0x068000" NVSwitch, "0x068001" CPU, GPU classes start "0x03"
  int count = 0;
};

struct DetectGpuLinks {
  std::string busId;
  std::vector<DetectNvLink> nvlinks;
  int c2cBw = 0;    // per C2C link in MB/s (Grace), 0 if none
  int c2cCount = 0;
};

// A network port as the network plugin describes it (ncclNetProperties_t).
struct DetectNet {
  std::string name;
  std::string pciPath;  // sysfs path of the device; may end at a non-PCI device (virtio) or be empty
  int dev = 0;          // the plugin's device index
  int64_t speedMbps = 0;
  int port = 0;
  double latency = 0;
  uint64_t guid = 0;
  int maxConn = 65536;
  bool gdr = false;
  bool coll = false;
};

struct DetectInputs {
  std::string sysfsRoot = "/sys";
  std::string cpuInfoPath = "/proc/cpuinfo";
  std::string machine;  // uname machine ("x86_64"); empty: this machine's
  uint64_t hostHash = 0;
  std::vector<DetectGpu> gpus;
  std::vector<DetectGpuLinks> links;  // may be empty (no NVML)
  std::vector<DetectNet> nets;
  std::string topoFile;  // NCCL_TOPO_FILE: a description to start from; detection fills what it lacks
};

// The description only (the <system> element), e.g. for the per-rank record.
[[nodiscard]] Status detectSystemXml(const DetectInputs& in, XmlNode* system);

// Description and graphs.
[[nodiscard]] Status detectTopology(const DetectInputs& in, Topology* out);

// Fills in.links (and sm where 0) from NVML for the GPUs in in.gpus; without NVML it logs and leaves
// them empty. Lives in the detection layer: it calls runtime/nvml.
[[nodiscard]] Status collectNvmlFacts(DetectInputs* in);

// Every GPU NVML sees, with rank = NVML index (for tools that describe a whole machine).
[[nodiscard]] Status listNvmlGpus(std::vector<DetectGpu>* out);

// Network devices sysfs lists, as DetectNet entries numbered in order (for tools without a plugin).
std::vector<DetectNet> sysfsNetDevices(const std::string& sysfsRoot);

}  // namespace weft::graph
