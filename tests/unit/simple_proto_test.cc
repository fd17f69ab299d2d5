// The real Simple protocol, ring/SendRecv algorithms and work runners (proto/, algo/, coll/) on
// the CPU: the arch layer's host emulation turns every GPU thread of a block into an OS thread
// (blocks of 8 warps of 4 threads), with named barriers, shared-memory counters and system-scope
// atomics emulated. Ranks' blocks run concurrently and talk through host-memory connections laid
// out as the host engine lays them (buffers and tails with the receiver, heads with the sender).
// Checks results, the step bookkeeping across items and launches (ConnInfo.step == tail == head
// on both ends of every link), freedom from deadlock, and the abort path.
#define WEFT_ARCH_HOST_EMULATION 1
#include "device/kernel_body.cuh"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace weft::dev {
namespace {

constexpr uint32_t kStep = kSimpleMinStepBytes;  // small steps: many slices, wrapping slots

struct AlignedBytes {
  explicit AlignedBytes(size_t n) : raw(n + 64, 0) {}
  char* get() { return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw.data()) + 63) & ~uintptr_t(63)); }
  std::vector<char> raw;
};

class EmuComm {
 public:
  EmuComm(int n, int nCh) : n_(n), nCh_(nCh), comms_(n), peers_(n), rings_(nCh), counters_(size_t(2) * n * n * nCh) {
    for (int c = 0; c < nCh; c++) {
      for (int i = 0; i < n; i++) rings_[c].push_back(c % 2 ? n - 1 - i : i);
    }
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
          buffers_.emplace_back(size_t(kSteps) * kStep);
          char* buf = buffers_.back().get();
          uint64_t* tail = &counters_[((size_t(c) * n + s) * n + r) * 2];
          uint64_t* head = tail + 1;
          ConnInfo& snd = peers_[s][c][r].send;
          snd.buffs[kProtoSimple] = buf;
          snd.stepBytes[kProtoSimple] = kStep;
          snd.tail = tail;
          snd.head = head;
          ConnInfo& rcv = peers_[r][c][s].recv;
          rcv.buffs[kProtoSimple] = buf;
          rcv.stepBytes[kProtoSimple] = kStep;
          rcv.tail = tail;
          rcv.head = head;
        }
  }

  int nRanks() const { return n_; }
  int nChannels() const { return nCh_; }
  void setAbort() { __atomic_store_n(&abortFlag_, 1u, __ATOMIC_RELAXED); }

  // Launches every rank that has items: works[rank][channel] go through the rank's work FIFO
  // (64 slots, so successive launches wrap it) to the kernel body, one emulated block per
  // channel with items. False if it did not finish in time (the abort flag was then raised and
  // every block left). Also checks the FIFO-consumed protocol.
  bool launch(const std::vector<std::vector<std::vector<DevWork>>>& works, double seconds, bool* exitedAfterAbort) {
    std::vector<std::unique_ptr<arch::EmuBlock>> blocks;
    std::vector<std::unique_ptr<SimpleKernelSmem>> smems;
    std::vector<std::thread> threads;
    std::atomic<int> running{0};
    fifo_.resize(n_);
    std::vector<DevKernelArgs> args(n_);
    for (int r = 0; r < n_; r++) {
      fifo_[r].resize(kFifoSlots);
      DevKernelArgs& a = args[r];
      a = DevKernelArgs{};
      a.comm = comms_[r].get();
      a.works = fifo_[r].data();
      a.worksMask = kFifoSlots - 1;
      a.fifoConsumedValue = ++launches_;
      a.fifoConsumed = &consumed_[r];
      a.blockArrivals = &arrivals_[r];
      for (int c = 0; c < nCh_; c++) {
        if (works[r][c].empty()) continue;
        a.blocks[a.nBlocks] = DevKernelArgs::Block{fifoHead_[r], (uint16_t)works[r][c].size(), (uint8_t)c, 0};
        for (const DevWork& w : works[r][c]) fifo_[r][fifoHead_[r]++ & (kFifoSlots - 1)] = w;
        a.nBlocks++;
      }
      for (uint32_t b = 0; b < a.nBlocks; b++) {
        blocks.push_back(std::make_unique<arch::EmuBlock>(kSimpleThreads));
        smems.push_back(std::make_unique<SimpleKernelSmem>());
        arch::EmuBlock* blk = blocks.back().get();
        SimpleKernelSmem* smem = smems.back().get();
        const DevKernelArgs* ap = &args[r];
        for (int t = 0; t < kSimpleThreads; t++) {
          running++;
          threads.emplace_back([&running, ap, b, t, blk, smem] {
            arch::threadIdx.x = t;
            arch::threadIdx.block = blk;
            simpleKernelBody(*ap, (int)b, *smem, [](const DevWork* w, const WorkEnv& env) { runItem(*w, env); });
            running--;
          });
        }
      }
    }
    auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    bool finished = true;
    while (running > 0) {
      if (finished && elapsed() > seconds) {
        finished = false;
        setAbort();
        start = std::chrono::steady_clock::now();
        seconds = 30;
      } else if (!finished && elapsed() > seconds) {
        std::fprintf(stderr, "blocks did not leave after the abort flag\n");
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n_; r++) {
      if (args[r].nBlocks == 0) continue;
      EXPECT_EQ(consumed_[r], args[r].fifoConsumedValue) << "rank " << r << ": FIFO slots not released";
      EXPECT_EQ(arrivals_[r], 0u) << "rank " << r << ": arrival counter not reset";
    }
    if (exitedAfterAbort) *exitedAfterAbort = !finished;
    return finished;
  }

  // Both ends of every link agree: sender's and receiver's step, tail and head.
  std::string checkLinks() const {
    for (int c = 0; c < nCh_; c++)
      for (int s = 0; s < n_; s++)
        for (int r = 0; r < n_; r++) {
          if (s == r) continue;
          const ConnInfo& snd = peers_[s][c][r].send;
          const ConnInfo& rcv = peers_[r][c][s].recv;
          if (snd.step != rcv.step || *snd.tail != snd.step || *snd.head != snd.step)
            return "link " + std::to_string(s) + "->" + std::to_string(r) + " ch " + std::to_string(c) +
                   ": send.step " + std::to_string(snd.step) + " recv.step " + std::to_string(rcv.step) + " tail " +
                   std::to_string(*snd.tail) + " head " + std::to_string(*snd.head);
        }
    return "";
  }

  uint64_t totalSteps() const {
    uint64_t t = 0;
    for (int r = 0; r < n_; r++)
      for (int c = 0; c < nCh_; c++)
        for (int p = 0; p < n_; p++) t += peers_[r][c][p].send.step;
    return t;
  }

 private:
  static void runItem(const DevWork& w, const WorkEnv& env) {
    if (w.func == kFuncSendRecv) return runSendRecv(w, env);
    if (w.func == kFuncBroadcast || w.func == kFuncAllGather) return runRingColl<FnCopy>(w, env);
    if (w.redOp == kRedPreMulSum) return runRingColl<FnPreMulSum<float>>(w, env);
    if (w.redOp == kRedSumPostDiv) return runRingColl<FnSumPostDiv<int32_t>>(w, env);
    return runRingColl<FnSum<float>>(w, env);
  }

  static constexpr uint32_t kFifoSlots = 64;
  int n_, nCh_;
  uint32_t launches_ = 0;
  std::vector<std::vector<DevWork>> fifo_;
  std::vector<uint32_t> fifoHead_ = std::vector<uint32_t>(64, 60);  // starts near the wrap
  uint32_t consumed_[64] = {};
  uint32_t arrivals_[64] = {};
  std::vector<std::unique_ptr<DevComm>> comms_;
  std::vector<std::vector<std::vector<DevPeer>>> peers_;  // [rank][channel][peer]
  std::vector<std::vector<int32_t>> rings_;
  std::vector<uint64_t> counters_;
  std::vector<AlignedBytes> buffers_;
  uint32_t abortFlag_ = 0;
};

