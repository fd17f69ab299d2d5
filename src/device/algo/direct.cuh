// Direct algorithms (weft extension, Algo kAlgoDirect): small AllReduce and AllGather moved
// straight between the ranks of one node in a single kernel, over the per-peer LL connections
// of one channel, without ring steps in between.
//   one-shot AllReduce: every rank writes its (pre-op'ed) input to every peer and reduces the n
//     inputs itself: one dependent hop. Each rank reduces in rank order 0..n-1, so all ranks get
//     the same bits for floating types.
//   two-shot AllReduce: piece q of the input goes to rank q, which reduces the n copies of its
//     piece in rank order and writes the result to every peer: two hops, but each rank sends
//     2(n-1)/n of the data instead of n-1 times it.
//   AllGather: every rank writes its block to every peer and stores the blocks it receives.
//
// Lines are LL's (work_math.h "LL and LL128": payload byte b of a step in line b / 8, flag
// llFlag(step) in both halves of every line, head for flow control), so LL and Ring/SendRecv work
// can follow on the same connections. Per loop iteration every connection to and from every peer
// advances by the same number of steps (1; 2 for two-shot: reduce-scatter step, then all-gather
// step), whether or not that peer's part is empty, which both ends know. Thread t handles 16-byte
// payload packs t, t + nThreads, ...; the thread that reads a position of the user input (to send
// it) is the one that later writes that position of the output, so in-place calls are safe.
#pragma once

#include "device/proto/flag_link.cuh"

namespace weft::dev {

// The LL connections to and from every peer on one channel, for one work item. Every thread of
// the block constructs one and runs the same calls in the same order. All connections advance by
// the same number of steps per iteration, so a connection's step is its step at the start of the
// item (in shared memory) plus one count of steps taken (a register): no per-peer arrays in local
// memory, whose first touches cost a latency-bound launch about 1 us (reg_array.h).
class DirectLinks {
 public:
  WEFT_DEV DirectLinks(const ChannelView& view, FlagShared* sh, int nThreads)
      : sh_(sh), abortFlag_(view.abortFlag), peers_(view.channel.peers) {
    rank_ = view.rank;
    n_ = view.nRanks;
    tid_ = arch::threadId();
    nThreads_ = nThreads;
    if (n_ > kDirectMaxRanks) arch::trap();  // the host plans Direct only up to kDirectMaxRanks
    // Thread q gathers peer q's connections (buffers, heads, step sizes, counters, and how far
    // it may send: ConnInfo::sendFree) into shared memory: every peer's loads in parallel, once,
    // rather than every thread walking every peer's ConnInfo, and no per-access reloads of the
    // buffer pointers later. Head itself is read only where that limit is reached (waitSend).
    if (tid_ < n_ && tid_ != rank_) {
      // Every load is issued before the connection check: with a branch to trap between them,
      // the counters' volatile loads could not start before the buffer pointers had arrived.
      const ConnInfo& s = peers_[tid_].send;
      const ConnInfo& r = peers_[tid_].recv;
      const uint64_t sendStep = arch::ldN<8>(&s.step);
      const uint64_t recvStep = arch::ldN<8>(&r.step);
      const uint64_t sendFree = arch::ldN<4>(&s.sendFree);
      char* sendBuff = s.buffs[kProtoLL];
      char* recvBuff = r.buffs[kProtoLL];
      sh_->directSendBuff[tid_] = sendBuff;
      sh_->directRecvBuff[tid_] = recvBuff;
      sh_->directSendHead[tid_] = s.head;
      sh_->directRecvHead[tid_] = r.head;
      sh_->directStepBytes[tid_] = minU64((uint64_t)s.stepBytes[kProtoLL], (uint64_t)r.stepBytes[kProtoLL]);
      sh_->directSendBase[tid_] = sendStep;
      sh_->directRecvBase[tid_] = recvStep;
      sh_->directSendLimitBase[tid_] = sendStep + sendFree;
      if (sendBuff == nullptr || recvBuff == nullptr) arch::trap();  // no connection
    }
    arch::barSync(kBarrier, nThreads_);  // the peers' entries are written before anyone reads them
    uint64_t sb = ~0ull;
    for (int q = 0; q < n_; q++)
      if (q != rank_) sb = minU64(sb, sh_->directStepBytes[q]);
    stepBytes_ = sb == ~0ull ? kLLMinStepBytes : sb;
    if (arch::laneId() == 0) {
      for (int q = 0; q < n_; q++) sendLimit(q) = sh_->directSendLimitBase[q];
    }
    probe(kProbeLinksReady);
  }

