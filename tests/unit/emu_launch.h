// What the CPU tests of the device code share (simple_proto_test.cc, flag_proto_test.cc,
// tree_emu_test.cc; direct_emu_test.cc through emu_dispatch.h): an emulated kernel launch, where
// the arch layer's host emulation (device/arch/host_emu.h) turns every GPU thread of a block into
// an OS thread; the host's work FIFO; and a ring communicator whose connections live in host
// memory, laid out as the P2P transport lays them (buffers and tails with the receiver, heads
// with the sender).
// Include it after defining WEFT_ARCH_HOST_EMULATION.
#pragma once

#if !defined(WEFT_ARCH_HOST_EMULATION)
#error "emu_launch.h runs the device code on the CPU: define WEFT_ARCH_HOST_EMULATION first"
#endif
#include "device/kernel_body.cuh"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace weft::dev::emutest {

// Host memory standing in for a device allocation (128-byte aligned, as cudaMalloc's are at least).
struct AlignedBytes {
  explicit AlignedBytes(size_t n) : raw(n + 256, 0) {}
  char* get() { return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw.data()) + 127) & ~uintptr_t(127)); }
  std::vector<char> raw;
};

using Works = std::vector<std::vector<std::vector<DevWork>>>;  // [rank][channel]: items in order

// How long blocks may take to leave once the abort flag is raised before the test calls it a hang.
constexpr double kLeaveSeconds = 30;

