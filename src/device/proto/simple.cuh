// The Simple protocol: data travels through the receiver's buffer of kSteps slots; the sender
// publishes tail = step + 1 after a fence, the receiver publishes head = step + 1 once it has
// consumed the slot (ConnInfo in abi.h). Every primitive call moves up to one chunk, cut into
// slices of at most one step (work_math.h: simpleSliceElems), one slot per slice.
//
// Roles inside a group of warps:
//  - data warps move the bytes of each slice (reduce_copy.cuh);
//  - one sync warp (lane 0) waits for the peers' counters, releases each slice to the data warps
//    through a named barrier (bar.arrive: the sync warp never waits there), and once every data
//    warp has counted the slice done in shared memory, fences and publishes tail/head.
// So the fence and the publication of slice s overlap the data movement of slice s+1. The sync
// warp may release kSimpleReadyDepth slices beyond the oldest unpublished one; each depth slot has
// its own barrier id and done counter, which a slot can only reuse after its previous slice was
// completed by all data warps (so the counters never mix two slices).
//
// Abort: while waiting, the sync warp reads comm->abortFlag every kSpinsPerAbortCheck spins. Once
// it is set, waits succeed at once, nothing more is published and data warps skip the copies, but
// the barrier/counter protocol continues unchanged, so every warp leaves the kernel normally.
#pragma once

#include "device/abi.h"
#include "device/arch/probe.cuh"
#include "device/reduce/reduce_copy.cuh"
#include "device/reg_array.h"
#include "device/work_math.h"

