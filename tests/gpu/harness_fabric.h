// The kernel harness's stand-in for the weft host engine: N ranks in one process on the visible
// GPUs (rank r on device r % nGpus, several ranks may share a GPU), with DevComm, rings, peer
// connections (P2P write mode: buffers and tail counters in the receiver's memory, head counters
// in the sender's), a work FIFO in host-mapped memory and one stream per rank.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "device/abi.h"

#define HARNESS_CUDA(call)                                                                   \
  do {                                                                                       \
    cudaError_t harness_e_ = (call);                                                         \
    if (harness_e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,              \
                   cudaGetErrorString(harness_e_));                                          \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

namespace weft::harness {

struct FabricConfig {
  int nRanks = 2;
  int nGpus = 1;      // ranks are spread round-robin over devices 0..nGpus-1
  int nChannels = 2;
  uint32_t stepBytes = 512 * 1024;       // Simple
  uint32_t llStepBytes = 64 * 1024;      // LL (NCCL_LL_BUFFSIZE default / kSteps)
  uint32_t ll128StepBytes = 614400;      // LL128 (NCCL_LL128_BUFFSIZE default / kSteps)
  // Ring order per channel (userRanks); empty: rank order, reversed on odd channels, rotated by
  // the channel index, so that ring position and rank differ.
  std::vector<std::vector<int>> rings;
};

// Work items for one launch: works[rank][channel] run in order on that channel's block. All items
// of one launch use one protocol (the kernel of the first item's protocol is launched).
using LaunchWorks = std::vector<std::vector<std::vector<dev::DevWork>>>;

class Fabric {
 public:
  static constexpr uint32_t kFifoSize = 4096;

  explicit Fabric(const FabricConfig& cfg);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const FabricConfig& config() const { return cfg_; }
  int nRanks() const { return cfg_.nRanks; }
  int device(int rank) const { return ranks_[rank].device; }
  cudaStream_t stream(int rank) const { return ranks_[rank].stream; }
  const std::vector<int>& ring(int channel) const { return cfg_.rings[channel]; }

  // Writes the items into each rank's FIFO and launches every rank that has items, each on its
  // own stream, all before waiting. Returns false (with a reason) on a timeout, after raising
  // the abort flags; the fabric is then unusable (broken() is true).
  bool launch(const LaunchWorks& works, double timeoutSec, std::string* why);
  // Launches without waiting (bandwidth mode); pair with waitAll().
  void launchAsync(const LaunchWorks& works);
  // Relaunches the items of the previous launchAsync without rewriting the FIFO.
  void relaunch();
  bool waitAll(double timeoutSec, std::string* why);

  void setAbort(int rank, uint32_t value);
  bool broken() const { return broken_; }

 private:
  struct Rank {
    int rank = 0;
    int device = 0;
    cudaStream_t stream = nullptr;
    dev::DevComm* dComm = nullptr;
    std::vector<dev::DevPeer*> dPeers;  // per channel
    int32_t* dUserRanks = nullptr;      // [nChannels][nRanks]
    char* connBuffers = nullptr;        // [nChannels][sender][kSteps * stepBytes], this rank receives
    uint64_t* counters = nullptr;       // tails [nChannels][sender], then heads [nChannels][receiver]
    dev::DevWork* fifo = nullptr;       // host-mapped
    uint32_t fifoHead = 0;
    uint32_t* fifoConsumed = nullptr;   // host-mapped
    uint32_t* dBlockArrivals = nullptr;
    uint32_t* abortFlag = nullptr;      // host-mapped
    uint32_t launches = 0;
    dev::DevKernelArgs lastArgs{};
    bool lastLaunched = false;
    int lastProto = dev::kProtoSimple;
  };

  uint64_t* tailOf(int receiver, int channel, int sender);
  uint64_t* headOf(int sender, int channel, int receiver);
  char* bufferOf(int receiver, int channel, int sender);
  void buildRank(int r);
  void launchRank(int r);

  FabricConfig cfg_;
  std::vector<Rank> ranks_;
  size_t connBytes_ = 0;                       // per connection, all protocols
  size_t protoOffset_[dev::kNumProtos] = {};   // each protocol's slots inside a connection buffer
  bool broken_ = false;
};

}  // namespace weft::harness
