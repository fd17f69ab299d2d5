// The communicator: what ncclComm_t points to. It owns the per-rank state of one NCCL communicator
// and the sub-objects that do the work (bootstrap, connections, enqueue state); each keeps its own
// logic, this struct only holds them together.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "device/abi.h"
#include "enqueue/graph_works.h"
#include "enqueue/planner.h"
#include "enqueue/redop.h"
#include "enqueue/task.h"
#include "enqueue/work_fifo.h"
#include "graph/tuning.h"
#include "nccl.h"
#include "runtime/gpu.h"
#include "runtime/mem_tally.h"
#include "transport/connection_plan.h"

namespace weft::bootstrap { class Bootstrap; }
namespace weft::transport { class P2pConnections; class NetPlugin; }
namespace weft::core {
struct PeerInfo;
class CallChecker;
class FindingWatch;
class OpLedger;
class RegistrationTable;
class WindowTable;
}

struct ncclComm {
  static constexpr uint64_t kMagic = 0x77656674436f6d6dULL;  // "weftComm"
  static constexpr uint64_t kDeadMagic = 0xdeaddeaddeaddeadULL;

  ncclComm();
  ~ncclComm();
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;

  uint64_t magic = kMagic;
  int rank = -1;
  int nRanks = 0;
  int cudaDev = -1;
  int smCount = 0;  // the GPU's multiprocessors
  std::string busId;
  std::string gpuCpuMap;  // the CPUs next to this rank's GPU, from the topology (core/cpu_affinity.h)
  uint64_t commHash = 0;  // identifies the communicator in logs (from the unique id)
  weft::core::CommConfig config;

  // State: ncclInProgress while a non-blocking creation runs; an error once the communicator failed.
  std::atomic<ncclResult_t> asyncError{ncclSuccess};
  std::atomic<bool> abortRequested{false};  // host waits give up when set
  volatile uint32_t* abortFlag = nullptr;   // host-mapped, read by kernels (device view: abortFlagDev)
  volatile uint32_t* abortFlagDev = nullptr;
  bool finalized = false;
  // ncclCommRevoke: its work was stopped for good; only split, shrink, destroy and abort may follow.
  std::atomic<bool> revoked{false};
  std::thread initThread;  // a non-blocking creation in progress
  int splitCount = 0;      // ncclCommSplit calls so far (tags their messages)

  std::unique_ptr<weft::bootstrap::Bootstrap> bootstrap;
  std::vector<weft::core::PeerInfo> peers;  // every rank's identity, indexed by rank

  // Channels: rings[c] is channel c's ring order; connections follow connPlan.
  int nChannels = 0;
  int p2pChannels = 0;        // channels on which every pair of ranks is connected (all protocols)
  int p2pOnlyChannels = 0;    // channels on which every pair is connected for point-to-point only
  int p2pMaxChannels = 0;     // enqueue::PlanShape::p2pMaxChannels
  size_t p2pChannelBytes = 0; // enqueue::PlanShape::p2pChannelBytes
  size_t p2pLLBytes = 0;      // enqueue::PlanShape::p2pLLBytes
  // LL step of the point-to-point-only connections (transport::ConnLayout::p2pLLStepBytes); 0:
  // they have no LL slots, and point-to-point LL runs on the mesh channels only.
  int p2pLLStepBytes = 0;
  bool runtimeConnect = true; // point-to-point-only connections made on first use (NCCL_RUNTIME_CONNECT)
  std::vector<std::vector<int>> rings;
  // trees[c][r]: rank r's place in channel c's tree. Connected (and offered to the tuner) only
  // when the Tree algorithm may run: see treesConnected.
  std::vector<std::vector<weft::transport::TreePeers>> trees;
  bool treesConnected = false;
  const std::vector<std::vector<weft::transport::TreePeers>>& connectedTrees() const {
    static const std::vector<std::vector<weft::transport::TreePeers>> kNone;
    return treesConnected ? trees : kNone;
  }
  weft::transport::ConnectionPlan connPlan;
  // The connection plan of any rank (connPlan is this rank's): every rank derives it alike.
  weft::transport::ConnectionPlan connectionPlanOf(int r) const {
    return weft::transport::planConnections(r, rings, p2pChannels, connectedTrees(), p2pOnlyChannels);
  }
  // Per rank: reached through host shared memory (the SHM transport) rather than peer-to-peer
  // access (graph/transport_choice.h); empty: every peer is P2P.
  std::vector<bool> shmPeers;
  // Per rank: on another host, reached through the network (transport/net); anyNet: some pair of
  // the communicator is (every rank knows it alike), which limits every rank to what the network
  // transport carries (Simple and LL; see core/comm_init.cc).
  std::vector<bool> netPeers;
  bool anyNet = false;
  // With anyNet: the network plugin that carries it (NCCL_NET, NCCL_NET_PLUGIN), or null for weft's
  // socket transport (core::chooseNetwork).
  const weft::transport::NetPlugin* netPlugin = nullptr;
  std::unique_ptr<weft::transport::P2pConnections> p2p;
  int stepBytes = 0;                                 // Simple (== protoStepBytes[kProtoSimple])
  int protoStepBytes[weft::dev::kNumProtos] = {};     // ConnInfo.stepBytes of every connection