  WEFT_DEV int rank() const { return rank_; }
  WEFT_DEV int nRanks() const { return n_; }
  WEFT_DEV int tid() const { return tid_; }
  WEFT_DEV int nThreads() const { return nThreads_; }
  WEFT_DEV uint64_t stepBytes() const { return stepBytes_; }

  // Whole warp: the slots of the next `steps` steps to every peer may be written.
  WEFT_DEV void waitSend(int steps) {
    bool readHead = false;
    if (arch::laneId() == 0 && !aborted()) {
      for (int q = 0; q < n_; q++) {
        if (q == rank_) continue;
        const uint64_t last = sendStep(q) + (uint64_t)(steps - 1);
        uint64_t limit = sendLimit(q);
        int spins = 0;
        while (limit <= last) {
          readHead = true;
          limit = arch::ldAcquireSys(sh_->directSendHead[q]) + kSteps;
          if (limit > last || spinAborted(&spins)) break;
        }
        sendLimit(q) = limit;
      }
    }
    syncAfterHeadRead(readHead);
    probe(kProbeSendReady);
  }

  // Payload pack p (16 bytes: lines 2p and 2p + 1, the second only when `two`) of step
  // current + k to / from peer q.
  WEFT_DEV void write(int q, int k, int64_t p, const Pack16& v, bool two) {
    if (aborted_) return;
    const uint64_t step = sendStep(q) + (uint64_t)k;
    char* line = sh_->directSendBuff[q] + (step % kSteps) * stepBytes_ + (uint64_t)p * 2 * kLLLineBytes;
    const uint32_t flag = llFlag(step);
    Pack16 a;
    a.w[0] = v.w[0];
    a.w[1] = flag;
    a.w[2] = v.w[1];
    a.w[3] = flag;
    arch::stLine16(line, a);
    if (two) {
      a.w[0] = v.w[2];
      a.w[2] = v.w[3];
      arch::stLine16(line + kLLLineBytes, a);
    }
  }

  // Spins until the pack has arrived (or the communicator aborts: zeros then).
  WEFT_DEV Pack16 read(int q, int k, int64_t p, bool two) {
    Pack16 v{};
    if (aborted()) return v;
    const uint64_t step = recvStep(q) + (uint64_t)k;
    const char* line = sh_->directRecvBuff[q] + (step % kSteps) * stepBytes_ + (uint64_t)p * 2 * kLLLineBytes;
    const uint32_t flag = llFlag(step);
    Pack16 a = arch::ldLine16(line), b{};
    if (two) b = arch::ldLine16(line + kLLLineBytes);
    int spins = 0;
    for (;;) {
      const bool aOk = a.w[1] == flag && a.w[3] == flag;
      const bool bOk = !two || (b.w[1] == flag && b.w[3] == flag);
      if (aOk && bOk) break;
      if (spinAborted(&spins)) return v;
      if (!aOk) a = arch::ldLine16(line);
      if (!bOk) b = arch::ldLine16(line + kLLLineBytes);
    }
    v.w[0] = a.w[0];
    v.w[1] = a.w[2];
    v.w[2] = b.w[0];
    v.w[3] = b.w[2];
    return v;
  }