using Works = std::vector<std::vector<std::vector<DevWork>>>;

struct Coll {
  Coll(int func, uint64_t count, int root = 0, bool inPlace = false, int redOp = kRedSum, uint64_t chunk = 0)
      : func(func), count(count), root(root), inPlace(inPlace), redOp(redOp), chunk(chunk) {}
  int func;
  uint64_t count;
  int root;
  bool inPlace;
  int redOp;
  uint64_t chunk;  // 0: the recommended chunk
  // Buffers per rank (float for sum/premulsum, int32 for sumpostdiv).
  std::vector<AlignedBytes> in, out;
  std::vector<std::vector<float>> inputs;
};

// Adds a collective's items to works and prepares its buffers (inputs small integers: exact).
void addColl(EmuComm& comm, Coll& k, Works& works, std::mt19937& rng) {
  const int n = comm.nRanks();
  const uint64_t inLen = k.func == kFuncReduceScatter ? n * k.count : k.count;
  const uint64_t outLen = k.func == kFuncAllGather ? n * k.count : k.count;
  for (int r = 0; r < n; r++) {
    k.in.emplace_back(std::max(inLen, outLen) * 4 + 64);
    k.out.emplace_back(std::max(inLen, outLen) * 4 + 64);
    std::vector<float> v(inLen);
    for (auto& x : v) x = float(int(rng() % 21) - 10);
    k.inputs.push_back(v);
    char* inBuf = k.inPlace ? k.out[r].get() + (k.func == kFuncAllGather ? r * k.count * 4 : 0) : k.in[r].get();
    for (uint64_t i = 0; i < inLen; i++) {
      if (k.redOp == kRedSumPostDiv) {
        int32_t x = int32_t(v[i]);
        std::memcpy(inBuf + i * 4, &x, 4);
      } else {
        std::memcpy(inBuf + i * 4, &v[i], 4);
      }
    }
    for (int c = 0; c < comm.nChannels(); c++) {
      ElemRange part = channelPart(k.count, comm.nChannels(), c, 4);
      if (part.count == 0) continue;
      DevWork w{};
      w.func = (uint8_t)k.func;
      w.algo = kAlgoRing;
      w.proto = kProtoSimple;
      w.redOp = (uint8_t)k.redOp;
      w.dataType = k.redOp == kRedSumPostDiv ? kInt32 : kFloat32;
      w.root = k.root;
      w.sendBuff = inBuf;
      char* outBuf = k.inPlace && k.func == kFuncReduceScatter ? inBuf + r * k.count * 4 : k.out[r].get();
      w.recvBuff = k.inPlace && k.func != kFuncReduceScatter ? k.out[r].get() : outBuf;
      w.count = k.count;
      w.chanOffset = part.offset;
      w.chanCount = part.count;
      w.chunkElems = (uint32_t)(k.chunk ? k.chunk : recommendedChunkElems(k.func, n, part.count, 4, kStep));
      w.sendPeer = w.recvPeer = -1;
      if (k.redOp == kRedPreMulSum) {
        float half = 0.5f;
        std::memcpy(&w.redOpArg, &half, 4);
      }
      if (k.redOp == kRedSumPostDiv) w.redOpArg = (uint64_t)n;
      works[r][c].push_back(w);
    }
  }
}