namespace weft::dev {

// 512 threads: 15 data warps + the sync warp on NVIDIA. A 17th warp would cost every thread 32
// registers (registers are split over 4 SM partitions: 5 warps on one of them leave 96 each).
// NCCL runs 17 warps (16 copy warps + 1) for Simple collectives and 20 for send/recv, at 96
// registers: the CMake option WEFT_SIMPLE_WARPS builds such a variant for measurements (more than
// 16 warps compiles all device code for 96 registers).
#ifdef WEFT_SIMPLE_WARPS
constexpr int kSimpleWarps = WEFT_SIMPLE_WARPS;
#else
constexpr int kSimpleWarps = arch::kDefaultBlockThreads / arch::kWarpSize;
#endif
constexpr int kSimpleDataWarps = kSimpleWarps - 1;
constexpr int kSimpleThreads = kSimpleWarps * arch::kWarpSize;
constexpr int kSimpleReadyDepth = 2;  // slices released ahead of the data warps (4 measured no faster)
constexpr int kSimpleMaxGroups = 2;
constexpr int kSpinsPerAbortCheck = 1000;
static_assert(kSimpleThreads <= arch::kMaxBlockThreads, "Simple block too large");
static_assert(1 + kSimpleMaxGroups * kSimpleReadyDepth <= arch::kNamedBarriers, "not enough barriers");

// Which role an instance of the primitives serves. kRoleAny: each thread finds out at run time
// (data warp or sync warp), so every field stays live in both roles' code. kRoleSync/kRoleData:
// the caller built one instance per role (SimpleProtoT's SplitRoles), so the data warps' copy
// loops no longer carry the sync warp's counters, pending posts and pointers in their registers.
// ptxas, specialized kernels: SendRecv 240 -> 32 bytes of stack, Ring sums 24 -> 8, Ring copies
// 192 -> 72 (with AllGather and Broadcast in one loop: ring.cuh, ringCopyColl).
enum PrimsRole { kRoleAny, kRoleSync, kRoleData };

// Block-shared state of the protocol (static shared memory of the kernel).
struct SimpleShared {
  uint32_t done[kSimpleMaxGroups][kSimpleReadyDepth];  // per group and depth slot, monotonic
  uint32_t aborted;  // set by any sync warp that saw the abort flag
  uint32_t direct[kSimpleMaxGroups][2];  // per group: zero-copy decision (algo/p2p_direct.cuh), two halves
};

// Warps serving one transfer direction (or both, for collectives).
struct SimpleGroup {
  int index;  // selects done counters and barrier ids
  int firstWarp;
  int nDataWarps;
  int syncWarp;
};

// Collectives and one-sided SendRecv: all data warps, sync warp last.
WEFT_DEV SimpleGroup simpleFullGroup() { return {0, 0, kSimpleDataWarps, kSimpleDataWarps}; }
// SendRecv with both parts: the send part and the receive part run side by side, sendWarps + 1
// and kSimpleDataWarps - sendWarps - 1 + 1 warps (the receive group's sync warp is the last data
// warp of the full group). sendWarps <= 0 takes a third: on 2xH200 a 5/9 split beat 7/7 by 5-10 %
// for sendrecv and alltoall (the receiving side, a local copy behind the peer's flags, is slower).
WEFT_DEV int clampSendWarps(int sendWarps) {
  if (sendWarps <= 0) return kSimpleDataWarps / 3;
  return sendWarps > kSimpleDataWarps - 2 ? kSimpleDataWarps - 2 : sendWarps;
}
WEFT_DEV SimpleGroup simpleSendGroup(int sendWarps) { return {0, 0, clampSendWarps(sendWarps), kSimpleDataWarps}; }
WEFT_DEV SimpleGroup simpleRecvGroup(int sendWarps) {
  const int s = clampSendWarps(sendWarps);
  return {1, s, kSimpleDataWarps - s - 1, kSimpleDataWarps - 1};
}
// Threads of group g: its data warps and its sync warp (the count of its named barriers).
WEFT_DEV int groupThreads(const SimpleGroup& g) { return (g.nDataWarps + 1) * arch::kWarpSize; }
WEFT_DEV bool isSyncWarp(const SimpleGroup& g) { return arch::warpId() == g.syncWarp; }
WEFT_DEV bool inGroup(const SimpleGroup& g) {
  int w = arch::warpId();
  return w == g.syncWarp || (w >= g.firstWarp && w < g.firstWarp + g.nDataWarps);
}

// The part of the protocol that does not depend on the element type or reduction: connection
// state, slot addresses, and the sync warp's waiting and publishing. Compiled once (its slow
// members are not inlined), whatever the number of functors.
class SimpleLink {
 public:
  // Called by every thread of group g (and only those). recvConn/sendConn may be null.
  WEFT_DEV SimpleLink(const SimpleGroup& g, SimpleShared* sh, const volatile uint32_t* abortFlag,
                      ConnInfo* recvConn, ConnInfo* sendConn)
      : sh_(sh), abortFlag_(abortFlag), group_(g.index), recvConn_(recvConn), sendConn_(sendConn) {
    isSync_ = isSyncWarp(g);
    tid_ = arch::threadId() - g.firstWarp * arch::kWarpSize;
    nDataWarps_ = g.nDataWarps;
    barrierBase_ = 1 + g.index * kSimpleReadyDepth;
    nBarThreads_ = groupThreads(g);
    if (recvConn) {
      recvBuff_ = recvConn->buffs[kProtoSimple];
      recvStep_ = arch::ldN<8>(&recvConn->step);
      recvTail_ = recvConn->tail;
      recvHead_ = recvConn->head;
    }
    if (sendConn) {
      sendBuff_ = sendConn->buffs[kProtoSimple];
      sendStep_ = arch::ldN<8>(&sendConn->step);
      sendTail_ = sendConn->tail;
      sendHead_ = sendConn->head;
      // The slots an earlier kernel knew to be free (ConnInfo::sendFree, as FlagLink reads it),
      // taken as a head value seen: the first slices read head only where those do not cover
      // them. That kernel's acquire of head comes before this one (launch order).
      if (isSync_) {
        const uint64_t known = sendStep_ + arch::ldN<4>(&sendConn->sendFree);
        headSeen_ = known >= kSteps ? known - kSteps : 0;
      }
    }
    uint64_t b = ~0ull;
    if (recvConn) b = (uint64_t)recvConn->stepBytes[kProtoSimple];
    if (sendConn) b = minU64(b, (uint64_t)sendConn->stepBytes[kProtoSimple]);
    stepBytes_ = b == ~0ull ? kSimpleMinStepBytes : b;  // no connection: local copies only
    if (isSync_) {
      for (int d = 0; d < kSimpleReadyDepth; d++) doneBase_.set(d, arch::ldVolatileShared(&sh_->done[group_][d]));
    }
    probeBy(kProbeSyncLinksReady, isSync_ && arch::laneId() == 0);
    probe(kProbeLinksReady);
  }

