// Human-readable views of a topology and of the channels found on it: for GRAPH logging and for
// tools/weft-topo. Pure text formatting.
#pragma once

#include <string>

#include "graph/channels.h"
#include "graph/topo_options.h"
#include "graph/topology.h"

namespace weft::graph {

// Each host as a tree: NUMA domains, PCI switches, GPUs (with rank), NICs and ports, and the
// non-PCI links (NVLink, NVSwitch, C2C, inter-CPU) with their bandwidths.
std::string describeTopology(const Topology& topo);

// For every host: GPU-to-GPU and GPU-to-NIC path type, hop count and bandwidth. Needs computePaths.
std::string describePaths(const Topology& topo);

// The transport chosen for every pair of ranks, as a matrix.
std::string describeTransports(const Topology& topo, const TopoOptions& opts);

// One search's result: bandwidth, path types, per channel the ring order or tree links.
std::string describeSearch(const Topology& topo, const SearchResult& result);

// The channel plan: count, and per channel the ring and the tree (parent -> rank -> children).
std::string describePlan(const Topology& topo, const ChannelPlan& plan);

// Graphviz (dot) text: one cluster per host, nodes per device, edges per link labelled with type
// and bandwidth.
std::string topologyDot(const Topology& topo);

}  // namespace weft::graph
