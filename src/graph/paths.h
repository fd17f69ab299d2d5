// Paths between every pair of devices of a host, with their type (NVL, PIX, PXB, PHB, SYS, ...) and
// bandwidth, and the setting-dependent rules NCCL applies on top of the raw links:
//   - GPUs farther apart than the P2P level talk through the CPU next to the receiving GPU;
//   - without GPU Direct RDMA, GPU<->NIC traffic goes through the CPU next to the GPU;
//   - with PXN, a GPU reaches a NIC through the GPU next to that NIC when the NVLink detour is
//     faster or avoids the CPU.
#pragma once

#include "graph/topo_options.h"
#include "graph/topology.h"

namespace weft::graph {

// Fills HostGraph::paths and ::gpuDirect of every host and sets topo->pathsReady.
void computePaths(Topology* topo, const TopoOptions& opts);

// The farthest path type over which two GPUs of this host use P2P under `opts`.
PathType p2pLevel(const HostGraph& host, const TopoOptions& opts);

// Whether GPUs gpuA and gpuB (indices into host.gpus) may use P2P: their direct path is within the
// P2P level. Needs computePaths.
bool p2pAllowed(const HostGraph& host, int gpuA, int gpuB, const TopoOptions& opts);

// NCCL's rule for using a NIC between two GPUs of one host: both reach a NIC through PCIe switches
// only (PXB or closer), faster than they reach each other. Off with NCCL_NET_DISABLE_INTRA=1.
bool netFasterThanP2p(const HostGraph& host, int gpuA, int gpuB, const TopoOptions& opts);

// Whether GPU Direct RDMA works between a GPU node and a NET node: both support it and the GPU (or,
// for a PXN path, its relay GPU) is within the GDR level of the NIC. `read`: the GPU sends (NICs
// read GPU memory), which pre-Ampere GPUs only do when they also have NVLink peers.
bool gdrAllowed(const HostGraph& host, int gpuNode, int netNode, bool read, const TopoOptions& opts);

// The GPUs (indices into host.gpus) closest to a NET node: the best path type, then the widest.
std::vector<int> localGpusOfNet(const HostGraph& host, int netNode);

}  // namespace weft::graph
