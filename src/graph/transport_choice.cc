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

HostGroups hostGroups(const Topology& topo) {
  const int n = topo.nRanks();
  HostGroups g;
  g.groupOf.assign(n, -1);
  g.indexOf.assign(n, -1);
  std::vector<int> groupOfHost(topo.hosts.size(), -1);
  for (int r = 0; r < n; r++) {
    const int host = topo.ranks[r].host;
    const bool known = host >= 0 && host < (int)groupOfHost.size();
    int& group = known ? groupOfHost[host] : g.groupOf[r];
    if (group < 0) {
      group = (int)g.ranks.size();
      g.ranks.emplace_back();
    }
    g.groupOf[r] = group;
    g.indexOf[r] = (int)g.ranks[group].size();
    g.ranks[group].push_back(r);
  }
  return g;
}

std::vector<uint8_t> encodeTransportRow(const HostGroups& groups, int rank, const TransportRow& row) {
  const std::vector<int>& mates = groups.ranks[groups.groupOf[rank]];
  std::vector<uint8_t> out(mates.size());
  for (size_t i = 0; i < mates.size(); i++) out[i] = (uint8_t)row[mates[i]];
  return out;
}

Status decodeTransportRow(const HostGroups& groups, int sender, const uint8_t* data, size_t size, LocalRow* out) {
  if (sender < 0 || sender >= (int)groups.groupOf.size()) {
    WEFT_WARN("transport row from rank %d, not a rank of this communicator", sender);
    return ncclInternalError;
  }
  const size_t expected = groups.ranks[groups.groupOf[sender]].size();
  if (size != expected) {
    WEFT_WARN("rank %d's transport row has %zu bytes, expected %zu (one per rank of its host)", sender, size,
              expected);
    return ncclInternalError;
  }
  LocalRow row(size);
  for (size_t i = 0; i < size; i++) {
    if (data[i] > (uint8_t)TransportKind::Net) {
      WEFT_WARN("rank %d's transport row: byte %zu holds %u, not a transport", sender, i, (unsigned)data[i]);
      return ncclInternalError;
    }
    row[i] = (TransportKind)data[i];
  }
  *out = std::move(row);
  return ncclSuccess;
}

Status verifyTransportAgreement(const HostGroups& groups, const std::vector<LocalRow>& rows) {
  const size_t n = groups.groupOf.size();
  if (rows.size() != n) {
    WEFT_WARN("%zu transport rows for %zu ranks", rows.size(), n);
    return ncclInternalError;
  }
  for (size_t a = 0; a < n; a++) {
    if (rows[a].size() != groups.ranks[groups.groupOf[a]].size()) {
      WEFT_WARN("rank %zu reported transports for %zu ranks of its host, expected %zu", a, rows[a].size(),
                groups.ranks[groups.groupOf[a]].size());
      return ncclInternalError;
    }
  }
  for (const std::vector<int>& mates : groups.ranks) {
    for (size_t i = 0; i < mates.size(); i++) {
      for (size_t j = i + 1; j < mates.size(); j++) {
        const int a = mates[i], b = mates[j];
        if (rows[a][j] != rows[b][i]) {
          WEFT_WARN("rank %d would reach rank %d through %s but rank %d would reach rank %d through %s; "
                    "set NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_SHM_DISABLE and NCCL_TOPO_FILE alike on every rank",
                    a, b, transportName(rows[a][j]), b, a, transportName(rows[b][i]));
          return ncclInvalidUsage;
        }
      }
    }
  }
  return ncclSuccess;
}

}  // namespace weft::graph