  WEFT_DEV uint64_t stepBytes() const { return stepBytes_; }

  // Sync warp, whole warp: wait until the next slice (of `bytes` bytes) may start, then release it.
  WEFT_DEV void syncSlice(bool recv, bool send, uint64_t bytes) {
    if (arch::laneId() == 0) waitSlice(recv, send, bytes);
    arch::syncWarp();
    arch::barArrive(barrierBase_ + (int)(slice_ % kSimpleReadyDepth), nBarThreads_);
    advance(recv, send);
  }

  // Data warps: wait for the release of the next slice; false once the communicator aborted.
  WEFT_DEV bool dataBegin() {
    arch::barSync(barrierBase_ + (int)(slice_ % kSimpleReadyDepth), nBarThreads_);
    if (slice_ < 2) probe(slice_ == 0 ? kProbeDataReleased0 : kProbeDataReleased1);
    return arch::ldVolatileShared(&sh_->aborted) == 0;
  }
  WEFT_DEV const char* recvSlot() const { return recvBuff_ + (recvStep_ % kSteps) * stepBytes_; }
  WEFT_DEV char* sendSlot() const { return sendBuff_ + (sendStep_ % kSteps) * stepBytes_; }
  // Data warps: count this warp's part of the slice done.
  WEFT_DEV void dataEnd(bool recv, bool send) {
    arch::syncWarp();
    if (arch::laneId() == 0) arch::redAddReleaseCtaShared(&sh_->done[group_][slice_ % kSimpleReadyDepth], 1);
    advance(recv, send);
  }

  // Sync warp: publish what is still pending and save the step counters. Call once, at the end.
  WEFT_DEV void finishSync() {
    if (arch::laneId() == 0) {
      while (posted_ < readied_) publishCompleted();
      if (recvConn_) arch::stN<8>(&recvConn_->step, recvStep_);
      if (sendConn_) {
        arch::stN<8>(&sendConn_->step, sendStep_);
        // head >= headSeen_ (read here, or taken from an earlier kernel's sendFree)
        arch::stN<4>(&sendConn_->sendFree, sendFreeToSave(headSeen_ + kSteps, sendStep_));
      }
    }
    arch::syncWarp();
  }

 protected:
  WEFT_DEV void advance(bool recv, bool send) {
    slice_++;
    if (recv) recvStep_++;
    if (send) sendStep_++;
  }

