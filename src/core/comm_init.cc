#include "core/comm_init.h"

#include "enqueue/launch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "core/call_check.h"
#include "core/communicator.h"
#include "core/comm_window.h"
#include "core/op_ledger.h"
#include "core/param.h"
#include "core/comm_topology.h"
#include "core/cpu_affinity.h"
#include "core/peer_info.h"
#include "core/rank_agreement.h"
#include "core/watchdog.h"
#include "device/kernel_api.h"
#include "device/special_kernels.h"
#include "enqueue/launch.h"
#include "graph/algo_proto_env.h"
#include "graph/tuning.h"
#include "graph/tuning_input.h"
#include "runtime/block_pool.h"
#include "runtime/gpu.h"
#include "transport/p2p/p2p_connections.h"

namespace weft::core {
namespace {

const param::IntParam kBuffSize{"NCCL_BUFFSIZE", 4 << 20};
const param::IntParam kLLBuffSize{"NCCL_LL_BUFFSIZE", -2};      // -2: the default (NCCL's "unset")
const param::IntParam kLL128BuffSize{"NCCL_LL128_BUFFSIZE", -2};
const param::IntParam kMinChannels{"NCCL_MIN_NCHANNELS", -2};
const param::IntParam kMaxChannels{"NCCL_MAX_NCHANNELS", -2};
const param::IntParam kDefaultChannels{"NCCL_WEFT_NCHANNELS", 16};
const param::IntParam kP2pChannels{"NCCL_WEFT_P2P_NCHANNELS", 4};
// Channels with point-to-point-only connections between every pair of ranks (-1: p2pOnlyChannelsFor).
const param::IntParam kSimpleP2pChannels{"NCCL_WEFT_P2P_SIMPLE_NCHANNELS", -1};
// Channels one peer's point-to-point traffic is spread over at most (0: every channel connecting
// the pair). 2xH200, 32 channels, 1 GiB: sendrecv 277/313/297 GB/s and alltoall 264/329/313 on
// 16/24/32 channels (session 6).
const param::IntParam kP2pMaxChannels{"NCCL_WEFT_P2P_MAX_CHANNELS", 24};
// Bytes per channel below which a transfer to one peer uses fewer channels (PlanShape::
// p2pChannelBytes; 0: always all). Only communicators of more than two ranks are affected.
const param::IntParam kP2pChannelBytes{"NCCL_WEFT_P2P_CHANNEL_BYTES", 128 << 10};
// NCCL's name and default: point-to-point transfers of at most this many bytes run on LL.
const param::IntParam kP2pLLThreshold{"NCCL_P2P_LL_THRESHOLD", 16384};
// LL step of the point-to-point-only connections of a communicator without a mesh: kSteps of
// them hold 16 KiB of payload (NCCL_P2P_LL_THRESHOLD's default) in 32 KiB, an eighth of the
// memory of a full connection's LL slots, which matters since those connections grow with the ranks.
constexpr int kP2pOnlyLLStepBytes = 4096;
// 1 (default, as NCCL): point-to-point-only connections get their buffers when a pair
// first uses them (transport/p2p/p2p_connections.h); 0: all of them at creation.
const param::IntParam kRuntimeConnect{"NCCL_RUNTIME_CONNECT", 1};

// Data warps of a SendRecv item's send part when it also receives: sending pushes over the link,
// receiving copies locally (faster), so the send side gets more than half.
const param::IntParam kP2pSendWarps{"NCCL_WEFT_P2P_SEND_WARPS", 0};
const param::IntParam kAllowSharedGpu{"NCCL_WEFT_ALLOW_GPU_SHARING", 0};  // tests only
const param::IntParam kFifoSlots{"NCCL_WORK_FIFO_DEPTH", 1 << 12};
const param::IntParam kNthreads{"NCCL_NTHREADS", -2};
const param::IntParam kDirectTwoShot{"NCCL_WEFT_DIRECT_TWO_SHOT", -1};  // Direct AllReduce: -1 model, 0/1 force
constexpr int kHostWarpSize = 32;  // NVIDIA; the HIP port uses 64

// Channel bounds from the config (minCTAs/maxCTAs) and NCCL_MIN/MAX_NCHANNELS.
// Channels a multi-rank communicator creates at least when NCCL_MIN_NCHANNELS is not set. One of
// weft's Simple channels moves less than one of NCCL's (2xH200: 24 channels reach 0.79-0.91 of
// NCCL's busbw at 1 GiB, 32 reach 0.84-1.10), so weft builds more rings than the search's 24; the
// tuner still gives small calls fewer.
const param::IntParam kWeftMinChannels{"NCCL_WEFT_MIN_NCHANNELS", 32};

// userLo: the user's own floor (minCTAs, NCCL_MIN_NCHANNELS), which every call honours; *lo also
// includes weft's floor for the number of channels the communicator builds.
void channelBounds(const ncclComm* comm, int* lo, int* hi, int* userLo = nullptr) {
  const int user = std::max<int>(comm->config.minCTAs, kMinChannels.get() > 0 ? (int)kMinChannels.get() : 1);
  const int floor = kMinChannels.get() > 0 || comm->nRanks == 1 ? 1 : std::max<int>(1, (int)kWeftMinChannels.get());
  *lo = std::max(user, floor);
  if (userLo) *userLo = user;
  *hi = std::min<int>(comm->config.maxCTAs, kMaxChannels.get() > 0 ? (int)kMaxChannels.get() : dev::kMaxChannels);
  *hi = std::min(*hi, dev::kMaxChannels);
  *lo = std::min(*lo, *hi);
}

uint32_t roundDownPow2(uint32_t v) {
  uint32_t p = 1;
  while (p <= v / 2) p *= 2;  // (p * 2 <= v would wrap to 0 past 2^31 and never end)
  return p;
}

// Work FIFO slots: NCCL_WORK_FIFO_DEPTH, at least what one launch on every channel may need, at
// most kMaxFifoSlots (a bigger value is clamped, with a warning, rather than pinning gigabytes).
constexpr int64_t kMaxFifoSlots = int64_t(1) << 20;
uint32_t fifoSlots() {
  const int64_t least = 2 * dev::kMaxWorksPerChannel * dev::kMaxChannels;
  int64_t want = kFifoSlots.get();
  if (want > kMaxFifoSlots) {
    WEFT_WARN("NCCL_WORK_FIFO_DEPTH=%lld is more than the %lld work slots weft allows; using %lld", (long long)want,
              (long long)kMaxFifoSlots, (long long)kMaxFifoSlots);
    want = kMaxFifoSlots;
  }
  return roundDownPow2((uint32_t)std::max<int64_t>(want, least));
}

// Tree connections cost staging buffers on every tree edge, both ways: set them up only when the
// Tree algorithm can run (kernels implement it and NCCL_ALGO allows it for AllReduce); otherwise
// the tuner is told it is not available.
void decideTreeConnections(ncclComm* comm) {
  comm->treesConnected = false;
  for (int p = 0; p < dev::kNumProtos && comm->nRanks > 1; ++p) {
    if (comm->tuning.env.allows(dev::kFuncAllReduce, dev::kAlgoTree, p) &&
        dev::isSupported(dev::kFuncAllReduce, dev::kAlgoTree, (dev::Proto)p, dev::kRedSum, dev::kFloat32)) {
      comm->treesConnected = true;
    }
  }
  if (!comm->treesConnected) {
    for (int p = 0; p < dev::kNumProtos; ++p)
      comm->tuning.supported[dev::kFuncAllReduce] &= ~graph::pairBit(dev::kAlgoTree, p);
  }
}

// The tuning model's view of the communicator, once its channels and buffers are known.
void setupTuning(ncclComm* comm, int minChannels) {
  if (comm->nRanks == 1) comm->tuning = graph::fallbackTuningInput(1, comm->nChannels);
  comm->tuning.maxChannels = comm->nChannels;
  comm->tuning.stepBytes[dev::kProtoSimple] = comm->stepBytes;
  comm->tuning.env = graph::algoProtoMasksFromEnv();
  comm->tuning.directTwoShot = (int)std::clamp<int64_t>(kDirectTwoShot.get(), -1, 1);
  comm->tuningConstants = graph::tuningConstantsFromEnv();
  comm->minCollChannels = std::clamp(minChannels, 1, comm->nChannels);
  // What the kernels implement for a plain sum on floats (the planner narrows it per call).
  for (int f = 0; f < graph::kNumCollFuncs; ++f) {
    comm->tuning.supported[f] = 0;
    for (int a = 0; a < dev::kNumAlgos; ++a)
      for (int p = 0; p < dev::kNumProtos; ++p)
        if (dev::isSupported((dev::Func)f, (dev::Algo)a, (dev::Proto)p, dev::kRedSum, dev::kFloat32))
          comm->tuning.supported[f] |= graph::pairBit(a, p);
  }
  // The network transport's proxy forwards Simple steps (their sizes in the sender's head line) and
  // LL lines (found by their flags); LL128 lines it does not look at: a communicator with any
  // network hop runs no LL128, on every rank (anyNet is the same everywhere).
  if (comm->anyNet) {
    for (int f = 0; f < graph::kNumCollFuncs; ++f)
      for (int a = 0; a < dev::kNumAlgos; ++a) comm->tuning.supported[f] &= ~graph::pairBit(a, dev::kProtoLL128);
  }
  decideTreeConnections(comm);
  // NCCL_NTHREADS: threads per block for LL and Simple in NCCL. weft's kernels are compiled for
  // a fixed block, so the value only sets the threads per channel the model assumes when it
  // decides how many channels a call needs (fewer threads: more channels for the same size).
  std::string note;
  int nt = graph::nthreadsSetting(kNthreads.get(), kHostWarpSize, comm->tuningConstants.maxThreads[dev::kProtoSimple],
                                  comm->tuningConstants.maxThreads[dev::kProtoSimple], &note);
  if (!note.empty()) {
    comm->tuningConstants.maxThreads[dev::kProtoSimple] = nt;
    comm->tuningConstants.maxThreads[dev::kProtoLL] = nt;
    WEFT_INFO(log::kEnv | log::kTuning, "NCCL_NTHREADS=%lld: %s. weft's kernels keep their compiled block size "
              "(%d threads for Simple); the tuner sizes channels for %d threads per channel (LL and Simple)",
              (long long)kNthreads.get(), note.c_str(), dev::kernelThreads(dev::kProtoSimple), nt);
  }
  if (log::enabled(log::Level::Info, log::kTuning)) {
    WEFT_INFO(log::kTuning, "rank %d: tuning model, %d channel(s) per collective at least\n%s", comm->rank,
              comm->minCollChannels, graph::formatTuningSummary(comm->tuning, comm->tuningConstants).c_str());
  }
}

Status exchangePeerInfo(ncclComm* comm) {
  PeerInfo me;
  me.rank = comm->rank;
  me.cudaDev = comm->cudaDev;
  me.pid = (int32_t)getpid();
  me.hostHash = localHostHash();
  me.processHash = localProcessHash();
  me.pidNamespace = localPidNamespace();
  me.processStart = processStartFromStat(readProcStat("self"));
  snprintf(me.busId, sizeof(me.busId), "%s", comm->busId.c_str());
  snprintf(me.hostName, sizeof(me.hostName), "%s", localHostName().c_str());
  comm->peers.assign(comm->nRanks, PeerInfo{});
  comm->peers[comm->rank] = me;
  WEFT_TRY(comm->bootstrap->allGather(comm->peers.data(), sizeof(PeerInfo)));
  WEFT_TRY(checkPeerTable(comm->peers, kAllowSharedGpu.get() != 0));
  comm->sharesGpu = sharesGpu(comm->peers, comm->rank);
  const int neighbour = rankSharingGpuInProcess(comm->peers, comm->rank);
  static std::once_flag sharingNoted;
  if (neighbour >= 0) {
    std::call_once(sharingNoted, [&] {
      WEFT_WARN("ranks %d and %d run on GPU %s in this process (NCCL_WEFT_ALLOW_GPU_SHARING, tests only): their "
                "kernels wait for each other, and CUDA feeds one GPU's streams through a few hardware queues in "
                "launch order (CUDA_DEVICE_MAX_CONNECTIONS, default 8), so a rank that launches far ahead of another "
                "can queue its later kernel in front of the other's earlier one and hang both: keep the ranks' "
                "launches in step",
                comm->rank, neighbour, comm->busId.c_str());
    });
  }
  if (!allOnOneHost(comm->peers)) {
    std::string why;
    if (!chooseNetwork(comm, &why)) {
      for (const PeerInfo& p : comm->peers) {
        if (p.hostHash != me.hostHash) {
          WEFT_WARN("communicator creation: rank %d is on host %s and rank %d on host %s, and %s", me.rank,
                    me.hostName, p.rank, p.hostName, why.c_str());
          break;
        }
      }
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

// Every kernel a launch may pick is loaded at creation, and the device's stack limit covers the
// largest of them (NCCL too loads its kernels at init, and has NCCL_SET_STACK_SIZE for the limit):
// otherwise the first launch of a kernel may wait for the device to go idle (runtime::loadKernel)
// while another rank's kernel there waits for ours.
Status loadKernels() {
  size_t stack = 0;
  auto load = [&stack](const void* fn) -> Status {
    size_t bytes = 0;
    if (fn != nullptr) WEFT_TRY(runtime::loadKernel(fn, &bytes));
    stack = std::max(stack, bytes);
    return ncclSuccess;
  };
  for (int p = 0; p < dev::kNumProtos; ++p)
    if (dev::protocolUsable((dev::Proto)p)) WEFT_TRY(load(dev::kernelFunction((dev::Proto)p)));
  for (int kind = dev::kSpecialNone + 1; kind < dev::kNumSpecialKinds; ++kind)
    WEFT_TRY(load(dev::specialKernelFunction(kind)));
  WEFT_TRY(load(dev::localCopyKernel()));
  return runtime::reserveStack(stack);
}

Status setupDeviceState(ncclComm* comm) {
  // Host-mapped flags and the work FIFO, from the pool (runtime/block_pool.h says why), as is every
  // device block of the communicator.
  int processRanks = 0;
  for (const PeerInfo& peer : comm->peers) processRanks += peer.processHash == comm->peers[comm->rank].processHash;
  comm->sharesProcessForPools = processRanks > 1;
  comm->countedForBlockPools = true;
  runtime::blockPoolUserIn(comm->sharesProcessForPools);
  void* host = nullptr;
  void* devView = nullptr;
  WEFT_TRY(runtime::pinnedBlockAcquire(64, &host));
  memset(host, 0, 64);
  comm->abortFlag = (volatile uint32_t*)host;
  comm->fifoConsumed = (volatile uint32_t*)((char*)host + 32);
  WEFT_TRY(runtime::hostDevicePointer(host, &devView));
  comm->abortFlagDev = (volatile uint32_t*)devView;
  comm->fifoConsumedDev = (volatile uint32_t*)((char*)devView + 32);

  WEFT_TRY(runtime::pinnedBlockAcquire(sizeof(uint64_t) * dev::kMaxChannels, &host));
  memset(host, 0, sizeof(uint64_t) * dev::kMaxChannels);
  comm->replayStamps = (volatile uint64_t*)host;
  WEFT_TRY(runtime::hostDevicePointer(host, &devView));
  comm->replayStampsDev = (volatile uint64_t*)devView;

  const uint32_t slots = fifoSlots();
  WEFT_TRY(runtime::pinnedBlockAcquire(sizeof(dev::DevWork) * slots, &host));
  comm->fifoHost = (dev::DevWork*)host;
  WEFT_TRY(runtime::hostDevicePointer(host, &devView));
  comm->fifoDev = (dev::DevWork*)devView;
  comm->fifo = enqueue::WorkFifo(slots);

  void* arrivals = nullptr;
  WEFT_TRY(runtime::deviceBlockAcquire(64, &arrivals));
  WEFT_TRY(runtime::deviceMemset(arrivals, 0, 64));
  comm->blockArrivals = (uint32_t*)arrivals;

  // The device copy of the communicator: rings and connection info per channel.
  dev::DevComm hostCopy{};
  hostCopy.rank = comm->rank;
  hostCopy.nRanks = comm->nRanks;
  hostCopy.nChannels = comm->nChannels;
  hostCopy.p2pSendWarps = (int32_t)kP2pSendWarps.get();  // 0: the kernel's default split
  hostCopy.abortFlag = comm->abortFlagDev;
  for (int c = 0; c < comm->nChannels; ++c) {
    const std::vector<int>& ring = comm->rings[c];
    int pos = (int)(std::find(ring.begin(), ring.end(), comm->rank) - ring.begin());
    void* ranks = nullptr;
    WEFT_TRY(runtime::deviceBlockAcquire(sizeof(int32_t) * ring.size(), &ranks));
    comm->deviceAllocations.push_back(ranks);
    std::vector<int32_t> ring32(ring.begin(), ring.end());
    WEFT_TRY(runtime::deviceMemcpy(ranks, ring32.data(), sizeof(int32_t) * ring.size()));
    dev::DevRing& dr = hostCopy.channels[c].ring;
    dr.index = pos;
    dr.next = ring[(pos + 1) % comm->nRanks];
    dr.prev = ring[(pos + comm->nRanks - 1) % comm->nRanks];
    dr.userRanks = (const int32_t*)ranks;
    const transport::TreePeers& tree = comm->trees[c][comm->rank];
    dev::DevTree& dt = hostCopy.channels[c].tree;
    dt.up = tree.up;
    for (int j = 0; j < dev::kMaxTreeArity; ++j) dt.down[j] = tree.down[j];
    hostCopy.channels[c].peers = comm->p2p->deviceTable(c);
  }
  void* dc = nullptr;
  WEFT_TRY(runtime::deviceBlockAcquire(sizeof(dev::DevComm), &dc));
  WEFT_TRY(runtime::deviceMemcpy(dc, &hostCopy, sizeof(dev::DevComm)));
  comm->devComm = (dev::DevComm*)dc;

  WEFT_TRY(runtime::eventCreate(&comm->lastLaunchEvent));
  WEFT_TRY(runtime::eventCreate(&comm->joinEvent));
  WEFT_TRY(runtime::eventCreate(&comm->graphLaunchEvent));
  WEFT_TRY(enqueue::makeGraphWorkPool(comm));
  return ncclSuccess;
}

Status initSteps(ncclComm* comm, const std::vector<ncclUniqueId>& ids, int nRanks, int rank, int cudaDev) {
  auto start = std::chrono::steady_clock::now();
  runtime::MemTallyScope charged(comm->memTally, runtime::MemUse::kState);
  comm->rank = rank;
  comm->nRanks = nRanks;
  comm->cudaDev = cudaDev;
  WEFT_TRY(runtime::setDevice(cudaDev));
  WEFT_TRY(loadKernels());
  runtime::DeviceProps props;
  WEFT_TRY(runtime::deviceProps(cudaDev, &props));
  comm->busId = props.busId;
  comm->smCount = props.smCount;

  bootstrap::UniqueIdInfo idInfo;
  std::string why;
  if (!bootstrap::decodeUniqueId(ids[0], &idInfo, &why)) {
    WEFT_WARN("communicator creation (rank %d of %d): the unique id is not valid: %s. Pass every rank the id that "
              "ncclGetUniqueId returned", rank, nRanks, why.c_str());
    return ncclInvalidArgument;
  }
  comm->commHash = idInfo.jobKey;
  WEFT_TRY(bootstrap::Bootstrap::init(ids.data(), (int)ids.size(), rank, nRanks, &comm->abortRequested,
                                      &comm->bootstrap));
  WEFT_TRY(exchangePeerInfo(comm));
  if (nRanks > 1) {
    int hostRanks = 0;
    for (int r = 0; r < nRanks; ++r) hostRanks += comm->peers[r].hostHash == comm->peers[rank].hostHash;
    comm->ledger = OpLedger::create(comm->commHash, rank, hostRanks);
  }

  int lo = 1, hi = dev::kMaxChannels;
  int userLo = 1;
  channelBounds(comm, &lo, &hi, &userLo);
  if (nRanks == 1) {
    // A single rank only copies locally; a few channels keep large copies fast.
    comm->nChannels = std::clamp<int>((int)kDefaultChannels.get(), lo, hi);
    comm->rings.assign(comm->nChannels, std::vector<int>{0});
    comm->trees.assign(comm->nChannels, std::vector<transport::TreePeers>(1));
  } else {
    WEFT_TRY(buildCommTopology(comm, lo, hi, userLo));
  }
  // The mesh channels connect every pair with every protocol at creation, for Direct (one host)
  // and point-to-point. A communicator with network peers has no mesh and runs no Direct: its
  // pairs that are no ring or tree neighbours get point-to-point-only connections on first use, so
  // that creation connects a number of sockets and buffers that does not grow with the ranks.
  comm->p2pChannels = comm->anyNet ? 0 : std::min<int>(comm->nChannels, std::max<int64_t>(1, kP2pChannels.get()));
  comm->p2pOnlyChannels = transport::p2pOnlyChannelsFor(comm->nChannels, nRanks, kSimpleP2pChannels.get());
  if (comm->anyNet) comm->p2pOnlyChannels = std::max(comm->p2pOnlyChannels, std::min(comm->nChannels, 1));
  int64_t buffSize = std::max<int64_t>(kBuffSize.get(), 64 << 10);
  comm->stepBytes = (int)(buffSize / dev::kSteps) & ~4095;
  setupTuning(comm, userLo);
  comm->connPlan = comm->connectionPlanOf(rank);
  comm->protoStepBytes[dev::kProtoSimple] = comm->stepBytes;
  comm->protoStepBytes[dev::kProtoLL] = transport::protoStepBytes(dev::kProtoLL, kLLBuffSize.get());
  comm->protoStepBytes[dev::kProtoLL128] = transport::protoStepBytes(dev::kProtoLL128, kLL128BuffSize.get());
  // LL128 runs only where whole 128-byte stores are guaranteed (NVLink; the planner never picks it
  // elsewhere, and a forced one is refused): on PCIe and host-memory hops its slots would be half
  // of every connection's staging buffer (4.7 of 9.2 MiB by default), never touched.
  if (!graph::ll128Usable(comm->tuning)) comm->protoStepBytes[dev::kProtoLL128] = 0;
  if (comm->anyNet) comm->protoStepBytes[dev::kProtoLL128] = 0;  // no LL128 through the network proxy
  comm->p2pMaxChannels = (int)std::max<int64_t>(0, kP2pMaxChannels.get());
  comm->p2pChannelBytes = (size_t)std::max<int64_t>(0, kP2pChannelBytes.get());
  comm->p2pLLBytes = dev::protocolUsable(dev::kProtoLL) && comm->protoStepBytes[dev::kProtoLL] > 0
                         ? (size_t)std::clamp<int64_t>(kP2pLLThreshold.get(), 0, INT32_MAX)
                         : 0;
  // Point-to-point LL runs on the mesh. Without one (network peers, or more ranks than the mesh
  // serves: ConnectionPlan::meshChannels) it runs on every connection of the pair, so the
  // point-to-point-only ones get LL slots too.
  if (nRanks > 1 && comm->connPlan.meshChannels.empty() && comm->p2pLLBytes > 0)
    comm->p2pLLStepBytes = std::min(comm->protoStepBytes[dev::kProtoLL], kP2pOnlyLLStepBytes);
  comm->runtimeConnect = kRuntimeConnect.get() != 0;
  WEFT_TRY(checkRanksAgree(comm));
  {
    // Host memory is allocated and first touched here: next to this rank's GPU. (Ended before
    // the watchdog may start: that process-wide thread keeps the mask it is started with.)
    ScopedCpuAffinity affinity(comm->gpuCpuMap, rank);
    {
      runtime::MemTallyScope connections(runtime::MemUse::kConnections);
      WEFT_TRY(transport::P2pConnections::create(comm, &comm->p2p));
    }
    WEFT_TRY(setupDeviceState(comm));
  }
  WEFT_TRY(comm->bootstrap->barrier());
  if (comm->ledger) comm->findings = std::make_unique<FindingWatch>(comm->commHash, sameHostPeers(comm));
  watchCommunicator(comm);

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WEFT_INFO(log::kInit, "comm %p rank %d nRanks %d cudaDev %d busId %s commHash 0x%llx - Init COMPLETE (%d channels, "
            "%.3f s)", (void*)comm, rank, nRanks, cudaDev, comm->busId.c_str(), (unsigned long long)comm->commHash,
            comm->nChannels, seconds);
  WEFT_INFO(log::kInit | log::kBootstrap, "rank %d: bootstrap traffic of the creation: %s", rank,
            comm->bootstrap->trafficText().c_str());
  WEFT_INFO(log::kInit | log::kAlloc, "%s: communicator memory: %s", comm->memoryLabel().c_str(),
            comm->memTally->text().c_str());
  publishMemory(comm);
  return ncclSuccess;
}

}  // namespace

Status initCommunicator(ncclComm* comm, const std::vector<ncclUniqueId>& ids, int nRanks, int rank, int cudaDev) {
  Status s = initSteps(comm, ids, nRanks, rank, cudaDev);
  if (isError(s)) {
    // A failure of this rank's own (the bootstrap has none to report, so it did not tell the peers):
    // the peers waiting for this rank learn why now, not at their deadline or as "it exited".
    if (comm->bootstrap && comm->bootstrap->failureText().empty()) comm->bootstrap->giveUp(log::lastErrorOfThread());
    comm->setLastError(log::lastErrorOfThread());
    comm->asyncError.store(s);
    return s;
  }
  comm->asyncError.store(ncclSuccess);
  return ncclSuccess;
}

Status finalizeCommunicator(ncclComm* comm) {
  if (comm->haveLaunched) {
    runtime::ScopedDevice device;
    WEFT_TRY(device.set(comm->cudaDev));
    WEFT_TRY(runtime::eventSynchronize(comm->lastLaunchEvent));
  }
  if (comm->bootstrap) WEFT_TRY(comm->bootstrap->barrier());
  comm->finalized = true;
  return ncclSuccess;
}

void requestAbort(ncclComm* comm) {
  comm->abortRequested.store(true);
  if (comm->abortFlag) *comm->abortFlag = 1;
}

Status revokeCommunicator(ncclComm* comm) {
  unwatchCommunicator(comm);  // its verdicts are moot now, and it must not fail the state set below
  comm->revoked.store(true);
  // Left raised: a CUDA graph of this communicator replayed later ends at once instead of waiting
  // for peers that have moved on.
  if (comm->abortFlag) *comm->abortFlag = 1;
  if (comm->bootstrap) comm->bootstrap->setAbortFlag(nullptr);
  if (comm->haveLaunched) {
    runtime::ScopedDevice device;
    WEFT_TRY(device.set(comm->cudaDev));
    const double limit = (double)kPeerWaitTimeout.get();
    const auto start = std::chrono::steady_clock::now();
    for (bool done = false;;) {
      WEFT_TRY(runtime::eventQuery(comm->lastLaunchEvent, &done));
      if (done) break;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (limit > 0 && waited > limit) {
        WEFT_WARN("ncclCommRevoke (rank %d): the communicator's work has not stopped %.0f s after it was told to "
                  "(NCCL_TIMEOUT); does other work ahead of it on the stream not finish?", comm->rank, waited);
        return ncclSystemError;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  WEFT_INFO(log::kInit, "comm %p rank %d nRanks %d: revoked", (void*)comm, comm->rank, comm->nRanks);
  comm->asyncError.store(ncclSuccess);
  return ncclSuccess;
}

void freeCommunicator(ncclComm* comm) {
  enqueue::reportHostProfile(comm);
  const runtime::MemTally& tally = *comm->memTally;
  auto peak = [&tally](runtime::MemPlace place) { return runtime::memSizeText(tally.peak(place)); };
  WEFT_INFO(log::kInit | log::kAlloc, "%s: communicator memory at destruction: %s; at most GPU %s, pinned host %s, "
            "/dev/shm %s", comm->memoryLabel().c_str(), tally.text().c_str(), peak(runtime::MemPlace::kGpu).c_str(),
            peak(runtime::MemPlace::kPinned).c_str(), peak(runtime::MemPlace::kShared).c_str());
  unwatchCommunicator(comm);
  if (comm->bootstrap) comm->bootstrap->close();  // another thread's split or shrink of it leaves first
  runtime::ScopedDevice device;
  if (comm->cudaDev >= 0 && isError(device.set(comm->cudaDev))) {
    WEFT_WARN("rank %d: could not select device %d to free the communicator", comm->rank, comm->cudaDev);
  }
  // Let the kernels end (promptly after an abort) before their memory goes away.
  if (comm->haveLaunched && isError(runtime::eventSynchronize(comm->lastLaunchEvent))) {
    WEFT_WARN("rank %d: outstanding work failed while destroying the communicator", comm->rank);
  }
  // The latest ordered graph replay too (it reads the graph work buffers freed below).
  if (comm->graphsOrdered && isError(runtime::eventSynchronize(comm->graphLaunchEvent))) {
    WEFT_WARN("rank %d: a CUDA graph replay failed while destroying the communicator", comm->rank);
  }
  if (comm->haveLaunched) dev::reportDeviceProbe(comm->rank);
  if (comm->lastLaunchEvent) runtime::destroyEventQuiet(comm->lastLaunchEvent);
  if (comm->joinEvent) runtime::destroyEventQuiet(comm->joinEvent);
  if (comm->graphLaunchEvent) runtime::destroyEventQuiet(comm->graphLaunchEvent);
  comm->graphWorks.reset();
  // Windows hold pool blocks and the symmetric barrier memory: they go before the communicator
  // counts out of the pools below, else the last communicator's trim would run first and their
  // blocks would stay parked, and their GPU pages taken, with no communicator left (seen by
  // tests/gpu/memory_test.cc).
  comm->symWindow = nullptr;
  comm->symSignals0 = nullptr;
  comm->windows.reset();
  for (void* p : comm->deviceAllocations) runtime::deviceBlockRelease(p);
  runtime::deviceBlockRelease(comm->devComm);
  runtime::deviceBlockRelease(comm->blockArrivals);
  comm->p2p.reset();
  runtime::pinnedBlockRelease(comm->fifoHost);
  runtime::pinnedBlockRelease((void*)comm->abortFlag);
  runtime::pinnedBlockRelease((void*)comm->replayStamps);
  if (comm->countedForBlockPools) {
    runtime::blockPoolUserOut(comm->sharesProcessForPools);  // the last frees them
    const size_t gpu = runtime::devicePool().parkedBytes(), pinned = runtime::pinnedPool().parkedBytes();
    if (gpu + pinned > 0) {
      WEFT_INFO(log::kInit | log::kAlloc, "rank %d: the process keeps GPU %s and pinned host %s of its destroyed "
                "communicators' blocks for the next ones (freed when its last communicator goes)", comm->rank,
                runtime::memSizeText((int64_t)gpu).c_str(), runtime::memSizeText((int64_t)pinned).c_str());
    }
  }
  comm->countedForBlockPools = false;
  comm->bootstrap.reset();
  comm->magic = ncclComm::kDeadMagic;
}

}  // namespace weft::core
