// Which transport each pair of ranks uses, decided from the paths as NCCL decides it:
//   - ranks on different hosts: the network;
//   - on one host: P2P when their GPUs are within the P2P level (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE)
//     and a NIC is not faster; else shared host memory unless NCCL_SHM_DISABLE=1; else the network.
// Every rank computes its own row; the rows are exchanged and checked so that two ranks never set
// up different transports for one connection.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "graph/topo_options.h"
#include "graph/topology.h"

namespace weft::graph {

enum class TransportKind : uint8_t { P2p = 0, Shm = 1, Net = 2 };
using TransportOptions = TopoOptions;  // the P2P/SHM/NET settings live with the other topology settings
const char* transportName(TransportKind t);  // "P2P", "SHM", "NET"

// The transport between the GPUs of two ranks (symmetric; a rank to itself is P2P). Needs
// computePaths with the same options.
TransportKind chooseTransport(const Topology& topo, int rankA, int rankB, const TopoOptions& opts);

// One rank's view: the transport it chose toward each peer, indexed by peer rank.
using TransportRow = std::vector<TransportKind>;
TransportRow transportRow(const Topology& topo, int myRank, const TopoOptions& opts);

// The ranks of each host in rank order, and which host each rank is on (a rank whose host is
// unknown is a host of its own). Ranks on different hosts always reach each other through the
// network, so only a row's entries toward its own host's ranks say anything: those are what the
// ranks exchange and compare, N x ranks-per-host bytes in all where whole rows were N x N.
struct HostGroups {
  std::vector<std::vector<int>> ranks;  // ranks[g]: the ranks of host group g, ascending
  std::vector<int> groupOf;             // groupOf[r]: r's group
  std::vector<int> indexOf;             // indexOf[r]: r's place in ranks[groupOf[r]]
};
HostGroups hostGroups(const Topology& topo);

// A rank's transports toward the ranks of its own host group, in the group's order.
using LocalRow = std::vector<TransportKind>;

// Wire form of rank's row for the bootstrap all-gather: one byte per rank of its host group.
std::vector<uint8_t> encodeTransportRow(const HostGroups& groups, int rank, const TransportRow& row);
// A sender's wire row: one byte per rank of the sender's group, each a transport.
[[nodiscard]] Status decodeTransportRow(const HostGroups& groups, int sender, const uint8_t* data, size_t size,
                                        LocalRow* out);

// rows[r] is rank r's local row. Each pair of a host must agree (a's entry for b equals b's for a);
// the first pair that does not is an error naming both ranks and both choices.
[[nodiscard]] Status verifyTransportAgreement(const HostGroups& groups, const std::vector<LocalRow>& rows);

}  // namespace weft::graph