  // Sync warp lane 0.
  WEFT_DEV void waitSlice(bool recv, bool send, uint64_t bytes) {
    if (!aborted_ && arch::ldVolatileShared(&sh_->aborted)) aborted_ = true;
    int spins = 0;
    bool firstRead = true, acquireDue = false;
    for (;;) {
      publishCompleted();
      if (readied_ - posted_ < kSimpleReadyDepth) {
        if (aborted_) break;
        // The slot of recvStep_ holds data once tail > recvStep_; the slot of sendStep_ is free
        // once head + kSteps > sendStep_. The spin reads relaxed: an acquire load at system scope
        // also invalidates the SM's L1, and thousands of them per slice slow the data warps down.
        // One acquire load after the wait orders the data accesses after what it saw. The first
        // read of a wait is an acquire load itself: a head is mostly there at once (the peer
        // freed the slot long ago), and then no second round trip is due.
        if (recv && tailSeen_ <= recvStep_) tailSeen_ = readCounter(recvTail_, firstRead, &acquireDue);
        if (send && headSeen_ + kSteps <= sendStep_) headSeen_ = readCounter(sendHead_, firstRead, &acquireDue);
        firstRead = false;
        if ((!recv || tailSeen_ > recvStep_) && (!send || headSeen_ + kSteps > sendStep_)) {
          if (acquireDue) {
            if (recv) (void)arch::ldAcquireSys(recvTail_);
            if (send) (void)arch::ldAcquireSys(sendHead_);
          }
          break;
        }
      }
      if (++spins >= kSpinsPerAbortCheck) {
        spins = 0;
        if (arch::ldVolatileShared(&sh_->aborted) || (abortFlag_ && arch::ldRelaxedSys(abortFlag_) != 0)) {
          aborted_ = true;
          arch::stVolatileShared(&sh_->aborted, 1);
        }
      }
    }
    if (slice_ < 2) probeBy(slice_ == 0 ? kProbeSliceReady0 : kProbeSliceReady1, true);
    // The step's size for a network proxy (abi.h kStepSizeWord); the tail's fence publishes it.
    if (send && !aborted_) {
      arch::stRelaxedSys(sendHead_ + kStepSizeWord + sendStep_ % kSteps, stepSizeWord(sendStep_, bytes));
    }
    int d = (int)(slice_ % kSimpleReadyDepth);
    pendTail_.set(d, send ? sendStep_ + 1 : 0);
    pendHead_.set(d, recv ? recvStep_ + 1 : 0);
    readied_++;
  }

  // Sync warp lane 0: a peer's counter, with acquire semantics on a wait's first read; a later
  // relaxed read leaves an acquire load due once the wait is over.
  WEFT_DEV static uint64_t readCounter(volatile uint64_t* p, bool first, bool* acquireDue) {
    if (first) return arch::ldAcquireSys(p);
    *acquireDue = true;
    return arch::ldRelaxedSys(p);
  }

  // Sync warp lane 0: publish every released slice, oldest first, that all data warps finished.
  // Slot d's counter reaches (j+1)*nDataWarps exactly when the j-th slice using slot d is done,
  // because that slot's next slice is only released after this one is published.
  WEFT_DEV void publishCompleted() {
    uint64_t tail = 0, head = 0;
    while (posted_ < readied_) {
      int d = (int)(posted_ % kSimpleReadyDepth);
      uint32_t need = (uint32_t)((posted_ / kSimpleReadyDepth + 1) * (uint64_t)nDataWarps_);
      if (arch::ldAcquireCtaShared(&sh_->done[group_][d]) - doneBase_.get(d) < need) break;
      if (pendTail_.get(d)) tail = pendTail_.get(d);
      if (pendHead_.get(d)) head = pendHead_.get(d);
      posted_++;
    }
    if ((tail | head) == 0 || aborted_) return;
    // A tail hands the peer bytes the data warps stored: the system-scope fence makes those stores
    // (ordered before us by the counter) visible first. A head alone only frees slots whose bytes
    // the data warps already loaded (they used the values before counting the slice done), so it
    // goes out without one, as NCCL posts its receive steps. With the acquiring first read
    // (waitSlice): Ring/Simple 8-byte all_gather 8.4 -> 7.5 us, sendrecv 32 KiB 8.4 -> 7.5 (two
    // ranks on one H200, CUDA graph, session 17).
    if (tail) arch::fenceAcqRelSys();
    if (tail) arch::stRelaxedSys(sendTail_, tail);
    if (head) arch::stRelaxedSys(recvHead_, head);
    if (posted_ <= 2) probeBy(posted_ == 1 ? kProbePublished0 : kProbePublished1, true);
  }