// One launch on every rank: args[r].nBlocks blocks of NThreads emulated threads each; thread t of
// block b runs body(args[r], b, smem), smem being the block's shared memory. If the blocks have
// not all finished after `seconds`, *abortFlag is raised; blocks that then do not leave within
// kLeaveSeconds abort the process. Returns whether the blocks finished before the deadline.
template <int NThreads, typename Smem, typename Body>
bool runBlocks(const std::vector<DevKernelArgs>& args, uint32_t* abortFlag, double seconds, const Body& body) {
  std::vector<std::unique_ptr<arch::EmuBlock>> blocks;
  std::vector<std::unique_ptr<Smem>> smems;
  std::vector<std::thread> threads;
  std::atomic<int> running{0};
  for (const DevKernelArgs& a : args)
    for (uint32_t b = 0; b < a.nBlocks; b++) {
      blocks.push_back(std::make_unique<arch::EmuBlock>(NThreads));
      smems.push_back(std::make_unique<Smem>());
      arch::EmuBlock* blk = blocks.back().get();
      Smem* smem = smems.back().get();
      const DevKernelArgs* ap = &a;
      for (int t = 0; t < NThreads; t++) {
        running++;
        threads.emplace_back([&running, &body, ap, b, t, blk, smem] {
          arch::threadIdx.x = t;
          arch::threadIdx.block = blk;
          body(*ap, (int)b, *smem);
          running--;
        });
      }
    }
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  bool finished = true;
  while (running > 0) {
    if (finished && elapsed() > seconds) {
      finished = false;
      __atomic_store_n(abortFlag, 1u, __ATOMIC_RELAXED);  // every wait gives up; blocks leave
      start = std::chrono::steady_clock::now();
      seconds = kLeaveSeconds;
    } else if (!finished && elapsed() > seconds) {
      std::fprintf(stderr, "blocks did not leave after the abort flag\n");
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& t : threads) t.join();
  return finished;
}

// Every rank's work FIFO as the host fills it: 64 slots, starting near the wrap so that
// successive launches wrap it, and the FIFO-consumed protocol (fifoConsumed, blockArrivals).
class WorkFifos {
 public:
  explicit WorkFifos(int nRanks)
      : fifo_(nRanks, std::vector<DevWork>(kSlots)), head_(nRanks, 60), consumed_(nRanks, 0), arrivals_(nRanks, 0) {}

  // Rank r's arguments for one launch: works[c], channel c's items, go through r's FIFO to one
  // block per channel with items.
  DevKernelArgs push(int r, DevComm* comm, const std::vector<std::vector<DevWork>>& works) {
    DevKernelArgs a{};
    a.comm = comm;
    a.works = fifo_[r].data();
    a.worksMask = kSlots - 1;
    a.fifoConsumedValue = ++launches_;
    a.fifoConsumed = &consumed_[r];
    a.blockArrivals = &arrivals_[r];
    size_t items = 0;
    for (const auto& list : works) items += list.size();
    EXPECT_LE(items, (size_t)kSlots) << "rank " << r << ": more items than FIFO slots in one launch";
    for (size_t c = 0; c < works.size(); c++) {
      if (works[c].empty()) continue;
      a.blocks[a.nBlocks] = DevKernelArgs::Block{head_[r], (uint16_t)works[c].size(), (uint8_t)c, 0};
      for (const DevWork& w : works[c]) fifo_[r][head_[r]++ & (kSlots - 1)] = w;
      a.nBlocks++;
    }
    return a;
  }

  // After the launch: every rank that had blocks released its FIFO slots and reset its counter.
  void expectConsumed(const std::vector<DevKernelArgs>& args) const {
    for (size_t r = 0; r < args.size(); r++) {
      if (args[r].nBlocks == 0) continue;
      EXPECT_EQ(consumed_[r], args[r].fifoConsumedValue) << "rank " << r << ": FIFO slots not released";
      EXPECT_EQ(arrivals_[r], 0u) << "rank " << r << ": arrival counter not reset";
    }
  }

 private:
  static constexpr uint32_t kSlots = 64;
  std::vector<std::vector<DevWork>> fifo_;
  std::vector<uint32_t> head_;
  std::vector<uint32_t> consumed_, arrivals_;
  uint32_t launches_ = 0;
};

// n ranks on nCh rings (ring c: ranks in order, reversed on odd channels) with a connection
// between every ordered pair of ranks on every channel; stepBytes[p] > 0 gives each connection
// protocol p's buffer of kSteps steps. Every connection starts at step firstStep.
class EmuRingComm {
 public:
  EmuRingComm(int n, int nCh, const std::array<int, kNumProtos>& stepBytes, uint64_t firstStep = 0)
      : n_(n),
        nCh_(nCh),
        comms_(n),
        peers_(n),
        rings_(nCh),
        counters_(size_t(2 * kCounterLineWords) * n * n * nCh, firstStep),
        fifos_(n) {
    for (int c = 0; c < nCh; c++)
      for (int i = 0; i < n; i++) rings_[c].push_back(c % 2 ? n - 1 - i : i);
    for (int r = 0; r < n; r++) {
      comms_[r] = std::make_unique<DevComm>();
      DevComm& d = *comms_[r];
      d = DevComm{};
      d.rank = r;
      d.nRanks = n;
      d.nChannels = nCh;
      d.abortFlag = &abortFlag_;
      peers_[r].resize(nCh);
      for (int c = 0; c < nCh; c++) {
        peers_[r][c].assign(n, DevPeer{});
        int pos = 0;
        for (int i = 0; i < n; i++)
          if (rings_[c][i] == r) pos = i;
        d.channels[c].ring.prev = rings_[c][(pos - 1 + n) % n];
        d.channels[c].ring.next = rings_[c][(pos + 1) % n];
        d.channels[c].ring.index = pos;
        d.channels[c].ring.userRanks = rings_[c].data();
        d.channels[c].peers = peers_[r][c].data();
      }
    }
    for (int c = 0; c < nCh; c++)
      for (int s = 0; s < n; s++)
        for (int r = 0; r < n; r++) {
          if (s == r) continue;
          uint64_t* tail = &counters_[((size_t(c) * n + s) * n + r) * 2 * kCounterLineWords];
          ConnInfo& snd = peers_[s][c][r].send;
          ConnInfo& rcv = peers_[r][c][s].recv;
          for (int p = 0; p < kNumProtos; p++) {
            if (stepBytes[p] <= 0) continue;
            buffers_.emplace_back(size_t(kSteps) * stepBytes[p]);
            snd.buffs[p] = rcv.buffs[p] = buffers_.back().get();
            snd.stepBytes[p] = rcv.stepBytes[p] = stepBytes[p];
          }
          snd.tail = rcv.tail = tail;
          snd.head = rcv.head = tail + kCounterLineWords;  // each counter starts a line (abi.h)
          snd.step = rcv.step = firstStep;
        }
  }

  int nRanks() const { return n_; }
  int nChannels() const { return nCh_; }
  void setAbort() { __atomic_store_n(&abortFlag_, 1u, __ATOMIC_RELAXED); }

  // One launch of kernelBody<NThreads> on every rank that has items (works[rank][channel]), through
  // the work FIFOs, each item run by runWork(const DevWork*, const WorkEnvT<Shared>&). False if it
  // did not finish in `seconds` (see runBlocks). Also checks the FIFO-consumed protocol.
  template <int NThreads, typename Shared, typename RunWork>
  bool launch(const Works& works, double seconds, RunWork runWork) {
    std::vector<DevKernelArgs> args(n_);
    for (int r = 0; r < n_; r++) args[r] = fifos_.push(r, comms_[r].get(), works[r]);
    const bool finished = runBlocks<NThreads, KernelSmem<Shared>>(
        args, &abortFlag_, seconds,
        [runWork](const DevKernelArgs& a, int b, KernelSmem<Shared>& smem) { kernelBody<NThreads>(a, b, smem, runWork); });
    fifos_.expectConsumed(args);
    return finished;
  }

  // Both ends of every link agree on the step, and head says every step was consumed. The tail
  // moves only with Simple steps: with tailExact it must equal the step, else it may lag (never lead).
  std::string checkLinks(bool tailExact) const {
    for (int c = 0; c < nCh_; c++)
      for (int s = 0; s < n_; s++)
        for (int r = 0; r < n_; r++) {
          if (s == r) continue;
          const ConnInfo& snd = peers_[s][c][r].send;
          const ConnInfo& rcv = peers_[r][c][s].recv;
          if (snd.step != rcv.step || *snd.head != snd.step || *snd.tail > snd.step || (tailExact && *snd.tail != snd.step))
            return "link " + std::to_string(s) + "->" + std::to_string(r) + " ch " + std::to_string(c) + ": send.step " +
                   std::to_string(snd.step) + " recv.step " + std::to_string(rcv.step) + " tail " +
                   std::to_string(*snd.tail) + " head " + std::to_string(*snd.head);
        }
    return "";
  }

  uint64_t step(int c, int s, int r) const { return peers_[s][c][r].send.step; }
  // Rank r's table entry for peer p on channel c (tests that reroute a link).
  DevPeer& devPeer(int r, int c, int p) { return peers_[r][c][p]; }

  // The symmetric collectives' barrier memory (abi.h DevSymSignals): rank r's at base0 + r * stride.
  void setSymSignals(DevSymSignals* base0, uint64_t stride) {
    for (auto& d : comms_) {
      d->symSignals = base0;
      d->symSignalStride = stride;
    }
  }

  // Zero-copy (algo/p2p_direct.cuh): sender s's slots of receiver r's registrations on channel c,
  // and how many parts receiver r took directly from sender s there.
  void setSendRegs(int c, int s, int r, const DevRegSlot* slots) { peers_[s][c][r].sendRegs = slots; }
  uint64_t directParts(int c, int s, int r) const { return peers_[r][c][s].recv.tail[kDirectCountWord]; }

  uint64_t totalSteps() const {
    uint64_t t = 0;
    for (int r = 0; r < n_; r++)
      for (int c = 0; c < nCh_; c++)
        for (int p = 0; p < n_; p++) t += peers_[r][c][p].send.step;
    return t;
  }

 private:
  int n_, nCh_;
  std::vector<std::unique_ptr<DevComm>> comms_;
  std::vector<std::vector<std::vector<DevPeer>>> peers_;  // [rank][channel][peer]
  std::vector<std::vector<int32_t>> rings_;
  std::vector<uint64_t> counters_;
  std::vector<AlignedBytes> buffers_;
  WorkFifos fifos_;
  uint32_t abortFlag_ = 0;
};

// SendRecv all-to-all, self included, on n ranks and nCh channels: rank r's input bytes
// [to * count, +count) go to rank `to`'s output bytes [r * count, +count). The buffers are
// shifted by sendShift and recvShift bytes from 128-byte alignment; chunkElems is the items'
// chunk (0: the protocol's).
class AllToAll {
 public:
  AllToAll(int n, int nCh, uint64_t count, int sendShift, int recvShift, uint32_t chunkElems)
      : n_(n), count_(count), sendShift_(sendShift), recvShift_(recvShift),
        works(n, std::vector<std::vector<DevWork>>(nCh)) {
    for (int r = 0; r < n; r++) {
      in_.emplace_back(n * count + 64);
      out_.emplace_back(n * count + 64);
      for (uint64_t i = 0; i < n * count + 64; i++) in_[r].get()[i] = char(r * 31 + i * 7);
    }
    for (int r = 0; r < n; r++)
      for (int d = 0; d < n; d++) {
        const int to = (r + d) % n, from = (r - d + n) % n;
        for (int c = 0; c < nCh; c++) {
          const ElemRange part = channelPart(count, nCh, c, 1);
          DevWork w{};
          w.func = kFuncSendRecv;
          w.proto = kProtoSimple;  // flag protocol tests set their own
          w.dataType = kUint8;
          w.sendBuff = in_[r].get() + sendShift + to * count;
          w.recvBuff = out_[r].get() + recvShift + from * count;
          w.sendPeer = to;
          w.recvPeer = from;
          w.chanOffset = w.recvOffset = part.offset;
          w.chanCount = w.recvCount = part.count;
          w.chunkElems = chunkElems;
          works[r][c].push_back(w);
        }
      }
  }

  // "" when every rank received every peer's bytes; else the first wrong byte.
  std::string check() {
    for (int r = 0; r < n_; r++)
      for (int from = 0; from < n_; from++)
        for (uint64_t i = 0; i < count_; i++)
          if (out_[r].get()[recvShift_ + from * count_ + i] != in_[from].get()[sendShift_ + r * count_ + i])
            return "rank " + std::to_string(r) + " from " + std::to_string(from) + " byte " + std::to_string(i);
    return "";
  }

 private:
  int n_;
  uint64_t count_;
  int sendShift_, recvShift_;
  std::vector<AlignedBytes> in_, out_;

 public:
  Works works;
};

}  // namespace weft::dev::emutest
