// What LL and LL128 share: the flags travel inside the data lines (work_math.h, "LL and LL128"),
// so a connection needs only the head counter for flow control. Every thread of a group runs the
// same calls in the same order (there is no sync warp): each warp's lane 0 waits for the head on
// its own, every thread spins on the flags of the lines it reads, and after each received step
// the group meets at a named barrier before thread 0 publishes head = step + 1. finish() meets
// there once more before thread 0 saves the steps, so that no warp reads a step already advanced.
//
// Abort: every spin reads comm->abortFlag (and the block's shared copy of it) every
// kFlagSpinsPerAbortCheck spins. Once it is set, waits return at once and data is skipped, but
// every barrier is still reached, so all warps leave the kernel normally.
#pragma once

#include "device/abi.h"
#include "device/arch/probe.cuh"
#include "device/reduce/reduce_copy.cuh"
#include "device/work_math.h"

namespace weft::dev {

constexpr int kFlagSpinsPerAbortCheck = 1000;
constexpr int kFlagMaxGroups = 2;

// Block-shared state of LL/LL128 (static shared memory of the kernel).
struct FlagShared {
  uint32_t aborted;
  // Direct (algo/direct.cuh): every peer's LL buffers, head pointers and step sizes, its send and
  // receive step and send limit (head + kSteps as known) at the start of the item, and each
  // warp's send limit per peer (lane 0). In
  // shared memory because arrays indexed by a peer number would otherwise live in each thread's
  // local memory; loaded once per item by one thread per peer.
  char* directSendBuff[kDirectMaxRanks];
  char* directRecvBuff[kDirectMaxRanks];
  volatile uint64_t* directSendHead[kDirectMaxRanks];  // ours, polled
  volatile uint64_t* directRecvHead[kDirectMaxRanks];  // the peer's, published
  uint64_t directStepBytes[kDirectMaxRanks];
  uint64_t directSendBase[kDirectMaxRanks];
  uint64_t directRecvBase[kDirectMaxRanks];
  uint64_t directSendLimitBase[kDirectMaxRanks];
  uint64_t directSendLimit[arch::kMaxBlockThreads / arch::kWarpSize][kDirectMaxRanks];
};

// Warps serving one transfer direction (or both, for collectives): warps
// [firstWarp, firstWarp + nWarps) with named barrier 1 + index.
struct FlagGroup {
  int index;
  int firstWarp;
  int nWarps;
};

// The groups of a block of nWarps warps: all of them (collectives), or the first half sending and
// the rest receiving (SendRecv with both parts).
WEFT_DEV FlagGroup flagFullGroup(int nWarps) { return {0, 0, nWarps}; }
WEFT_DEV FlagGroup flagSendGroup(int nWarps) { return {0, 0, nWarps / 2}; }
WEFT_DEV FlagGroup flagRecvGroup(int nWarps) { return {1, nWarps / 2, nWarps - nWarps / 2}; }

WEFT_DEV int groupThreads(const FlagGroup& g) { return g.nWarps * arch::kWarpSize; }
WEFT_DEV bool inGroup(const FlagGroup& g) {
  int w = arch::warpId();
  return w >= g.firstWarp && w < g.firstWarp + g.nWarps;
}

// Whole warp, after lane 0 waited for the peer's head (waitSend): a warp barrier orders the
// other lanes' slot stores after lane 0's acquire, but only when lane 0 read head in this call.
// Otherwise the limit came from an acquire already ordered (an earlier call's barrier, or an
// earlier kernel: ConnInfo::sendFree), and the barrier is skipped: it orders memory, so it may
// hold the warp until loads in flight (a first user pack loaded early) have returned.
WEFT_DEV void syncAfterHeadRead(bool laneZeroReadHead) {
  if (arch::anyLane(laneZeroReadHead)) arch::syncWarp();
}

// The protocol state that depends neither on the element type nor on the line format.
class FlagLink {
 public:
  // Called by every thread of group g (and only those). recvConn/sendConn may be null.
  WEFT_DEV FlagLink(const FlagGroup& g, FlagShared* sh, const volatile uint32_t* abortFlag, ConnInfo* recvConn,
                    ConnInfo* sendConn, int proto)
      : sh_(sh), abortFlag_(abortFlag), recvConn_(recvConn), sendConn_(sendConn) {
    tid_ = arch::threadId() - g.firstWarp * arch::kWarpSize;
    nThreads_ = groupThreads(g);
    warp_ = tid_ / arch::kWarpSize;
    nWarps_ = g.nWarps;
    barrier_ = 1 + g.index;
    if (recvConn) {
      recvBuff_ = recvConn->buffs[proto];
      recvStep_ = arch::ldN<8>(&recvConn->step);
      recvHead_ = recvConn->head;
      stepBytes_ = (uint64_t)recvConn->stepBytes[proto];
    }
    if (sendConn) {
      sendBuff_ = sendConn->buffs[proto];
      sendStep_ = arch::ldN<8>(&sendConn->step);
      sendLimit_ = sendStep_ + arch::ldN<4>(&sendConn->sendFree);
      sendHead_ = sendConn->head;
      stepBytes_ = (uint64_t)sendConn->stepBytes[proto];
    }
    probe(kProbeLinksReady);
  }