  SimpleShared* sh_;
  const volatile uint32_t* abortFlag_;
  int group_;
  bool isSync_;
  int tid_ = 0, nDataWarps_ = 0, barrierBase_ = 0, nBarThreads_ = 0;
  ConnInfo* recvConn_;
  ConnInfo* sendConn_;
  const char* recvBuff_ = nullptr;
  char* sendBuff_ = nullptr;
  volatile uint64_t* recvTail_ = nullptr;  // local: polled
  volatile uint64_t* recvHead_ = nullptr;  // sender's memory: published
  volatile uint64_t* sendTail_ = nullptr;  // receiver's memory: published
  volatile uint64_t* sendHead_ = nullptr;  // local: polled
  uint64_t recvStep_ = 0, sendStep_ = 0;
  uint64_t stepBytes_ = 0;
  uint64_t slice_ = 0;  // slices started by this object, all roles
  // Sync warp lane 0 only.
  uint64_t readied_ = 0, posted_ = 0;
  uint64_t tailSeen_ = 0, headSeen_ = 0;
  // Indexed by depth slot; RegArray keeps them out of local memory.
  RegArray<uint64_t, kSimpleReadyDepth> pendTail_{}, pendHead_{};
  RegArray<uint32_t, kSimpleReadyDepth> doneBase_{};
  bool aborted_ = false;
};

// The Simple primitives for element type Fn::Elem and reduction Fn. OutlineCopies: each slice's
// data movement is a call of a non-inlined reduceCopy (reduceCopyOutlined), which then has the
// registers to itself, instead of being inlined into the primitive's loop (where ptxas spilled
// the copy loops' values); the general Simple kernel and the specialized Ring-sum kernels use it
// (special_kernels.h).
template <typename Fn, bool OutlineCopies = false, int Role = kRoleAny, int CopyUnroll = kCopyUnroll>
class SimplePrims : public SimpleLink {
 public:
  using T = typename Fn::Elem;

  WEFT_DEV SimplePrims(const SimpleGroup& g, SimpleShared* sh, const volatile uint32_t* abortFlag,
                       ConnInfo* recvConn, ConnInfo* sendConn, const T* input, T* output,
                       uint64_t chunkElems, const Fn& fn)
      : SimpleLink(g, sh, abortFlag, recvConn, sendConn), fn_(fn), input_(input), output_(output) {
    sliceElems_ = (int64_t)simpleSliceElems(chunkElems, stepBytes(), sizeof(T));
  }

  // ---- the primitive interface (LL/LL128 will implement the same) ----
  // Offsets are elements from the user's input/output base; n is at most one chunk.
  WEFT_DEV void send(int64_t inOff, int64_t n) { run(kSend, inOff, 0, n); }
  WEFT_DEV void recv(int64_t outOff, int64_t n) { run(kRecv, 0, outOff, n); }
  WEFT_DEV void recvReduceSend(int64_t inOff, int64_t n) { run(kRecvReduceSend, inOff, 0, n); }
  WEFT_DEV void recvReduceCopy(int64_t inOff, int64_t outOff, int64_t n) { run(kRecvReduceCopy, inOff, outOff, n); }
  WEFT_DEV void recvReduceCopySend(int64_t inOff, int64_t outOff, int64_t n) {
    run(kRecvReduceCopySend, inOff, outOff, n);
  }
  WEFT_DEV void recvCopySend(int64_t outOff, int64_t n) { run(kRecvCopySend, 0, outOff, n); }
  WEFT_DEV void copySend(int64_t inOff, int64_t outOff, int64_t n) { run(kCopySend, inOff, outOff, n); }
  // Input to output without peers (nRanks == 1, self send/recv), pre- and post-op applied.
  WEFT_DEV void localCopy(int64_t inOff, int64_t outOff, int64_t n) { run(kLocalCopy, inOff, outOff, n); }
  // Every thread of the group, once, at the end.
  WEFT_DEV void finish() {
    if (syncRole()) finishSync();
  }

 private:
  // Whether this thread is the group's sync warp, known at compile time where Role says so.
  WEFT_DEV bool syncRole() const {
    if constexpr (Role == kRoleSync) return true;
    else if constexpr (Role == kRoleData) return false;
    else return isSync_;
  }

  enum Kind { kSend, kRecv, kRecvReduceSend, kRecvReduceCopy, kRecvReduceCopySend, kRecvCopySend, kCopySend, kLocalCopy };

