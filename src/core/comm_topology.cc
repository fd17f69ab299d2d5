#include "core/comm_topology.h"

#include <strings.h>

#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "core/communicator.h"
#include "core/param.h"
#include "core/peer_info.h"
#include "graph/channels.h"
#include "core/cpu_affinity.h"
#include "graph/detect.h"
#include "graph/paths.h"
#include "graph/rank_record.h"
#include "graph/topo_options.h"
#include "graph/topo_xml.h"
#include "graph/transport_choice.h"
#include "graph/tuning_input.h"
#include "graph/xml.h"
#include "runtime/gpu.h"
#include "transport/net/net_plugin.h"

namespace weft::core {
namespace {

// The SHM transport (transport/shm): 1 (default) uses it where the topology asks for it (GPU pairs
// without peer access, NCCL_P2P_DISABLE=1); 2 also for every other peer (tests: it lets ranks that
// share one GPU exercise it); 0 makes such pairs an error (NCCL_SHM_DISABLE=1 is NCCL's way to say
// the same). Run on one H100 in session 33: every collective checked in processes and threads.
const param::IntParam kShmTransport{"NCCL_WEFT_SHM", 1};

// Channels a communicator with any hop through host memory builds at least when the user sets no
// floor (weft's NVLink floor, NCCL_WEFT_MIN_NCHANNELS, is 32). Each channel costs every rank a share
// of a pinned host segment (32 channels, 2 ranks: 294 MiB a rank), and host memory saturates with
// fewer: one H100, 2 ranks, NCCL_WEFT_SHM=2, 64 MiB (session 34): all_reduce 3730/3819/3988/4310 us
// and all_gather 2096/2120/2278/2602 us on 32/8/4/2 channels. 16 leaves room for two GPUs' links.
const param::IntParam kShmMinChannels{"NCCL_WEFT_SHM_MIN_NCHANNELS", 16};

// Ranks of other hosts go through the network (the only transport that reaches them), and the
// whole communicator is tuned for it: every rank sees the same host hashes, so all agree.
void netForOtherHosts(ncclComm* comm) {
  comm->netPeers.assign(comm->nRanks, false);
  const uint64_t mine = comm->peers[comm->rank].hostHash;
  for (int p = 0; p < comm->nRanks; ++p) comm->netPeers[p] = comm->peers[p].hostHash != mine;
  comm->anyNet = !allOnOneHost(comm->peers);
}

// The network device for the topology: the network plugin's device this rank uses (its PCI place,
// speed and latency as the plugin gives them), or the socket transport's, the interface the
// bootstrap listens on (its PCI place and speed from sysfs where it has them; unknown speed:
// 10 Gb/s, as NCCL's socket transport assumes). Only for communicators spanning hosts: a NIC in a
// one-host topology could change the transport NCCL would pick between two GPUs.
graph::DetectNet netDeviceForTopology(const ncclComm* comm) {
  graph::DetectNet net;
  if (const transport::NetPlugin* plugin = comm->netPlugin) {
    transport::NetPluginDevice d;
    net.dev = plugin->deviceFor(comm->cudaDev);
    if (plugin->device(net.dev, &d) == ncclSuccess) {
      net.name = d.name.empty() ? plugin->name() : d.name;
      net.pciPath = d.pciPath;
      net.speedMbps = d.speedMbps > 0 ? d.speedMbps : 10000;
      net.latency = d.latencyUs;
      net.maxConn = d.maxComms > 0 ? d.maxComms : net.maxConn;
      net.gdr = false;  // host memory only (no NCCL_PTR_CUDA use yet)
      return net;
    }
  }
  net.name = "socket";
  net.speedMbps = 10000;
  const bootstrap::SocketAddress& mine = comm->bootstrap->listenAddress();
  for (const bootstrap::Interface& itf : bootstrap::listInterfaces()) {
    if (itf.address.hostString() == mine.hostString()) net.name = itf.name;
  }
  for (const graph::DetectNet& n : graph::sysfsNetDevices("/sys")) {
    if (n.name == net.name) {
      net.pciPath = n.pciPath;
      net.speedMbps = n.speedMbps;
    }
  }
  net.dev = 0;
  net.gdr = false;
  return net;
}

// With NCCL_WEFT_SHM=2 every peer is reached through host shared memory, but those on other hosts
// (the network's: call it after netPeers is set).
void shmForEveryPeer(ncclComm* comm) {
  if (kShmTransport.get() != 2) return;
  comm->shmPeers.assign(comm->nRanks, false);
  for (int p = 0; p < comm->nRanks; ++p)
    comm->shmPeers[p] = p != comm->rank && !(p < (int)comm->netPeers.size() && comm->netPeers[p]);
  comm->tuning.intraLink = graph::kLinkShm;  // priced as host memory; no LL128 there
  comm->tuning.oneGpu = false;                // (ranks sharing a GPU would otherwise get it)
  WEFT_INFO(log::kInit | log::kShm, "rank %d: NCCL_WEFT_SHM=2: every peer through host shared memory", comm->rank);
}

// All-gathers byte strings of different lengths: lengths first, then padded to the longest.
Status allGatherVar(ncclComm* comm, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all) {
  std::vector<uint64_t> sizes(comm->nRanks, 0);
  sizes[comm->rank] = mine.size();
  WEFT_TRY(comm->bootstrap->allGather(sizes.data(), sizeof(uint64_t)));
  uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
  WEFT_CHECK_ARG(longest <= (64u << 20), "rank %d: a peer's topology record is %llu bytes; refusing more than 64 MiB",
                 comm->rank, (unsigned long long)longest);
  std::vector<uint8_t> buffer(longest * comm->nRanks, 0);
  memcpy(buffer.data() + longest * comm->rank, mine.data(), mine.size());
  WEFT_TRY(comm->bootstrap->allGather(buffer.data(), longest));
  all->assign(comm->nRanks, {});
  for (int r = 0; r < comm->nRanks; ++r) {
    const uint8_t* p = buffer.data() + longest * r;
    (*all)[r].assign(p, p + sizes[r]);
  }
  return ncclSuccess;
}

Status describeOwnHost(ncclComm* comm, const graph::TopoFileSettings& files, graph::RankRecord* rec) {
  runtime::DeviceProps props;
  WEFT_TRY(runtime::deviceProps(comm->cudaDev, &props));
  graph::DetectInputs in;
  in.hostHash = comm->peers[comm->rank].hostHash;
  in.topoFile = files.topoFile;
  graph::DetectGpu gpu;
  gpu.busId = comm->busId;
  gpu.rank = comm->rank;
  gpu.dev = comm->cudaDev;
  gpu.sm = props.ccMajor * 10 + props.ccMinor;
  in.gpus.push_back(gpu);
  WEFT_TRY(graph::collectNvmlFacts(&in));
  if (!allOnOneHost(comm->peers)) in.nets.push_back(netDeviceForTopology(comm));
  graph::XmlNode system;
  WEFT_TRY(graph::detectSystemXml(in, &system));
  comm->gpuCpuMap = gpuCpuMap(system, comm->busId);
  rec->rank = comm->rank;
  rec->nRanks = comm->nRanks;
  rec->hostHash = in.hostHash;
  rec->busId = comm->busId;
  rec->systemXml = graph::writeXml(system);
  return ncclSuccess;
}

// The tree of every channel as the connection plan and the device state take it.
std::vector<transport::TreePeers> treePeersOf(const graph::TreeChannel& tree, int nRanks) {
  std::vector<transport::TreePeers> out(nRanks);
  for (int r = 0; r < nRanks && r < (int)tree.links.size(); ++r) {
    out[r].up = tree.links[r].up;
    for (int j = 0; j < 3; ++j) out[r].down[j] = tree.links[r].down[j];
  }
  return out;
}

// A chain in rank order (rank 0 the root), for communicators without a searched topology.
std::vector<transport::TreePeers> rankOrderChain(int nRanks) {
  std::vector<transport::TreePeers> out(nRanks);
  for (int r = 0; r < nRanks; ++r) {
    out[r].up = r - 1;
    out[r].down[0] = r + 1 < nRanks ? r + 1 : -1;
  }
  return out;
}

void rankOrderRings(ncclComm* comm, int minChannels, int userMin) {
  const bool anyShm = kShmTransport.get() == 2;
  const int nChannels = std::max(1, channelFloor(minChannels, userMin, anyShm, (int)kShmMinChannels.get()));
  std::vector<int> order(comm->nRanks);
  for (int r = 0; r < comm->nRanks; ++r) order[r] = r;
  comm->nChannels = nChannels;
  comm->rings.assign(nChannels, order);
  comm->trees.assign(nChannels, rankOrderChain(comm->nRanks));
  comm->tuning = graph::fallbackTuningInput(comm->nRanks, nChannels);
  // Ranks sharing one GPU (tests only) end here: the topology merge refuses them.
  comm->tuning.oneGpu = comm->nRanks > 1 && allOnOneGpu(comm->peers);
  netForOtherHosts(comm);
  if (comm->anyNet) {
    std::vector<uint64_t> hosts;
    for (const PeerInfo& p : comm->peers)
      if (std::find(hosts.begin(), hosts.end(), p.hostHash) == hosts.end()) hosts.push_back(p.hostHash);
    comm->tuning.nNodes = (int)hosts.size();
  }
  shmForEveryPeer(comm);
}

}  // namespace

bool chooseNetwork(ncclComm* comm, std::string* why) {
  transport::NetChoice choice;
  if (!transport::netChoice(comm->config.netName, &choice, why)) return false;
  comm->netPlugin = choice.plugin;
  return true;
}

int channelFloor(int minChannels, int userMin, bool anyShm, int shmMinChannels) {
  if (!anyShm || minChannels <= userMin) return minChannels;
  return std::max(userMin, std::min(minChannels, std::max(1, shmMinChannels)));
}

Status buildCommTopology(ncclComm* comm, int minChannels, int maxChannels, int userMinChannels) {
  graph::TopoFileSettings files = graph::readTopoFileSettings();
  graph::RankRecord mine;
  Status described = describeOwnHost(comm, files, &mine);
  if (isError(described)) {
    // Every rank must still take part in the exchanges below; an empty record says "unknown".
    WEFT_WARN("rank %d: could not describe this host's topology; falling back to rank-order rings", comm->rank);
    mine = graph::RankRecord{};
  }
  if (anyGpuShared(comm->peers)) {
    // No topology holds two ranks on one GPU (tests only). Every rank sees it in the peer table, so
    // all leave out the exchanges below alike.
    WEFT_INFO(log::kInit | log::kGraph, "rank %d: ranks share GPUs (NCCL_WEFT_ALLOW_GPU_SHARING, tests only); using "
              "%d rank-order ring channels", comm->rank, minChannels);
    rankOrderRings(comm, minChannels, userMinChannels);
    return ncclSuccess;
  }
  std::vector<std::vector<uint8_t>> records;
  WEFT_TRY(allGatherVar(comm, described == ncclSuccess ? graph::encodeRankRecord(mine) : std::vector<uint8_t>(),
                        &records));
  std::vector<graph::RankRecord> decoded(comm->nRanks);
  bool complete = true;
  for (int r = 0; r < comm->nRanks; ++r) {
    if (records[r].empty() || isError(graph::decodeRankRecord(records[r].data(), records[r].size(), &decoded[r]))) {
      complete = false;
    }
  }
  graph::Topology topo;
  if (!complete || isError(graph::mergeRankRecords(decoded, &topo))) {
    WEFT_WARN("rank %d: the ranks' topology records could not be merged; using %d rank-order ring channels",
              comm->rank, minChannels);
    rankOrderRings(comm, minChannels, userMinChannels);
    return ncclSuccess;
  }
  graph::TopoOptions opts = graph::readTopoOptions();
  opts.minChannels = minChannels;
  opts.maxChannels = maxChannels;
  graph::computePaths(&topo, opts);

  // Every pair's transport, computed by both ends and compared.
  graph::TransportRow row = graph::transportRow(topo, comm->rank, opts);
  // Only the entries toward the rank's own host travel: the others are the network by definition.
  const graph::HostGroups groups = graph::hostGroups(topo);
  std::vector<std::vector<uint8_t>> rowBytes;
  WEFT_TRY(allGatherVar(comm, graph::encodeTransportRow(groups, comm->rank, row), &rowBytes));
  std::vector<graph::LocalRow> rows(comm->nRanks);
  for (int r = 0; r < comm->nRanks; ++r) {
    WEFT_TRY(graph::decodeTransportRow(groups, r, rowBytes[r].data(), rowBytes[r].size(), &rows[r]));
  }
  WEFT_TRY(graph::verifyTransportAgreement(groups, rows));
  bool anyShm = kShmTransport.get() == 2, anyNet = groups.ranks.size() > 1;
  for (const auto& r : rows) {
    anyShm = anyShm || std::find(r.begin(), r.end(), graph::TransportKind::Shm) != r.end();
    anyNet = anyNet || std::find(r.begin(), r.end(), graph::TransportKind::Net) != r.end();
  }
  // Host memory bounds network hops too (each channel costs pinned staging buffers and sockets).
  minChannels = channelFloor(minChannels, userMinChannels, anyShm || anyNet, (int)kShmMinChannels.get());
  opts.minChannels = minChannels;  // the ring search repeats its rings up to the floor
  comm->shmPeers.assign(comm->nRanks, false);
  comm->netPeers.assign(comm->nRanks, false);
  comm->anyNet = anyNet;
  std::string netWhy;
  for (int p = 0; p < comm->nRanks; ++p) {
    if (p == comm->rank || row[p] == graph::TransportKind::P2p) continue;
    if (row[p] == graph::TransportKind::Net && chooseNetwork(comm, &netWhy)) {
      comm->netPeers[p] = true;
      continue;
    }
    if (row[p] == graph::TransportKind::Shm && kShmTransport.get() >= 1) {
      comm->shmPeers[p] = true;
      continue;
    }
    if (row[p] == graph::TransportKind::Shm) {
      WEFT_WARN("rank %d: rank %d (GPU %s) can only be reached through shared host memory, and NCCL_WEFT_SHM=0 "
                "turns weft's SHM transport off; unset it, or allow peer-to-peer access (NCCL_P2P_DISABLE / "
                "NCCL_P2P_LEVEL)", comm->rank, p, comm->peers[p].busId);
    } else {
      WEFT_WARN("rank %d: rank %d (GPU %s) can only be reached through the network, and %s", comm->rank, p,
                comm->peers[p].busId, netWhy.c_str());
    }
    return ncclInvalidUsage;
  }

  graph::ChannelPlan plan = graph::planChannels(topo, opts);
  if (plan.nChannels <= 0 || plan.rings.empty()) {
    WEFT_WARN("rank %d: the ring search found no channel; using rank-order rings", comm->rank);
    rankOrderRings(comm, minChannels, userMinChannels);
  } else {
    comm->nChannels = std::clamp(plan.nChannels, std::max(1, minChannels), maxChannels);
    comm->rings.clear();
    comm->trees.clear();
    for (int c = 0; c < comm->nChannels; ++c) {
      comm->rings.push_back(plan.rings[c % plan.rings.size()].order);
      comm->trees.push_back(plan.trees.empty() ? rankOrderChain(comm->nRanks)
                                               : treePeersOf(plan.trees[c % plan.trees.size()], comm->nRanks));
    }
    comm->tuning = graph::tuningInputFor(topo, plan, comm->nChannels);
  }
  // Priced as host memory, without LL128, on every rank as soon as any pair of the communicator
  // goes through it (anyShm, from every rank's row): ranks must pick the same protocols and lay out
  // their connections alike (comm_init leaves LL128 slots out where LL128 cannot run).
  if (anyShm) comm->tuning.intraLink = graph::kLinkShm;
  const int nNetPeers = (int)std::count(comm->netPeers.begin(), comm->netPeers.end(), true);
  if (nNetPeers > 0) {
    WEFT_INFO(log::kInit | log::kNet, "rank %d: %d peer(s) through the network (%s, %d hosts)", comm->rank,
              nNetPeers, comm->netPlugin != nullptr ? ("network plugin " + comm->netPlugin->name()).c_str()
                                                    : "socket transport", comm->tuning.nNodes);
  }
  const int nShmPeers = (int)std::count(comm->shmPeers.begin(), comm->shmPeers.end(), true);
  if (nShmPeers > 0) {
    WEFT_INFO(log::kInit | log::kShm, "rank %d: %d peer(s) through host shared memory (SHM transport)", comm->rank,
              nShmPeers);
  }
  shmForEveryPeer(comm);
  if (!files.dumpFile.empty() && comm->rank == files.dumpRank) {
    if (isError(graph::writeTopologyXmlFile(topo, files.dumpFile))) {
      WEFT_WARN("rank %d: could not write NCCL_TOPO_DUMP_FILE %s", comm->rank, files.dumpFile.c_str());
    }
  }
  WEFT_INFO(log::kGraph | log::kInit, "rank %d: %d channels from the topology search (rings of %zu ranks)", comm->rank,
            comm->nChannels, comm->rings.empty() ? (size_t)0 : comm->rings[0].size());
  return ncclSuccess;
}

}  // namespace weft::core