  WEFT_DEV uint64_t stepBytes() const { return stepBytes_; }

  // Saves the step counters for the next item or launch. Every thread of the group calls it.
  // The barrier first: every thread read the counters in the constructor, and in a send-only
  // group (no postRecv barrier) warp 0 may otherwise store the new step before a late warp has
  // read the old one; that warp would then write its lines one slot (and flag) ahead.
  WEFT_DEV void finish() {
    arch::barSync(barrier_, nThreads_);
    if (tid_ == 0) {
      if (recvConn_) arch::stN<8>(&recvConn_->step, recvStep_);
      if (sendConn_) {
        arch::stN<8>(&sendConn_->step, sendStep_);
        arch::stN<4>(&sendConn_->sendFree, sendFreeToSave(sendLimit_, sendStep_));
      }
    }
  }

 protected:
  WEFT_DEV bool aborted() {
    if (!aborted_ && arch::ldVolatileShared(&sh_->aborted)) aborted_ = true;
    return aborted_;
  }

  // Called from spin loops: true once the communicator aborted.
  WEFT_DEV bool spinAborted(int* spins) {
    if (++*spins < kFlagSpinsPerAbortCheck) return false;
    *spins = 0;
    if (aborted_ || arch::ldVolatileShared(&sh_->aborted) ||
        (abortFlag_ && arch::ldRelaxedSys(abortFlag_) != 0)) {
      aborted_ = true;
      arch::stVolatileShared(&sh_->aborted, 1);
    }
    return aborted_;
  }

  // Whole warp: the slot of sendStep_ may be written once head + kSteps > sendStep_. Head is
  // read only when the last value read (here or by an earlier kernel: ConnInfo::sendFree) does
  // not already allow it: most small launches then write their step without that round trip.
  WEFT_DEV void waitSend() {
    bool readHead = false;
    if (arch::laneId() == 0 && sendLimit_ <= sendStep_ && !aborted()) {
      readHead = true;
      int spins = 0;
      for (;;) {
        sendLimit_ = arch::ldAcquireSys(sendHead_) + kSteps;
        if (sendLimit_ > sendStep_ || spinAborted(&spins)) break;
      }
    }
    syncAfterHeadRead(readHead);
    probe(kProbeSendReady);
  }

