// What one block of a kernel launch does, apart from the choice of work runner: copy its items
// from the FIFO to shared memory, free the FIFO slots once every block has its items (the last
// block to arrive publishes fifoConsumedValue and resets the arrival counter), run the items in
// order. Separate from kernel.cu so that CPU tests can run it with a few runners.
#pragma once

#include "device/arch/probe.cuh"
#include "device/coll/run_work.cuh"

namespace weft::dev {

template <typename Shared>
struct KernelSmem {
  DevWork works[kMaxWorksPerChannel];
  ChannelView view;
  Shared proto;
};
using SimpleKernelSmem = KernelSmem<SimpleShared>;
using FlagKernelSmem = KernelSmem<FlagShared>;

WEFT_DEV void resetShared(SimpleShared& sh) {
  for (int g = 0; g < kSimpleMaxGroups; g++)
    for (int d = 0; d < kSimpleReadyDepth; d++) sh.done[g][d] = 0;
  sh.aborted = 0;
}
WEFT_DEV void resetShared(FlagShared& sh) { sh.aborted = 0; }

// Called by every thread of block `block` (a block of NThreads threads); runWork(const DevWork*,
// const WorkEnvT<Shared>&) runs one item.
template <int NThreads, typename Shared, typename RunWork>
WEFT_DEV void kernelBody(const DevKernelArgs& args, int block, KernelSmem<Shared>& smem, RunWork runWork) {
  probe(kProbeStart);
  const DevKernelArgs::Block blk = args.blocks[block];
  const int nWorks = blk.count < kMaxWorksPerChannel ? blk.count : kMaxWorksPerChannel;
  const int tid = arch::threadId();

  constexpr int kWords = sizeof(DevWork) / sizeof(uint64_t);
  static_assert(sizeof(DevWork) % sizeof(uint64_t) == 0, "DevWork is copied in 8-byte words");
  if (args.worksInline) {
    // Kernel parameters (the entry takes them as __grid_constant__, so this reads them in place).
    for (int i = tid; i < nWorks * kWords; i += NThreads) {
      const int w = i / kWords;
      reinterpret_cast<uint64_t*>(&smem.works[w])[i % kWords] =
          reinterpret_cast<const uint64_t*>(&args.inlineWorks[blk.first + (uint32_t)w])[i % kWords];
    }
  } else {
    // 8-byte volatile loads: the FIFO is host memory rewritten between launches, so nothing may
    // come from a cache.
    for (int i = tid; i < nWorks * kWords; i += NThreads) {
      const int w = i / kWords;
      const DevWork* src = &args.works[(blk.first + (uint32_t)w) & args.worksMask];
      reinterpret_cast<uint64_t*>(&smem.works[w])[i % kWords] =
          arch::ldN<8>(reinterpret_cast<const uint64_t*>(src) + i % kWords);
    }
  }
  // The channel view (abi.h: ChannelView): words of DevComm's first fields and of the channel.
  constexpr int kHeadWords = (int)(offsetof(DevComm, channels) / sizeof(uint64_t));
  constexpr int kViewWords = (int)(sizeof(ChannelView) / sizeof(uint64_t));
  if (tid < kViewWords) {
    const uint64_t* src = tid < kHeadWords
                              ? reinterpret_cast<const uint64_t*>(args.comm) + tid
                              : reinterpret_cast<const uint64_t*>(&args.comm->channels[blk.channel]) + (tid - kHeadWords);
    reinterpret_cast<uint64_t*>(&smem.view)[tid] = *src;
  }
  probe(kProbeWorksCopied);
  // Launched with programmatic dependence (NCCL_WEFT_PDL), the copies above overlapped the previous
  // kernel's end; what follows reads state that kernel wrote (steps, the arrival counter).
  arch::waitPreviousGrid();
  probe(kProbeGridWaited);
  arch::allowNextGrid();
  arch::initBlock();
  if (tid == 0) resetShared(smem.proto);
  arch::syncBlock();

  // Every block has its items: the last one to arrive frees the FIFO slots for the host.
  if (tid == 0 && args.blockArrivals) {
    if (arch::atomicAddAcqRelGpu(args.blockArrivals, 1) == args.nBlocks - 1) {
      arch::stRelaxedGpu(args.blockArrivals, 0);
      if (args.fifoConsumed) arch::stReleaseSys(args.fifoConsumed, args.fifoConsumedValue);
    }
  }

  // A graph replay's block says it runs (abi.h: replayStamps); `| 1` keeps a start time at 0 apart.
  if (kDiagnosticHooks && tid == 0 && args.replayStamps)
    arch::stRelaxedSys(&args.replayStamps[blk.channel], arch::globalTimerNs() | 1);

  const WorkEnvT<Shared> env{&smem.view, &smem.proto};
  probe(kProbeItemStart);
  for (int i = 0; i < nWorks; i++) {
    runWork(&smem.works[i], env);
    arch::syncBlock();  // the next item reloads the connections' steps this one saved
  }
  if (kDiagnosticHooks && tid == 0 && args.replayStamps) arch::stRelaxedSys(&args.replayStamps[blk.channel], 0);
  probe(kProbeItemsDone);
}

template <typename RunWork>
WEFT_DEV void simpleKernelBody(const DevKernelArgs& args, int block, SimpleKernelSmem& smem, RunWork runWork) {
  kernelBody<kSimpleThreads>(args, block, smem, runWork);
}

}  // namespace weft::dev