  // Whole block, once every thread has consumed its packs of the last `steps` steps: frees those
  // slots for the peers (head) and moves every connection on by `steps`. In the last kSteps steps
  // of every 2^31 a consumed slot is first rewritten with a flag it never carries, as LL does.
  WEFT_DEV void endIteration(int steps) {
    arch::barSync(kBarrier, nThreads_);
    bool wiped = false;
    for (int q = 0; q < n_; q++) {
      if (q == rank_) continue;
      for (int k = 0; k < steps; k++) {
        if (!llWipeAfter(recvStep(q) + (uint64_t)k)) continue;
        wipeSlot(q, recvStep(q) + (uint64_t)k);
        wiped = true;
      }
    }
    if (wiped) arch::barSync(kBarrier, nThreads_);
    taken_ += (uint64_t)steps;
    if (tid_ == 0 && !aborted()) {
      for (int q = 0; q < n_; q++)
        if (q != rank_) arch::stRelaxedSys(sh_->directRecvHead[q], recvStep(q));
    }
    probe(kProbeStepDone);
  }

  // Saves the step counters (and warp 0's send limits) for the next item or launch (every
  // thread calls it).
  WEFT_DEV void finish() {
    if (tid_ != 0) return;
    for (int q = 0; q < n_; q++) {
      if (q == rank_) continue;
      arch::stN<8>(&peers_[q].send.step, sendStep(q));
      arch::stN<4>(&peers_[q].send.sendFree, sendFreeToSave(sendLimit(q), sendStep(q)));
      arch::stN<8>(&peers_[q].recv.step, recvStep(q));
    }
  }

 private:
  static constexpr int kBarrier = 1;  // named barrier of the whole block (LL's full group)

  WEFT_DEV uint64_t sendStep(int q) const { return sh_->directSendBase[q] + taken_; }
  WEFT_DEV uint64_t recvStep(int q) const { return sh_->directRecvBase[q] + taken_; }
  WEFT_DEV uint64_t& sendLimit(int q) { return sh_->directSendLimit[arch::warpId()][q]; }

  WEFT_DEV bool aborted() {
    if (!aborted_ && arch::ldVolatileShared(&sh_->aborted)) aborted_ = true;
    return aborted_;
  }

  WEFT_DEV bool spinAborted(int* spins) {
    if (++*spins < kFlagSpinsPerAbortCheck) return false;
    *spins = 0;
    if (aborted_ || arch::ldVolatileShared(&sh_->aborted) || (abortFlag_ && arch::ldRelaxedSys(abortFlag_) != 0)) {
      aborted_ = true;
      arch::stVolatileShared(&sh_->aborted, 1);
    }
    return aborted_;
  }

  WEFT_DEV void wipeSlot(int q, uint64_t step) {
    char* slot = sh_->directRecvBuff[q] + (step % kSteps) * stepBytes_;
    Pack16 v;
    v.w[0] = v.w[2] = 0;
    v.w[1] = v.w[3] = llWipeFlag(step);
    for (uint64_t l = (uint64_t)tid_; l < stepBytes_ / kLLLineBytes; l += (uint64_t)nThreads_)
      arch::stLine16(slot + l * kLLLineBytes, v);
  }