  // Whole group, after every thread has consumed the slot of recvStep_: publish head.
  // The received values are all used (stored or forwarded) before the barrier, so the sender
  // may overwrite the slot as soon as it sees the new head.
  // LL (wipeLines): in the last kSteps steps of every 2^31 the slot is first rewritten with a
  // flag it never carries (work_math.h: llWipeAfter), so that no line outlives 2^32 steps.
  WEFT_DEV void postRecv(bool wipeLines) {
    arch::barSync(barrier_, nThreads_);
    if (wipeLines && llWipeAfter(recvStep_)) {
      wipeSlot();
      arch::barSync(barrier_, nThreads_);
    }
    if (tid_ == 0 && !aborted()) arch::stRelaxedSys(recvHead_, recvStep_ + 1);
    probe(kProbeStepDone);
  }

  WEFT_DEV void wipeSlot() {
    fillWipeFlags(recvBuff_ + (recvStep_ % kSteps) * stepBytes_, llWipeFlag(recvStep_), tid_, nThreads_, stepBytes_);
  }
  // Rare (once per 2^31 steps), so not inlined; static, with its inputs by value: a non-inlined
  // member would need the link's address, which keeps the whole object in local memory (stack)
  // for the hot loops too.
  static WEFT_DEV_NOINLINE void fillWipeFlags(char* slot, uint32_t flag, int tid, int nThreads, uint64_t stepBytes) {
    for (uint64_t l = (uint64_t)tid; l < stepBytes / kLLLineBytes; l += (uint64_t)nThreads) {
      Pack16 v;
      v.w[0] = v.w[2] = 0;
      v.w[1] = v.w[3] = flag;
      arch::stLine16(slot + l * kLLLineBytes, v);
    }
  }

  FlagShared* sh_;
  const volatile uint32_t* abortFlag_;
  ConnInfo* recvConn_;
  ConnInfo* sendConn_;
  int tid_ = 0, nThreads_ = 0, warp_ = 0, nWarps_ = 0, barrier_ = 1;
  char* recvBuff_ = nullptr;
  char* sendBuff_ = nullptr;
  volatile uint64_t* recvHead_ = nullptr;  // sender's memory: published
  volatile uint64_t* sendHead_ = nullptr;  // local: polled
  uint64_t recvStep_ = 0, sendStep_ = 0;
  uint64_t stepBytes_ = kLL128MinStepBytes;  // no connection: local copies only
  uint64_t sendLimit_ = 0;                   // head + kSteps as lane 0 of each warp last read it
  bool aborted_ = false;
};

// ---- user-buffer access for flag protocols: up to 16 bytes at any address ----

namespace detail {

// The partial-pack paths (small or unaligned messages). Every loop runs over constant indices of
// the pack's words and takes v by value: an address taken of a pack, or a word picked at run
// time, would put it in local memory, which a latency-bound launch pays about 1 us for
// (reg_array.h). Bytes land in the pack's words little-endian, as in memory.
constexpr int kWordBits = 32;  // bits of one of a pack's words

static WEFT_DEV_NOINLINE Pack16 loadUserSlow(const char* p, int nBytes) {
  Pack16 v{};
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a % 8 == 0 && nBytes % 8 == 0) {
WEFT_UNROLL
    for (int k = 0; k < 2; k++) {
      if (8 * k >= nBytes) break;
      const uint64_t w = arch::ldN<8>(p + 8 * k);
      v.w[2 * k] = (uint32_t)w;
      v.w[2 * k + 1] = (uint32_t)(w >> kWordBits);
    }
  } else if (a % 4 == 0 && nBytes % 4 == 0) {
WEFT_UNROLL
    for (int k = 0; k < 4; k++) {
      if (4 * k >= nBytes) break;
      v.w[k] = (uint32_t)arch::ldN<4>(p + 4 * k);
    }
  } else {
WEFT_UNROLL
    for (int i = 0; i < 16; i++) {
      if (i >= nBytes) break;
      v.w[i / 4] |= (uint32_t)(uint8_t)arch::ldN<1>(p + i) << (8 * (i % 4));
    }
  }
  return v;
}

static WEFT_DEV_NOINLINE void storeUserSlow(char* p, const Pack16 v, int nBytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a % 8 == 0 && nBytes % 8 == 0) {
WEFT_UNROLL
    for (int k = 0; k < 2; k++) {
      if (8 * k >= nBytes) break;
      arch::stN<8>(p + 8 * k, (uint64_t)v.w[2 * k] | (uint64_t)v.w[2 * k + 1] << kWordBits);
    }
  } else if (a % 4 == 0 && nBytes % 4 == 0) {
WEFT_UNROLL
    for (int k = 0; k < 4; k++) {
      if (4 * k >= nBytes) break;
      arch::stN<4>(p + 4 * k, v.w[k]);
    }
  } else {
WEFT_UNROLL
    for (int i = 0; i < 16; i++) {
      if (i >= nBytes) break;
      arch::stN<1>(p + i, (uint8_t)(v.w[i / 4] >> (8 * (i % 4))));
    }
  }
}

