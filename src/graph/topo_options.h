// Settings that change paths, transports and channel search, as plain values. The algorithms take
// this struct; readTopoOptions() is the one place that reads NCCL_* variables for them.
#pragma once

#include <optional>
#include <string>

#include "graph/topo_types.h"

namespace weft::graph {

struct TopoOptions {
  // Farthest path type over which GPUs use P2P (NCCL_P2P_LEVEL; NCCL_P2P_DISABLE=1 makes it LOC).
  // Unset: NCCL's default, PXB, or SYS for at most two GPUs behind an x86 AMD CPU.
  std::optional<PathType> p2pLevel;
  bool shmDisable = false;       // NCCL_SHM_DISABLE=1
  bool netDisableIntra = false;  // NCCL_NET_DISABLE_INTRA=1: never use the network inside a host
  bool pxnDisable = false;       // NCCL_PXN_DISABLE=1: no GPU->NIC path through a peer GPU
  bool nvbDisable = false;       // NCCL_NVB_DISABLE=1: no GPU->GPU path through a third GPU
  bool pxnC2c = true;            // NCCL_PXN_C2C: a PXN relay may reach its NIC over C2C
  // Farthest GPU<->NIC path type for GPU Direct RDMA (NCCL_NET_GDR_LEVEL). Unset: PXB, or P2C when
  // netGdrC2c (NCCL_NET_GDR_C2C, default on).
  std::optional<PathType> netGdrLevel;
  bool netGdrC2c = true;
  // NCCL_CROSS_NIC: 0 a channel enters and leaves a host through the same NIC (rail-aligned);
  // 1 it may leave through another NIC; 2 (default) rail-aligned unless that finds nothing.
  int crossNic = 2;
  // Channel count bounds (NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS, ncclConfig_t minCTAs/maxCTAs).
  int minChannels = 0;
  int maxChannels = 64;
};

// NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL syntax: a path type name (LOC, NVL, NVB, C2C, PIX, PXB, P2C,
// PXN, PHB, SYS) or the old numbers 0..5 (LOC, PIX, PXB, PHB, SYS, SYS). False for other text.
bool parsePathLevel(const std::string& text, PathType* out);

// Reads the NCCL_* settings above through weft::param (environment, then config files).
TopoOptions readTopoOptions();

// Topology files: NCCL_TOPO_FILE (a description to start from, see DetectInputs::topoFile),
// NCCL_TOPO_DUMP_FILE (where to write the topology) and NCCL_TOPO_DUMP_FILE_RANK (which rank writes
// it, 0 by default).
struct TopoFileSettings {
  std::string topoFile;
  std::string dumpFile;
  int dumpRank = 0;
};
TopoFileSettings readTopoFileSettings();

}  // namespace weft::graph