std::string checkColl(const EmuComm& comm, Coll& k) {
  const int n = comm.nRanks();
  for (int r = 0; r < n; r++) {
    const char* out = k.out[r].get() + (k.inPlace && k.func == kFuncReduceScatter ? r * k.count * 4 : 0);
    const uint64_t outLen = k.func == kFuncAllGather ? n * k.count : k.count;
    if (k.func == kFuncReduce && r != k.root) continue;
    for (uint64_t i = 0; i < outLen; i++) {
      double want = 0;
      if (k.func == kFuncBroadcast) want = k.inputs[k.root][i];
      else if (k.func == kFuncAllGather) want = k.inputs[i / k.count][i % k.count];
      else {
        uint64_t j = k.func == kFuncReduceScatter ? r * k.count + i : i;
        for (int q = 0; q < n; q++) want += k.redOp == kRedPreMulSum ? 0.5 * k.inputs[q][j] : k.inputs[q][j];
        if (k.redOp == kRedSumPostDiv) want = double(int32_t(want) / n);
      }
      double got;
      if (k.redOp == kRedSumPostDiv && k.func != kFuncBroadcast && k.func != kFuncAllGather) {
        int32_t x;
        std::memcpy(&x, out + i * 4, 4);
        got = x;
      } else {
        float x;
        std::memcpy(&x, out + i * 4, 4);
        got = x;
      }
      if (got != want)
        return "func " + std::to_string(k.func) + " rank " + std::to_string(r) + " element " + std::to_string(i) +
               ": got " + std::to_string(got) + " want " + std::to_string(want);
    }
  }
  return "";
}

