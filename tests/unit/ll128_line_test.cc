// LL128 (and LL) step bookkeeping when the warps of a group do not run in lockstep: on a GPU the
// warps of a block start together but are scheduled independently, and a send-only group has no
// barrier of its own before finish(). Here the warps of the sending block other than warp 0 are
// held back until warp 0 is done, which the host emulation (device/arch/host_emu.h) can do
// deterministically. Before the fix, warp 0 saved the advanced step before the late warps read
// it, so they wrote their lines into the next slot with the next flag: the receiver waited for
// them forever (caught here as a launch that needs the abort flag) and the step counters of the
// two ends disagreed afterwards.
#define WEFT_ARCH_HOST_EMULATION 1
#include "device/kernel_dispatch.cuh"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace weft::dev {
namespace {

constexpr int kStepBytes[kNumProtos] = {2048, 4096, (int)kSimpleMinStepBytes};

struct Aligned {
  explicit Aligned(size_t n) : raw(n + 256, 0) {}
  char* get() { return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw.data()) + 127) & ~uintptr_t(127)); }
  std::vector<char> raw;
};

// Two ranks, one channel, rank 0 -> rank 1 only.
class TwoRanks {
 public:
  TwoRanks() : bufs_{Aligned(size_t(kSteps) * kStepBytes[0]), Aligned(size_t(kSteps) * kStepBytes[1]),
                     Aligned(size_t(kSteps) * kStepBytes[2])} {
    for (int r = 0; r < 2; r++) {
      comm_[r] = DevComm{};
      comm_[r].rank = r;
      comm_[r].nRanks = 2;
      comm_[r].nChannels = 1;
      comm_[r].abortFlag = &abort_;
      comm_[r].channels[0].peers = peers_[r];
    }
    ConnInfo& snd = peers_[0][1].send;
    ConnInfo& rcv = peers_[1][0].recv;
    for (int p = 0; p < kNumProtos; p++) {
      snd.buffs[p] = rcv.buffs[p] = bufs_[p].get();
      snd.stepBytes[p] = rcv.stepBytes[p] = kStepBytes[p];
    }
    snd.tail = rcv.tail = &counters_[0][0];
    snd.head = rcv.head = &counters_[1][0];
  }

  // One launch: rank 0 sends `in` (n bytes) to rank 1's `out`. Rank 0's warps other than warp 0
  // start their item only after warp 0 has left it or lagMs has passed. False if the abort flag
  // had to end the launch.
  template <typename P>
  bool sendOnce(const char* in, char* out, uint64_t n, int lagMs) {
    constexpr int kThreads = P::kId == kProtoLL ? kLLThreads : kLL128Threads;
    using Smem = KernelSmem<typename P::Shared>;
    DevWork w[2] = {};
    for (int r = 0; r < 2; r++) {
      w[r].func = kFuncSendRecv;
      w[r].proto = (uint8_t)P::kId;
      w[r].dataType = kUint8;
      w[r].sendPeer = r == 0 ? 1 : -1;
      w[r].recvPeer = r == 0 ? -1 : 0;
      w[r].sendBuff = in;
      w[r].recvBuff = out;
      w[r].chanCount = r == 0 ? n : 0;
      w[r].recvCount = r == 0 ? 0 : n;
    }
    std::atomic<bool> warp0Done{false};
    std::vector<std::unique_ptr<arch::EmuBlock>> blocks;
    std::vector<std::unique_ptr<Smem>> smems;
    std::vector<std::thread> threads;
    std::atomic<int> running{0};
    DevKernelArgs args[2];
    for (int r = 0; r < 2; r++) {
      args[r] = DevKernelArgs{};
      args[r].comm = &comm_[r];
      args[r].works = &w[r];
      args[r].worksMask = 0;
      args[r].nBlocks = 1;
      args[r].blocks[0] = DevKernelArgs::Block{0, 1, 0, 0};
      blocks.push_back(std::make_unique<arch::EmuBlock>(kThreads));
      smems.push_back(std::make_unique<Smem>());
    }
    // Threads start only once both ranks' blocks exist: a push_back moves the vectors' storage,
    // which running threads read (TSan saw it).
    for (int r = 0; r < 2; r++) {
      for (int t = 0; t < kThreads; t++) {
        running++;
        threads.emplace_back([&, r, t] {
          arch::threadIdx.x = t;
          arch::threadIdx.block = blocks[r].get();
          kernelBody<kThreads>(args[r], 0, *smems[r], [&](const DevWork* item, const WorkEnvT<typename P::Shared>& env) {
            if (r == 0 && arch::warpId() > 0) {
              auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(lagMs);
              while (!warp0Done && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            dispatch::runWork<P>(item, env);
            if (r == 0 && arch::threadId() == 0) warp0Done = true;
          });
          running--;
        });
      }
    }
    bool finished = true;
    auto start = std::chrono::steady_clock::now();
    while (running > 0) {
      if (finished && std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) {
        finished = false;
        __atomic_store_n(&abort_, 1u, __ATOMIC_RELAXED);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (auto& t : threads) t.join();
    return finished;
  }

  uint64_t sendStep() const { return peers_[0][1].send.step; }
  uint64_t recvStep() const { return peers_[1][0].recv.step; }
  uint64_t head() const { return counters_[1][0]; }

 private:
  DevComm comm_[2];
  DevPeer peers_[2][2] = {};
  Aligned bufs_[kNumProtos];
  // A whole counter line each, as the transports give: the LL sender also stores its step sizes
  // in its head line (abi.h kStepSizeWord); one word each ran over into the test's stack.
  uint64_t counters_[2][kCounterLineWords] = {};
  uint32_t abort_ = 0;
};

template <typename P>
void lateWarpsOfASendOnlyGroup() {
  TwoRanks link;
  // Every warp of the sender has lines in the step (LL128: 2 lines per emulated warp segment).
  const uint64_t n = P::kId == kProtoLL ? 1000 : 1900;
  std::vector<char> in(n), out(n + 16, 0);
  for (uint64_t round = 0; round < 3; round++) {
    for (uint64_t i = 0; i < n; i++) in[i] = char(i * 7 + round * 13 + 1);
    std::fill(out.begin(), out.end(), 0);
    ASSERT_TRUE(link.sendOnce<P>(in.data(), out.data(), n, 300)) << "round " << round << ": the receiver never saw every line";
    for (uint64_t i = 0; i < n; i++) ASSERT_EQ(out[i], in[i]) << "round " << round << " byte " << i;
    EXPECT_EQ(out[n], 0) << "wrote past the end";
    EXPECT_EQ(link.sendStep(), round + 1);
    EXPECT_EQ(link.recvStep(), round + 1);
    EXPECT_EQ(link.head(), round + 1);
  }
}

TEST(LL128Line, LateWarpsOfASendOnlyGroupUseTheirStep) { lateWarpsOfASendOnlyGroup<LL128Proto>(); }
TEST(LL128Line, LLLateWarpsOfASendOnlyGroupUseTheirStep) { lateWarpsOfASendOnlyGroup<LLProto>(); }

}  // namespace
}  // namespace weft::dev
