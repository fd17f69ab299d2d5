#include "graph/transport_choice.h"

#include <algorithm>

#include "core/log.h"
#include "graph/paths.h"

namespace weft::graph {

const char* transportName(TransportKind t) {
  switch (t) {
    case TransportKind::P2p: return "P2P";
    case TransportKind::Shm: return "SHM";
    case TransportKind::Net: return "NET";
  }
  return "?";
}

TransportKind chooseTransport(const Topology& topo, int rankA, int rankB, const TopoOptions& opts) {
  if (rankA == rankB) return TransportKind::P2p;
  const RankLocation& a = topo.ranks[rankA];
  const RankLocation& b = topo.ranks[rankB];
  if (a.host < 0 || b.host < 0 || a.host != b.host) return TransportKind::Net;
  const HostGraph& h = topo.hosts[a.host];
  bool netFaster = netFasterThanP2p(h, a.gpu, b.gpu, opts);
  if (!netFaster && p2pAllowed(h, a.gpu, b.gpu, opts)) return TransportKind::P2p;
  if (!netFaster && !opts.shmDisable) return TransportKind::Shm;
  return TransportKind::Net;
}

TransportRow transportRow(const Topology& topo, int myRank, const TopoOptions& opts) {
  TransportRow row(topo.nRanks(), TransportKind::Net);
  for (int p = 0; p < topo.nRanks(); p++) row[p] = chooseTransport(topo, myRank, p, opts);
  return row;
}

std::vector<uint8_t> encodeTransportRow(const TransportRow& row) {
  std::vector<uint8_t> out(row.size());
  for (size_t i = 0; i < row.size(); i++) out[i] = (uint8_t)row[i];
  return out;
}

Status decodeTransportRow(const uint8_t* data, size_t size, int nRanks, TransportRow* out) {
  if (nRanks < 0 || size != (size_t)nRanks) {
    WEFT_WARN("transport row of %zu bytes received, expected %d", size, nRanks);
    return ncclInternalError;
  }
  TransportRow row(size);
  for (size_t i = 0; i < size; i++) {
    if (data[i] > (uint8_t)TransportKind::Net) {
      WEFT_WARN("transport row: byte %zu holds %u, not a transport", i, (unsigned)data[i]);
      return ncclInternalError;
    }
    row[i] = (TransportKind)data[i];
  }
  *out = std::move(row);
  return ncclSuccess;
}

Status verifyTransportAgreement(const std::vector<TransportRow>& rows) {
  size_t n = rows.size();
  for (size_t a = 0; a < n; a++) {
    if (rows[a].size() != n) {
      WEFT_WARN("rank %zu reported transports for %zu ranks, expected %zu", a, rows[a].size(), n);
      return ncclInternalError;
    }
  }
  for (size_t a = 0; a < n; a++) {
    for (size_t b = a + 1; b < n; b++) {
      if (rows[a][b] != rows[b][a]) {
        WEFT_WARN("rank %zu would reach rank %zu through %s but rank %zu would reach rank %zu through %s; "
                  "set NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_SHM_DISABLE and NCCL_TOPO_FILE alike on every rank",
                  a, b, transportName(rows[a][b]), b, a, transportName(rows[b][a]));
        return ncclInvalidUsage;
      }
    }
  }
  return ncclSuccess;
}

}  // namespace weft::graph
