#include "harness_fabric.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "device/kernel_api.h"

namespace weft::harness {

using dev::kSteps;

Fabric::Fabric(const FabricConfig& cfg) : cfg_(cfg), ranks_(cfg.nRanks) {
  const int n = cfg_.nRanks;
  if (cfg_.rings.empty()) {
    for (int c = 0; c < cfg_.nChannels; c++) {
      std::vector<int> ring(n);
      for (int i = 0; i < n; i++) ring[i] = (c % 2 == 0) ? i : n - 1 - i;
      std::vector<int> rotated(n);
      for (int i = 0; i < n; i++) rotated[i] = ring[(i + c) % n];
      cfg_.rings.push_back(rotated);
    }
  }
  // Peer access between every pair of devices in use.
  for (int a = 0; a < cfg_.nGpus; a++)
    for (int b = 0; b < cfg_.nGpus; b++) {
      if (a == b) continue;
      int can = 0;
      HARNESS_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can) {
        std::fprintf(stderr, "devices %d and %d cannot access each other: the harness needs P2P\n", a, b);
        std::exit(2);
      }
      HARNESS_CUDA(cudaSetDevice(a));
      cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else HARNESS_CUDA(e);
    }
  const uint32_t steps[dev::kNumProtos] = {cfg_.llStepBytes, cfg_.ll128StepBytes, cfg_.stepBytes};
  for (int p : {dev::kProtoLL, dev::kProtoLL128, dev::kProtoSimple}) {
    protoOffset_[p] = connBytes_;
    connBytes_ += (size_t(kSteps) * steps[p] + 4095) / 4096 * 4096;
  }
  for (int r = 0; r < n; r++) {
    Rank& R = ranks_[r];
    R.rank = r;
    R.device = r % cfg_.nGpus;
    HARNESS_CUDA(cudaSetDevice(R.device));
    HARNESS_CUDA(cudaStreamCreateWithFlags(&R.stream, cudaStreamNonBlocking));
    HARNESS_CUDA(cudaMalloc(&R.connBuffers, connBytes_ * cfg_.nChannels * n));
    HARNESS_CUDA(cudaMemset(R.connBuffers, 0, connBytes_ * cfg_.nChannels * n));  // LL flags start at 0
    size_t counterBytes = sizeof(uint64_t) * dev::kCounterLineWords * 2 * cfg_.nChannels * n;
    HARNESS_CUDA(cudaMalloc(&R.counters, counterBytes));
    HARNESS_CUDA(cudaMemset(R.counters, 0, counterBytes));
    HARNESS_CUDA(cudaMalloc(&R.dComm, sizeof(dev::DevComm)));
    HARNESS_CUDA(cudaMalloc(&R.dUserRanks, sizeof(int32_t) * cfg_.nChannels * n));
    R.dPeers.resize(cfg_.nChannels);
    for (auto& p : R.dPeers) HARNESS_CUDA(cudaMalloc(&p, sizeof(dev::DevPeer) * n));
    HARNESS_CUDA(cudaMalloc(&R.dBlockArrivals, sizeof(uint32_t)));
    HARNESS_CUDA(cudaMemset(R.dBlockArrivals, 0, sizeof(uint32_t)));
    HARNESS_CUDA(cudaHostAlloc(&R.fifo, sizeof(dev::DevWork) * kFifoSize, cudaHostAllocMapped | cudaHostAllocPortable));
    HARNESS_CUDA(cudaHostAlloc(&R.fifoConsumed, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    HARNESS_CUDA(cudaHostAlloc(&R.abortFlag, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    *R.fifoConsumed = 0;
    *R.abortFlag = 0;
  }
  for (int r = 0; r < n; r++) buildRank(r);
  for (int r = 0; r < n; r++) {
    HARNESS_CUDA(cudaSetDevice(ranks_[r].device));
    HARNESS_CUDA(cudaDeviceSynchronize());
  }
}

Fabric::~Fabric() {
  for (Rank& R : ranks_) {
    cudaSetDevice(R.device);
    cudaStreamSynchronize(R.stream);
    cudaStreamDestroy(R.stream);
    cudaFree(R.connBuffers);
    cudaFree(R.counters);
    cudaFree(R.dComm);
    cudaFree(R.dUserRanks);
    for (auto* p : R.dPeers) cudaFree(p);
    cudaFree(R.dBlockArrivals);
    cudaFreeHost(R.fifo);
    cudaFreeHost(R.fifoConsumed);
    cudaFreeHost(R.abortFlag);
  }
}

uint64_t* Fabric::tailOf(int receiver, int channel, int sender) {
  // Each counter starts a line of kCounterLineWords words (abi.h).
  return ranks_[receiver].counters + (size_t(channel) * cfg_.nRanks + sender) * dev::kCounterLineWords;
}
uint64_t* Fabric::headOf(int sender, int channel, int receiver) {
  return ranks_[sender].counters +
         (size_t(cfg_.nChannels) * cfg_.nRanks + size_t(channel) * cfg_.nRanks + receiver) * dev::kCounterLineWords;
}
char* Fabric::bufferOf(int receiver, int channel, int sender) {
  return ranks_[receiver].connBuffers + (size_t(channel) * cfg_.nRanks + sender) * connBytes_;
}

void Fabric::buildRank(int r) {
  const int n = cfg_.nRanks;
  Rank& R = ranks_[r];
  HARNESS_CUDA(cudaSetDevice(R.device));
  dev::DevComm h{};
  h.rank = r;
  h.nRanks = n;
  h.nChannels = cfg_.nChannels;
  uint32_t* abortDev = nullptr;
  HARNESS_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&abortDev), R.abortFlag, 0));
  h.abortFlag = abortDev;
  std::vector<int32_t> userRanks(size_t(cfg_.nChannels) * n);
  for (int c = 0; c < cfg_.nChannels; c++) {
    const std::vector<int>& ring = cfg_.rings[c];
    int pos = 0;
    for (int i = 0; i < n; i++) {
      userRanks[size_t(c) * n + i] = ring[i];
      if (ring[i] == r) pos = i;
    }
    h.channels[c].ring.prev = ring[(pos - 1 + n) % n];
    h.channels[c].ring.next = ring[(pos + 1) % n];
    h.channels[c].ring.index = pos;
    h.channels[c].ring.userRanks = R.dUserRanks + size_t(c) * n;
    h.channels[c].peers = R.dPeers[c];
    std::vector<dev::DevPeer> peers(n);
    for (int p = 0; p < n; p++) {
      if (p == r) continue;
      const uint32_t steps[dev::kNumProtos] = {cfg_.llStepBytes, cfg_.ll128StepBytes, cfg_.stepBytes};
      dev::ConnInfo& s = peers[p].send;
      dev::ConnInfo& v = peers[p].recv;
      for (int q = 0; q < dev::kNumProtos; q++) {
        s.buffs[q] = bufferOf(p, c, r) + protoOffset_[q];
        s.stepBytes[q] = (int32_t)steps[q];
        v.buffs[q] = bufferOf(r, c, p) + protoOffset_[q];
        v.stepBytes[q] = (int32_t)steps[q];
      }
      s.tail = tailOf(p, c, r);
      s.head = headOf(r, c, p);
      v.tail = tailOf(r, c, p);
      v.head = headOf(p, c, r);
    }
    HARNESS_CUDA(cudaMemcpy(R.dPeers[c], peers.data(), sizeof(dev::DevPeer) * n, cudaMemcpyHostToDevice));
  }
  HARNESS_CUDA(cudaMemcpy(R.dUserRanks, userRanks.data(), sizeof(int32_t) * userRanks.size(), cudaMemcpyHostToDevice));
  HARNESS_CUDA(cudaMemcpy(R.dComm, &h, sizeof(h), cudaMemcpyHostToDevice));
}

void Fabric::setAbort(int rank, uint32_t value) {
  reinterpret_cast<volatile uint32_t*>(ranks_[rank].abortFlag)[0] = value;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void Fabric::launchRank(int r) {
  Rank& R = ranks_[r];
  if (!R.lastLaunched) return;
  HARNESS_CUDA(cudaSetDevice(R.device));
  R.lastArgs.fifoConsumedValue = ++R.launches;
  void* params[] = {&R.lastArgs};
  const dev::Proto proto = (dev::Proto)R.lastProto;
  if (!dev::kernelFunction(proto)) {
    std::fprintf(stderr, "harness: protocol %d has no kernel in this build\n", R.lastProto);
    std::exit(2);
  }
  HARNESS_CUDA(cudaLaunchKernel(dev::kernelFunction(proto), dim3(R.lastArgs.nBlocks), dim3(dev::kernelThreads(proto)),
                                params, dev::kernelDynamicSmem(proto), R.stream));
}

void Fabric::launchAsync(const LaunchWorks& works) {
  for (int r = 0; r < cfg_.nRanks; r++) {
    Rank& R = ranks_[r];
    dev::DevKernelArgs& a = R.lastArgs;
    a = dev::DevKernelArgs{};
    a.comm = R.dComm;
    void* mapped = nullptr;
    HARNESS_CUDA(cudaHostGetDevicePointer(&mapped, R.fifo, 0));
    a.works = static_cast<const dev::DevWork*>(mapped);
    a.worksMask = kFifoSize - 1;
    HARNESS_CUDA(cudaHostGetDevicePointer(&mapped, R.fifoConsumed, 0));
    a.fifoConsumed = static_cast<volatile uint32_t*>(mapped);
    a.blockArrivals = R.dBlockArrivals;
    uint32_t nBlocks = 0;
    for (int c = 0; c < (int)works[r].size(); c++) {
      const auto& list = works[r][c];
      if (list.empty()) continue;
      if (list.size() > (size_t)dev::kMaxWorksPerChannel) {
        std::fprintf(stderr, "harness bug: %zu items on one channel\n", list.size());
        std::exit(2);
      }
      if (nBlocks == 0) R.lastProto = list.front().proto;
      a.blocks[nBlocks].first = R.fifoHead;
      a.blocks[nBlocks].count = (uint16_t)list.size();
      a.blocks[nBlocks].channel = (uint8_t)c;
      for (const auto& w : list) R.fifo[R.fifoHead++ & (kFifoSize - 1)] = w;
      nBlocks++;
    }
    a.nBlocks = nBlocks;
    R.lastLaunched = nBlocks > 0;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);  // FIFO stores before the launches
  for (int r = 0; r < cfg_.nRanks; r++) launchRank(r);
}

void Fabric::relaunch() {
  for (int r = 0; r < cfg_.nRanks; r++) launchRank(r);
}

bool Fabric::waitAll(double timeoutSec, std::string* why) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  bool timedOut = false;
  for (;;) {
    bool all = true;
    for (Rank& R : ranks_) {
      HARNESS_CUDA(cudaSetDevice(R.device));
      cudaError_t e = cudaStreamQuery(R.stream);
      if (e == cudaErrorNotReady) all = false;
      else HARNESS_CUDA(e);
    }
    if (all) break;
    if (!timedOut && elapsed() > timeoutSec) {
      timedOut = true;
      for (int r = 0; r < cfg_.nRanks; r++) setAbort(r, 1);
      start = std::chrono::steady_clock::now();
      timeoutSec = 10;  // the kernels must now exit on their own
      continue;
    }
    if (timedOut && elapsed() > timeoutSec) {
      std::fprintf(stderr, "FATAL: kernels did not exit 10 s after the abort flag was raised\n");
      std::exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (timedOut) {
    broken_ = true;
    if (why) *why = "timed out (hang); kernels left after the abort flag";
    return false;
  }
  for (Rank& R : ranks_) {
    if (R.lastLaunched && *reinterpret_cast<volatile uint32_t*>(R.fifoConsumed) != R.lastArgs.fifoConsumedValue) {
      if (why) *why = "fifoConsumed not published by the last block";
      return false;
    }
  }
  return true;
}

bool Fabric::launch(const LaunchWorks& works, double timeoutSec, std::string* why) {
  launchAsync(works);
  return waitAll(timeoutSec, why);
}

}  // namespace weft::harness