  FlagShared* sh_;
  const volatile uint32_t* abortFlag_;
  DevPeer* peers_;
  int rank_ = 0, n_ = 1, tid_ = 0, nThreads_ = 1;
  uint64_t stepBytes_ = kLLMinStepBytes;
  uint64_t taken_ = 0;  // steps every connection advanced by in this item
  bool aborted_ = false;
};

namespace direct {

// Bytes of pack p of an nBytes range that are valid (1..16), and whether its second line is used.
WEFT_DEV int packValid(int64_t nBytes, int64_t p) { return nBytes - p * 16 < 16 ? (int)(nBytes - p * 16) : 16; }
WEFT_DEV bool packTwo(int valid) { return valid > (int)kLLLineDataBytes; }

// The calling thread's first pack (pack tid) of an nBytes range, zeros when it has none.
WEFT_DEV Pack16 firstPack(const DirectLinks& L, const char* src, int64_t nBytes) {
  const int64_t p = L.tid();
  return p * 16 < nBytes ? detail::loadUser(src + p * 16, packValid(nBytes, p)) : Pack16{};
}

// The j-th peer (j < n - 1) of `rank`, skipping itself.
WEFT_DEV int peerAt(int j, int rank) { return j < rank ? j : j + 1; }

// acc (the reduction of ranks 0..q-1, already pre-op'ed) combined with rank q's pre-op'ed value.
template <typename Fn>
WEFT_DEV Pack16 fold(const Fn& fn, int q, const Pack16& acc, const Pack16& x) {
  return q == 0 ? x : fn.reduce(acc, x);
}

}  // namespace direct

// One-shot AllReduce of elements [offset, offset + count) of in/out. chunk: elements per step.
// A thread first writes all its packs of the step to every peer, then reads and reduces them:
// the peers' packs arrive while ours go out, so a thread with k packs waits for one crossing of
// the link rather than k (writing and reading pack by pack). The user input is read twice (the
// second time from L2); the thread that reads a position is the one that writes it (in place).
template <typename Fn>
WEFT_DEV void directAllReduceOneShot(DirectLinks& L, const Fn& fn, const typename Fn::Elem* in,
                                     typename Fn::Elem* out, uint64_t offset, uint64_t count, uint64_t chunk) {
  using T = typename Fn::Elem;
  const int n = L.nRanks(), me = L.rank();
  for (uint64_t off = 0; off < count; off += chunk) {
    const int64_t nBytes = (int64_t)(minU64(chunk, count - off) * sizeof(T));
    const char* src = reinterpret_cast<const char*>(in + offset + off);
    char* dst = reinterpret_cast<char*>(out + offset + off);
    // The thread's first pack is read before the wait for the peers' slots: two round trips
    // overlap, which is most of a small call (the other packs are read in the loops).
    const Pack16 first = direct::firstPack(L, src, nBytes);
    L.waitSend(1);
    auto ownPack = [&](int64_t p, int valid) {
      Pack16 own = p == L.tid() ? first : detail::loadUser(src + p * 16, valid);
      if constexpr (Fn::kPreOp) own = fn.preOp(own);
      return own;
    };
    for (int64_t p = L.tid(); p * 16 < nBytes; p += L.nThreads()) {
      const int valid = direct::packValid(nBytes, p);
      const Pack16 own = ownPack(p, valid);
      for (int q = 0; q < n; q++)
        if (q != me) L.write(q, 0, p, own, direct::packTwo(valid));
    }
    probe(kProbeWritten);
    for (int64_t p = L.tid(); p * 16 < nBytes; p += L.nThreads()) {
      const int valid = direct::packValid(nBytes, p);
      const Pack16 own = ownPack(p, valid);
      Pack16 acc{};
      for (int q = 0; q < n; q++) acc = direct::fold(fn, q, acc, q == me ? own : L.read(q, 0, p, direct::packTwo(valid)));
      if constexpr (Fn::kPostOp) acc = fn.postOp(acc);
      detail::storeUser(dst + p * 16, acc, valid);
    }
    probe(kProbeReceived);
    L.endIteration(1);
  }
}

// Two-shot AllReduce: per iteration up to n pieces of `chunk` elements (the last iteration
// balances what is left over the n pieces, as ring AllReduce does: work_math.h).
template <typename Fn>
WEFT_DEV void directAllReduceTwoShot(DirectLinks& L, const Fn& fn, const typename Fn::Elem* in,
                                     typename Fn::Elem* out, uint64_t offset, uint64_t count, uint64_t chunk) {
  using T = typename Fn::Elem;
  const int n = L.nRanks(), me = L.rank();
  const int es = (int)sizeof(T);
  const char* src = reinterpret_cast<const char*>(in);
  char* dst = reinterpret_cast<char*>(out);
  for (uint64_t base = 0; base < count; base += (uint64_t)n * chunk) {
    const uint64_t piece = ringAllReduceChunk(count, base, chunk, n, es);
    const int64_t piecePacks = (int64_t)divUp(piece * (uint64_t)es, 16);
    auto range = [&](int q) {
      ElemRange r = ringAllReduceChunkRange(count, base, piece, q);
      r.offset = (r.offset + offset) * (uint64_t)es;  // now bytes
      r.count *= (uint64_t)es;
      return r;
    };
    // body(q, r, p, valid) for pack p of every other peer q's piece r (bytes), spread over the
    // threads the same way each time it is called.
    auto forPeerPacks = [&](const auto& body) {
      for (int64_t i = L.tid(); i < (int64_t)(n - 1) * piecePacks; i += L.nThreads()) {
        const int q = direct::peerAt((int)(i / piecePacks), me);
        const int64_t p = i % piecePacks;
        const ElemRange r = range(q);
        if (p * 16 >= (int64_t)r.count) continue;
        body(q, r, p, direct::packValid((int64_t)r.count, p));
      }
    };
    L.waitSend(2);
    // Reduce-scatter, sending side: piece q to peer q (step 0).
    forPeerPacks([&](int q, const ElemRange& r, int64_t p, int valid) {
      Pack16 own = detail::loadUser(src + r.offset + p * 16, valid);
      if constexpr (Fn::kPreOp) own = fn.preOp(own);
      L.write(q, 0, p, own, direct::packTwo(valid));
    });
    // Our piece: reduce the n copies in rank order, keep it and send it to every peer (step 1).
    const ElemRange mine = range(me);
    for (int64_t p = L.tid(); p * 16 < (int64_t)mine.count; p += L.nThreads()) {
      const int valid = direct::packValid((int64_t)mine.count, p);
      const bool two = direct::packTwo(valid);
      Pack16 own = detail::loadUser(src + mine.offset + p * 16, valid);
      if constexpr (Fn::kPreOp) own = fn.preOp(own);
      Pack16 acc{};
      for (int q = 0; q < n; q++) acc = direct::fold(fn, q, acc, q == me ? own : L.read(q, 0, p, two));
      if constexpr (Fn::kPostOp) acc = fn.postOp(acc);
      detail::storeUser(dst + mine.offset + p * 16, acc, valid);
      for (int q = 0; q < n; q++)
        if (q != me) L.write(q, 1, p, acc, two);
    }
    // All-gather, receiving side: peer q's reduced piece (step 1), same threads as above.
    forPeerPacks([&](int q, const ElemRange& r, int64_t p, int valid) {
      detail::storeUser(dst + r.offset + p * 16, L.read(q, 1, p, direct::packTwo(valid)), valid);
    });
    L.endIteration(2);
  }
}

// AllGather on bytes: block b of the output is at b * blockBytes; ours comes from `in` (in place
// when in == out + rank * blockBytes). [offset, offset + count) is this channel's part of a block.
WEFT_DEV void directAllGather(DirectLinks& L, const char* in, char* out, uint64_t blockBytes, uint64_t offset,
                              uint64_t count, uint64_t chunk) {
  const int n = L.nRanks(), me = L.rank();
  const bool inPlace = in == out + (uint64_t)me * blockBytes;
  for (uint64_t off = 0; off < count; off += chunk) {
    const int64_t nBytes = (int64_t)minU64(chunk, count - off);
    const int64_t packs = (int64_t)divUp((uint64_t)nBytes, 16);
    const uint64_t at = offset + off;
    const Pack16 first = direct::firstPack(L, in + at, nBytes);  // before the wait, as in one-shot
    L.waitSend(1);
    for (int64_t p = L.tid(); p < packs; p += L.nThreads()) {
      const int valid = direct::packValid(nBytes, p);
      const Pack16 own = p == L.tid() ? first : detail::loadUser(in + at + p * 16, valid);
      for (int q = 0; q < n; q++)
        if (q != me) L.write(q, 0, p, own, direct::packTwo(valid));
      if (!inPlace) detail::storeUser(out + (uint64_t)me * blockBytes + at + p * 16, own, valid);
    }
    probe(kProbeWritten);
    for (int64_t i = L.tid(); i < (int64_t)(n - 1) * packs; i += L.nThreads()) {
      const int q = direct::peerAt((int)(i / packs), me);
      const int64_t p = i % packs;
      const int valid = direct::packValid(nBytes, p);
      detail::storeUser(out + (uint64_t)q * blockBytes + at + p * 16, L.read(q, 0, p, direct::packTwo(valid)), valid);
    }
    probe(kProbeReceived);
    L.endIteration(1);
  }
}

}  // namespace weft::dev