  // Tuning: the model's view of this communicator (topology, channels, NCCL_ALGO/NCCL_PROTO) and
  // its constants, set at creation; the planner asks them per collective.
  weft::graph::TuningInput tuning;
  weft::graph::TuningConstants tuningConstants = weft::graph::TuningConstants::defaults();
  int minCollChannels = 1;  // config minCTAs / NCCL_MIN_NCHANNELS: channels each collective uses at least

  // Device state.
  bool countedForBlockPools = false;      // counted among the users of runtime/block_pool.h
  bool sharesProcessForPools = false;     // ... as one with several ranks in this process
  weft::dev::DevComm* devComm = nullptr;  // device memory
  uint32_t* blockArrivals = nullptr;      // device memory, one counter
  weft::dev::DevWork* fifoHost = nullptr; // host-mapped work FIFO
  weft::dev::DevWork* fifoDev = nullptr;  // its device view
  volatile uint32_t* fifoConsumed = nullptr;  // host-mapped, written by kernels
  volatile uint32_t* fifoConsumedDev = nullptr;
  // Host-mapped, one word per channel: the start time of the graph-replay kernel block running on
  // it, else 0 (dev::DevKernelArgs::replayStamps); the watchdog reads them.
  volatile uint64_t* replayStamps = nullptr;
  volatile uint64_t* replayStampsDev = nullptr;
  weft::enqueue::WorkFifo fifo{1};