  // Every primitive goes through run(), inlined: the caller's kind is a constant, so one variant
  // remains. Cold functors (kHotFn) already run in one non-inlined body per functor
  // (runReduceWorkCold), and a second non-inlined level here would need the Prims' address, which
  // puts the object in local memory and stacks the two frames (the stack every thread of every
  // launch reserves: see runtime::reserveStack).
  WEFT_DEV void run(int kind, int64_t inOff, int64_t outOff, int64_t n) {
    switch (kind) {
      case kSend: op<false, true, true, false, false>(inOff, outOff, n); break;
      case kRecv: op<true, false, false, true, false>(inOff, outOff, n); break;
      case kRecvReduceSend: op<true, true, true, false, false>(inOff, outOff, n); break;
      case kRecvReduceCopy: op<true, false, true, true, true>(inOff, outOff, n); break;
      case kRecvReduceCopySend: op<true, true, true, true, true>(inOff, outOff, n); break;
      case kRecvCopySend: op<true, true, false, true, false>(inOff, outOff, n); break;
      case kCopySend: op<false, true, true, true, false>(inOff, outOff, n); break;
      default: local(inOff, outOff, n); break;
    }
  }

  WEFT_DEV void local(int64_t inOff, int64_t outOff, int64_t n) {
    if (syncRole() || n <= 0) return;
    const T* in = input_ + inOff;
    T* out = output_ + outOff;
    if (!Fn::kPreOp && !Fn::kPostOp && static_cast<const void*>(in) == static_cast<const void*>(out)) return;
    move<1, 1, Fn::kPreOp, Fn::kPostOp>(in, nullptr, out, nullptr, n);
  }

  // The data warps move n elements (reduceCopy), inlined here or as a call (OutlineCopies).
  template <int NSrcs, int NDsts, bool Pre, bool Post>
  WEFT_DEV void move(const void* s0, const void* s1, void* d0, void* d1, int64_t n) {
    const int nThreads = nDataWarps_ * arch::kWarpSize;
    if constexpr (OutlineCopies) reduceCopyOutlined<Fn, NSrcs, NDsts, Pre, Post>(fn_, tid_, nThreads, s0, s1, d0, d1, n);
    else reduceCopy<Fn, NSrcs, NDsts, Pre, Post, CopyUnroll>(fn_, tid_, nThreads, s0, s1, d0, d1, n);
  }

  // One primitive: Recv from the previous peer and/or read our input (SrcIn), reduce, and Send
  // to the next peer and/or write our output (DstOut); Post: this is the final value.
  template <bool Recv, bool Send, bool SrcIn, bool DstOut, bool Post>
  WEFT_DEV void op(int64_t inOff, int64_t outOff, int64_t n) {
    constexpr int kSrcs = (Recv ? 1 : 0) + (SrcIn ? 1 : 0);
    constexpr int kDsts = (Send ? 1 : 0) + (DstOut ? 1 : 0);
    for (int64_t done = 0; done < n; done += sliceElems_) {
      const int64_t len = n - done < sliceElems_ ? n - done : sliceElems_;
      if (syncRole()) {
        syncSlice(Recv, Send, (uint64_t)len * sizeof(T));
        continue;
      }
      if (dataBegin()) {
        const T* in = SrcIn ? input_ + inOff + done : nullptr;
        T* out = DstOut ? output_ + outOff + done : nullptr;
        const void* s0 = Recv ? static_cast<const void*>(recvSlot()) : static_cast<const void*>(in);
        const void* s1 = Recv && SrcIn ? static_cast<const void*>(in) : nullptr;
        void* d0 = Send ? static_cast<void*>(sendSlot()) : static_cast<void*>(out);
        void* d1 = Send && DstOut ? static_cast<void*>(out) : nullptr;
        move<kSrcs, kDsts, SrcIn && Fn::kPreOp, Post && Fn::kPostOp>(s0, s1, d0, d1, len);
        probe(Recv ? kProbeReceived : kProbeWritten);
      }
      dataEnd(Recv, Send);
    }
  }

  Fn fn_;
  const T* input_;
  T* output_;
  int64_t sliceElems_ = 1;
};

}  // namespace weft::dev