// nBytes in [1, 16]; bytes beyond nBytes read as zero.
WEFT_DEV Pack16 loadUser(const char* p, int nBytes) {
  if (nBytes == 16 && reinterpret_cast<uintptr_t>(p) % 16 == 0) return arch::ld16(p);
  // Eight or four aligned bytes (two floats; one float per rank of a small AllGather) without a
  // call: a non-inlined call waits for its loads and goes through local memory (~1,000 cycles).
  if (nBytes == 8 && reinterpret_cast<uintptr_t>(p) % 8 == 0) {
    const uint64_t w = arch::ldN<8>(p);
    return Pack16{{(uint32_t)w, (uint32_t)(w >> kWordBits), 0, 0}};
  }
  if (nBytes == 4 && reinterpret_cast<uintptr_t>(p) % 4 == 0) return Pack16{{(uint32_t)arch::ldN<4>(p), 0, 0, 0}};
  return loadUserSlow(p, nBytes);
}

WEFT_DEV void storeUser(char* p, const Pack16& v, int nBytes) {
  if (nBytes == 16 && reinterpret_cast<uintptr_t>(p) % 16 == 0) arch::st16(p, v);
  else if (nBytes == 8 && reinterpret_cast<uintptr_t>(p) % 8 == 0)
    arch::stN<8>(p, (uint64_t)v.w[0] | (uint64_t)v.w[1] << kWordBits);
  else if (nBytes == 4 && reinterpret_cast<uintptr_t>(p) % 4 == 0) arch::stN<4>(p, v.w[0]);
  else storeUserSlow(p, v, nBytes);
}

}  // namespace detail

// What one primitive does (the Simple variants, as run-time flags: a flag protocol is bound by
// latency or by the line format, not by instruction count, and one loop per functor keeps the
// device build small).
enum FlagOp : int {
  kFlagRecv = 1,    // read the step from the previous peer
  kFlagSend = 2,    // write the step to the next peer
  kFlagSrcIn = 4,   // our input is a source (pre-op applies to it)
  kFlagDstOut = 8,  // write our output
  kFlagPost = 16,   // the result is final: apply the post-op
  // With kFlagRecv | kFlagSrcIn: reduce in a fixed operand order, the pre-op applied on its own
  // (not fused: PreMulSum's fma would round differently), so that the two ends of a pair, each
  // combining its own value with the other's, get the same bits: reduce(own', received) with
  // kFlagOwnFirst (the lower rank), reduce(received, own') without.
  kFlagRankOrder = 1 << 5,
  kFlagOwnFirst = 1 << 6,
};

