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

// Wire form of a row for the bootstrap all-gather: one byte per peer.
std::vector<uint8_t> encodeTransportRow(const TransportRow& row);
[[nodiscard]] Status decodeTransportRow(const uint8_t* data, size_t size, int nRanks, TransportRow* out);

// rows[r] is rank r's row. Each pair must agree (rows[a][b] == rows[b][a]); the first pair that does
// not is an error naming both ranks and both choices.
[[nodiscard]] Status verifyTransportAgreement(const std::vector<TransportRow>& rows);

}  // namespace weft::graph