  // Enqueue state.
  std::vector<weft::enqueue::Task> tasks;  // queued in the current group
  // What the planner needs of this communicator; fixed once it is initialized, so built at its
  // first launch instead of at every one (enqueue/launch.cc).
  weft::enqueue::PlanShape planShape;
  bool planShapeReady = false;
  weft::enqueue::ChoiceCache planChoices;  // the tuner's answers for planShape
  weft::enqueue::RedOpTable redOps;
  // Orders this communicator's stream launches across user streams; what the watchdog, finalize
  // and free wait for (graph replays do not record it).
  weft::runtime::Event lastLaunchEvent = nullptr;
  weft::runtime::Event joinEvent = nullptr;         // joins a group's other streams to the launch stream
  // NCCL_GRAPH_MIXING_SUPPORT (enqueue/launch.cc): replays of graphs record it after the
  // communicator's last launch in them; a graph's first launch waits for it and lastLaunchEvent.
  weft::runtime::Event graphLaunchEvent = nullptr;
  bool graphsOrdered = false;  // a graph records graphLaunchEvent: stream launches wait for it too
  // Set (after graphsOrdered) once a launch was captured: the watchdog then also asks whether the
  // graphs' replays have finished.
  std::atomic<bool> capturedLaunches{false};
  // Per graph being captured (the latest used few): the stream and the nodes this communicator's
  // latest launch in it ended with (a later launch into it on another stream starts after them)
  // and, with NCCL_GRAPH_MIXING_SUPPORT, the node recording graphLaunchEvent after them.
  struct CaptureOrder {
    unsigned long long graphId = 0;
    weft::runtime::Stream stream = nullptr;
    std::vector<weft::runtime::GraphNode> tail;
    weft::runtime::GraphNode record = nullptr;
    // NCCL_GRAPH_MIXING_SUPPORT's event nodes are in this graph (not in a conditional node's body).
    bool eventNodes = false;
    uint64_t lastUse = 0;  // captureUses when a launch last went into this graph
  };
  std::vector<CaptureOrder> captureOrders;
  uint64_t captureUses = 0;
  std::unique_ptr<weft::enqueue::GraphWorkPool> graphWorks;  // items of captured launches
  std::vector<void*> deviceAllocations;    // rings of the device state (p2p owns the peer tables)
  // The memory this communicator holds (runtime/mem_tally.h): charged while it sets up, read by the
  // log lines, the ledger page and weft-status. Shared: deferred releases charge it back later.
  std::shared_ptr<weft::runtime::MemTally> memTally = std::make_shared<weft::runtime::MemTally>();
  // "comm 0x... rank N": how the memory lines name the communicator (the pointer is the user's handle).
  std::string memoryLabel() const {
    char text[64];
    snprintf(text, sizeof(text), "comm %p rank %d", (const void*)this, rank);
    return text;
  }
  weft::runtime::Stream lastLaunchStream = nullptr;
  bool haveLaunched = false;  // lastLaunchEvent has been recorded
  // Another rank of the communicator runs on this GPU (tests only: NCCL_WEFT_ALLOW_GPU_SHARING):
  // no programmatic dependent launch then (enqueue/launch.cc).
  bool sharesGpu = false;
  // NCCL_WEFT_HOST_PROFILE=1: host time of the enqueue path, summed per phase (enqueue/launch.cc)
  // and reported when the communicator is freed.
  struct HostProfile {
    uint64_t calls = 0, launches = 0, items = 0;
    double planUs = 0, writeUs = 0, launchUs = 0, totalUs = 0;
  } hostProfile;
  // Operations asked for so far (every call; the watchdog reads it from its thread). One thread
  // calls into a communicator at a time, so a plain store does (no read-modify-write).
  uint64_t nextOpSeq() {
    const uint64_t next = opSeq_.load(std::memory_order_relaxed) + 1;
    opSeq_.store(next, std::memory_order_relaxed);
    return next;
  }
  uint64_t opCount() const { return opSeq_.load(std::memory_order_relaxed); }
  // Collectives issued, published for the other ranks of the host (null: one rank, or no shared
  // memory), and compared with the neighbors' calls (core/call_check.h; made at the first call).
  std::unique_ptr<weft::core::OpLedger> ledger;
  std::unique_ptr<weft::core::CallChecker> callChecker;
  // What the other ranks of the host found wrong in the calls (made once the communicator is whole).
  std::unique_ptr<weft::core::FindingWatch> findings;

  // ncclCommRegister's buffers (their handles and references; core/registrations.h).
  std::unique_ptr<weft::core::RegistrationTable> registrations;
  // ncclCommWindowRegister's windows (core/comm_window.h).
  std::unique_ptr<weft::core::WindowTable> windows;
  // The symmetric collectives' barrier memory (core/symmetric.h): its window and team rank 0's
  // flat address of it; null until a symmetric window was mapped flat on every rank.
  void* symWindow = nullptr;
  weft::dev::DevSymSignals* symSignals0 = nullptr;
  uint64_t symSignalStride = 0;

  // A cheap guard against garbage and destroyed handles passed to the API.
  bool looksValid() const { return magic == kMagic; }

  // The text of the last warning raised about this communicator (ncclGetLastError(comm)), copied
  // under the lock into the caller's buffer (another thread may be setting it); "" when none.
  void copyLastError(char* out, size_t bytes) const;
  void setLastError(const char* text);

 private:
  std::atomic<uint64_t> opSeq_{0};
  mutable std::mutex lastErrorMutex_;
  char lastError_[1024] = "";
};