// The value of one 16-byte part: recv (if any) combined with our input (if any).
template <typename Fn>
WEFT_DEV Pack16 flagCombine(const Fn& fn, int ops, const Pack16& recv, const Pack16& own) {
  Pack16 v;
  if ((ops & kFlagRecv) && (ops & kFlagSrcIn) && (ops & kFlagRankOrder)) {
    const Pack16 mine = Fn::kPreOp ? fn.preOp(own) : own;
    v = (ops & kFlagOwnFirst) ? fn.reduce(mine, recv) : fn.reduce(recv, mine);
  } else if ((ops & kFlagRecv) && (ops & kFlagSrcIn)) v = Fn::kPreOp ? fn.reducePre(recv, own) : fn.reduce(recv, own);
  else if (ops & kFlagRecv) v = recv;
  else v = Fn::kPreOp ? fn.preOp(own) : own;
  if (Fn::kPostOp && (ops & kFlagPost)) v = fn.postOp(v);
  return v;
}

// The primitive interface of proto/simple.cuh for a flag protocol whose Derived::run(ops, inOff,
// outOff, n) moves one call.
template <typename Derived>
class FlagPrimsApi {
 public:
  WEFT_DEV void send(int64_t inOff, int64_t n) { self()->run(kFlagSend | kFlagSrcIn, inOff, 0, n); }
  WEFT_DEV void recv(int64_t outOff, int64_t n) { self()->run(kFlagRecv | kFlagDstOut, 0, outOff, n); }
  WEFT_DEV void recvReduceSend(int64_t inOff, int64_t n) {
    self()->run(kFlagRecv | kFlagSend | kFlagSrcIn, inOff, 0, n);
  }
  WEFT_DEV void recvReduceCopy(int64_t inOff, int64_t outOff, int64_t n) {
    self()->run(kFlagRecv | kFlagSrcIn | kFlagDstOut | kFlagPost, inOff, outOff, n);
  }
  // recvReduceCopy whose result has the same bits at both ends of a pair (kFlagRankOrder).
  WEFT_DEV void recvReduceCopyInRankOrder(int64_t inOff, int64_t outOff, int64_t n, bool ownFirst) {
    self()->run(kFlagRecv | kFlagSrcIn | kFlagDstOut | kFlagPost | kFlagRankOrder | (ownFirst ? kFlagOwnFirst : 0),
                inOff, outOff, n);
  }
  WEFT_DEV void recvReduceCopySend(int64_t inOff, int64_t outOff, int64_t n) {
    self()->run(kFlagRecv | kFlagSend | kFlagSrcIn | kFlagDstOut | kFlagPost, inOff, outOff, n);
  }
  WEFT_DEV void recvCopySend(int64_t outOff, int64_t n) {
    self()->run(kFlagRecv | kFlagSend | kFlagDstOut, 0, outOff, n);
  }
  WEFT_DEV void copySend(int64_t inOff, int64_t outOff, int64_t n) {
    self()->run(kFlagSend | kFlagSrcIn | kFlagDstOut, inOff, outOff, n);
  }
  // Input to output without peers (nRanks == 1, self send/recv), pre- and post-op applied.
  WEFT_DEV void localCopy(int64_t inOff, int64_t outOff, int64_t n) {
    self()->run(kFlagSrcIn | kFlagDstOut | kFlagPost, inOff, outOff, n);
  }

 private:
  WEFT_DEV Derived* self() { return static_cast<Derived*>(this); }
};

// Input to output without peers (ops has neither kFlagRecv nor kFlagSend), any alignment.
template <typename Fn>
WEFT_DEV void flagLocal(const Fn& fn, int ops, int tid, int nThreads, const char* in, char* out, int64_t nBytes) {
  if (!Fn::kPreOp && !Fn::kPostOp && in == out) return;
  for (int64_t p = tid; p * 16 < nBytes; p += nThreads) {
    const int valid = nBytes - p * 16 < 16 ? (int)(nBytes - p * 16) : 16;
    Pack16 v = flagCombine(fn, ops, Pack16{}, detail::loadUser(in + p * 16, valid));
    detail::storeUser(out + p * 16, v, valid);
  }
}

}  // namespace weft::dev