TEST(SimpleProtoEmu, RingCollectivesAcrossLaunches) {
  std::mt19937 rng(11);
  for (int n : {1, 2, 3, 4}) {
    EmuComm comm(n, 2);
    for (int launch = 0; launch < 2; launch++) {
      // Several items per block in one launch: the steps saved by one item feed the next.
      std::vector<Coll> colls = {{kFuncAllReduce, 9001},        {kFuncAllGather, 3001, 0, true},
                                 {kFuncReduceScatter, 2999},    {kFuncBroadcast, 7777, n - 1, launch == 1},
                                 {kFuncReduce, 5003, n / 2},    {kFuncAllReduce, 4099, 0, true, kRedPreMulSum},
                                 {kFuncAllReduce, 1025, 0, false, kRedSumPostDiv, 5},
                                 {kFuncReduceScatter, 1000, 0, true}, {kFuncAllReduce, 1}};
      Works works(n, std::vector<std::vector<DevWork>>(2));
      for (auto& k : colls) addColl(comm, k, works, rng);
      ASSERT_TRUE(comm.launch(works, 60, nullptr)) << "deadlock with " << n << " ranks, launch " << launch;
      for (auto& k : colls) ASSERT_EQ(checkColl(comm, k), "") << n << " ranks, launch " << launch;
      ASSERT_EQ(comm.checkLinks(), "") << n << " ranks";
    }
    if (n > 1) {
      EXPECT_GT(comm.totalSteps(), 0u);
    }
  }
}

TEST(SimpleProtoEmu, SendRecvAllToAllWithSelf) {
  const int n = 3, nCh = 2;
  EmuComm comm(n, nCh);
  const uint64_t count = 5000;  // bytes per pair
  std::vector<AlignedBytes> in, out;
  for (int r = 0; r < n; r++) {
    in.emplace_back(n * count + 64);
    out.emplace_back(n * count + 64);
    for (uint64_t i = 0; i < n * count; i++) in[r].get()[i] = char(r * 31 + i * 7);
  }
  Works works(n, std::vector<std::vector<DevWork>>(nCh));
  for (int r = 0; r < n; r++)
    for (int d = 0; d < n; d++) {
      int to = (r + d) % n, from = (r - d + n) % n;
      for (int c = 0; c < nCh; c++) {
        ElemRange part = channelPart(count, nCh, c, 1);
        DevWork w{};
        w.func = kFuncSendRecv;
        w.proto = kProtoSimple;
        w.dataType = kUint8;
        w.sendBuff = in[r].get() + to * count;
        w.recvBuff = out[r].get() + from * count;
        w.sendPeer = to;
        w.recvPeer = from;
        w.chanOffset = w.recvOffset = part.offset;
        w.chanCount = w.recvCount = part.count;
        w.chunkElems = 1000;
        works[r][c].push_back(w);
      }
    }
  ASSERT_TRUE(comm.launch(works, 60, nullptr));
  for (int r = 0; r < n; r++)
    for (int from = 0; from < n; from++)
      for (uint64_t i = 0; i < count; i++)
        ASSERT_EQ(out[r].get()[from * count + i], in[from].get()[r * count + i]) << r << " " << from << " " << i;
  EXPECT_EQ(comm.checkLinks(), "");
}

TEST(SimpleProtoEmu, AbortEndsAWaitForASilentPeer) {
  EmuComm comm(2, 1);
  AlignedBytes out(1 << 16);
  Works works(2, std::vector<std::vector<DevWork>>(1));
  DevWork w{};
  w.func = kFuncSendRecv;
  w.proto = kProtoSimple;
  w.dataType = kUint8;
  w.sendPeer = -1;
  w.recvPeer = 1;
  w.recvBuff = out.get();
  w.recvCount = 40000;
  w.chunkElems = 8192;
  works[0][0].push_back(w);  // rank 1 never sends
  bool aborted = false;
  EXPECT_FALSE(comm.launch(works, 0.1, &aborted));
  EXPECT_TRUE(aborted);
}

}  // namespace
}  // namespace weft::dev
