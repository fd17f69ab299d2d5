// The symmetric collectives: kAlgoDirect items on the Simple kernel, for calls whose buffers lie
// in symmetric windows (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC) that every rank of the
// communicator mapped flat (core/dev_window.h). Every rank's buffer is then at the same place of
// its slot, so a block reaches its peers' buffers by address arithmetic and moves the data with
// plain loads and stores: no connection buffer, no copy through a staging slot, no step handshake.
//
// Each part (one block, one channel's range of the elements) runs
//   barrier; move; barrier
// with the same block of every peer (the planner gives every rank the same parts). The first
// barrier says the peers' kernels have started, so everything their streams wrote before the call
// is in place and their outputs are no longer in use; the second that every peer has finished
// reading this rank's input and writing its output, so the kernel may end.
//   AllReduce (two-shot): rank r reduces segment r of the part from every rank's input, in rank
//     order (every rank's result has the same bits), and stores it into every rank's output. Only
//     rank r touches segment r anywhere, so in-place calls are safe. (A one-shot variant, where
//     each rank reduces everything into its own output, would race in place: the peers still read
//     the input it overwrites; ranks may differ in being in place, so the choice cannot depend on it.)
//   AllGather: rank r stores its input into block r of every rank's output.
//   ReduceScatter: rank r reduces block r of every rank's input into its output.
// In the general kernel, reductions over n inputs fold them into the output one input at a time
// (n - 1 passes, each a call of a reduceCopy instantiation Ring already has, so no code per
// functor and a small stack); AllReduce's last pass also stores into the next rank's output
// (with two ranks one pass reads the peer's input and writes the peer's output, the link busy
// both ways at once), and copies to several outputs go two per pass. The specialized kernels
// (sums) do a fold over 3+ ranks, and AllReduce's stores into every output, in one pass
// (symFoldWide).
#pragma once

#include "device/coll/run_work.cuh"

namespace weft::dev {

// Where a block stands in its symmetric barriers.
struct SymBarrier {
  DevSymSignals* signals0;  // team rank 0's signals
  uint64_t stride;          // bytes between two ranks' signals
  const volatile uint32_t* abortFlag;
  SimpleShared* sh;
  int me, n, slot;
  uint64_t epoch;  // barriers this slot has passed

  WEFT_DEV DevSymSignals* signalsOf(int rank) const {
    return reinterpret_cast<DevSymSignals*>(reinterpret_cast<char*>(signals0) + (uint64_t)rank * stride);
  }
  WEFT_DEV volatile uint64_t* arriveAt(int rank, int from) const { return &signalsOf(rank)->arrive[slot][from]; }

  // Every thread of the block. False when the communicator was aborted while waiting.
  WEFT_DEV bool sync() {
    const int tid = arch::threadId();
    epoch++;
    arch::syncBlock();  // the block's loads and stores of this phase are done
    if (tid < n && tid != me) {
      arch::fenceAcqRelSys();  // ... and visible everywhere before the peer learns of it
      arch::stReleaseSys(arriveAt(tid, me), epoch);
      (void)directWait(arriveAt(me, tid), epoch, sh, abortFlag);  // an abort is recorded in sh
    }
    arch::syncBlock();
    return arch::ldVolatileShared(&sh->aborted) == 0;
  }
};

WEFT_DEV SymBarrier symBarrierOf(const DevWork& w, const WorkEnvT<SimpleShared>& env) {
  const ChannelView& v = *env.view;
  if (v.symSignals == nullptr || v.nRanks > kSymMaxRanks || w.symSlot >= kMaxChannels) arch::trap();
  SymBarrier b;
  b.signals0 = v.symSignals;
  b.stride = v.symSignalStride;
  b.abortFlag = v.abortFlag;
  b.sh = env.sh;
  b.me = v.rank;
  b.n = v.nRanks;
  b.slot = w.symSlot;
  b.epoch = arch::ldN<8>(&b.signalsOf(b.me)->epoch[b.slot]);
  return b;
}

// Saves the slot's epoch for the next item or kernel (after the last sync: every thread has read it).
WEFT_DEV void symSaveEpoch(const SymBarrier& b) {
  if (arch::threadId() == 0) arch::stN<8>(&b.signalsOf(b.me)->epoch[b.slot], b.epoch);
}

// Rank r's copy of a buffer whose team rank 0 copy is at `base0`.
constexpr uint64_t kSymStrideUnit = 4ull * 1024 * 1024 * 1024;  // DevWork::peerStride4G counts 4 GiB
template <typename T>
WEFT_DEV T* symPeer(T* base0, const DevWork& w, int r) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(base0) + (uint64_t)w.peerStride4G * kSymStrideUnit * (uint64_t)r);
}

// The data movement of the symmetric runners: a call in the general kernel (whose stack must stay
// small), inlined in the specialized kernels (Inline): a call saves and restores registers in
// local memory each time, which small calls pay for (session 18, Ring copies: ~1.3 us per
// all_gather of 8 B - 256 KiB on one H200).
template <bool Inline, typename Fn, int NSrcs, int NDsts, bool Pre, bool Post>
WEFT_DEV void symMove(const Fn& fn, const void* s0, const void* s1, void* d0, void* d1, int64_t n) {
  const int tid = arch::threadId();
  if constexpr (Inline) reduceCopy<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, kSimpleThreads, s0, s1, d0, d1, n);
  else reduceCopyOutlined<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, kSimpleThreads, s0, s1, d0, d1, n);
}

// One pass of a fold: out = combine(a, b) (Pre: b scaled first). The last pass applies Fn's
// post-op and also stores the result at `also` when that is not null.
template <bool Inline, typename Fn, int NSrcs, bool Pre, bool Last>
WEFT_DEV void symFoldPass(const Fn& fn, const typename Fn::Elem* a, const typename Fn::Elem* b,
                          typename Fn::Elem* out, typename Fn::Elem* also, int64_t n) {
  constexpr bool kPost = Last && Fn::kPostOp;
  if (Last && also != nullptr) symMove<Inline, Fn, NSrcs, 2, Pre, kPost>(fn, a, b, out, also, n);
  else symMove<Inline, Fn, NSrcs, 1, Pre, kPost>(fn, a, b, out, nullptr, n);
}

// out[0, n) = the reduction of in(r)[0, n) over every rank r, where in(r) is rank r's input at
// element offset `at`: this rank's own input first, then the next ranks' in ring order. Only this
// rank computes these elements (its segment, its block), so the order needs no agreement with the
// others; starting with its own input lets `out` be that input (in place) without losing it.
// The last pass also stores the result at `also` when it is not null (AllReduce: the next rank's
// output, one pass fewer; with two ranks the whole exchange is then one pass that reads the
// peer's input and writes the peer's output). In place, `also` is the next rank's input at `at`,
// which only this rank reads, in the first pass: a block barrier separates that from the last
// pass, and with two ranks they are one pass, in which each thread loads a pack before it
// stores it.
template <bool Inline, typename Fn>
WEFT_DEV void symFold(const Fn& fn, const DevWork& w, int me, int nRanks, uint64_t at, typename Fn::Elem* out,
                      typename Fn::Elem* also, int64_t n) {
  using T = typename Fn::Elem;
  const T* in0 = static_cast<const T*>(w.sendBuff) + at;
  const T* own = symPeer(in0, w, me);
  int k = 1;  // inputs folded in so far
  if constexpr (Fn::kPreOp) {
    // PreMulSum: the own input alone, scaled; the others scaled as they are folded in.
    symFoldPass<Inline, Fn, 1, true, false>(fn, own, nullptr, out, nullptr, n);
  } else {
    const T* next = symPeer(in0, w, (me + 1) % nRanks);
    if (nRanks == 2) symFoldPass<Inline, Fn, 2, false, true>(fn, own, next, out, also, n);
    else symFoldPass<Inline, Fn, 2, false, false>(fn, own, next, out, nullptr, n);
    k = 2;
  }
  for (; k < nRanks; k++) {
    arch::syncBlock();  // the previous pass wrote `out` with another thread-to-element mapping at the edges
    const T* in = symPeer(in0, w, (me + k) % nRanks);
    if (k == nRanks - 1) symFoldPass<Inline, Fn, 2, Fn::kPreOp, true>(fn, out, in, out, also, n);
    else symFoldPass<Inline, Fn, 2, Fn::kPreOp, false>(fn, out, in, out, nullptr, n);
  }
}

// Copies `bytes` from src to dstOf(k) for every k in [0, count) whose destination is not null,
// two destinations per pass (one read of src feeds both stores).
template <bool Inline, typename DstOf>
WEFT_DEV void symCopyToEach(const void* src, int count, const DstOf& dstOf, int64_t bytes) {
  void* pending = nullptr;
  for (int k = 0; k < count; k++) {
    void* d = dstOf(k);
    if (d == nullptr) continue;
    if (pending == nullptr) {
      pending = d;
      continue;
    }
    symMove<Inline, FnCopy, 1, 2, false, false>(FnCopy{}, src, nullptr, pending, d, bytes);
    pending = nullptr;
  }
  if (pending != nullptr) symMove<Inline, FnCopy, 1, 1, false, false>(FnCopy{}, src, nullptr, pending, nullptr, bytes);
}

// The one-pass fold of the specialized kernels (3+ ranks; sums, which need no pre- or post-op):
// each thread loads its packs from every rank's input, kSymWays inputs in flight together, folds
// them in the order symFold uses (own input, then the next ranks in ring order: the same bits)
// and stores the result into each destination. n - 1 fold passes and n - 2 copy passes become
// one, with no block barrier between them: at small sizes each pass cost a round trip over the
// link, at large ones the passes' local reads and writes. An element is loaded and stored by one
// thread, every load before any store, so in place is safe here too.

// Inputs whose loads are in flight at once, and packs per thread and input: 4 x 1 packs, as many
// remote ones as a fold pass has (ptxas, sm_90: at most 8 bytes of spills; 4 x 2 or 8 x 1: 52-60).
constexpr int kSymWays = 4;
constexpr int kSymUnroll = 1;

// Where the one-pass fold reads and writes. Rank r's copy of a buffer is r * stride bytes after
// team rank 0's; destination k (of nOut) is rank (me + k) % n's output, so with nOut == 1 only
// this rank's own.
struct SymWideSpan {
  const char* in0;  // team rank 0's input, at the first element
  char* out0;       // team rank 0's output, at the first element
  uint64_t stride;
  int me, n, nOut;
};

template <typename V>
WEFT_DEV V symLoad(const char* p) {
  if constexpr (std::is_same_v<V, Pack16>) return arch::ld16(p);
  else return detail::loadElem<V>(p, true);
}
template <typename V>
WEFT_DEV void symStore(char* p, const V& v) {
  if constexpr (std::is_same_v<V, Pack16>) arch::st16(p, v);
  else detail::storeElem<V>(p, v, true);
}

// Units [begin, end) of V (16-byte packs or single elements) of the span.
template <typename Fn, typename V, int U>
WEFT_DEV void symWideLoop(const Fn& fn, const SymWideSpan& s, int64_t begin, int64_t end) {
  constexpr int64_t kBytes = sizeof(V);
  const int64_t nThreads = kSimpleThreads;
  for (int64_t base = begin + arch::threadId(); base < end; base += nThreads * U) {
    V acc[U];
    const char* own = s.in0 + (uint64_t)s.me * s.stride;
WEFT_UNROLL
    for (int u = 0; u < U; u++)
      if (base + u * nThreads < end) acc[u] = symLoad<V>(own + (base + u * nThreads) * kBytes);
    for (int k = 1; k < s.n; k += kSymWays) {
      V v[kSymWays][U];
WEFT_UNROLL
      for (int w = 0; w < kSymWays; w++) {
        if (k + w >= s.n) continue;  // (not break: clang would not unroll the loop)
        const int peer = s.me + k + w < s.n ? s.me + k + w : s.me + k + w - s.n;  // k + w < n
        const char* in = s.in0 + (uint64_t)peer * s.stride;
WEFT_UNROLL
        for (int u = 0; u < U; u++)
          if (base + u * nThreads < end) v[w][u] = symLoad<V>(in + (base + u * nThreads) * kBytes);
      }
WEFT_UNROLL
      for (int w = 0; w < kSymWays; w++)
        if (k + w < s.n)
WEFT_UNROLL
          for (int u = 0; u < U; u++) acc[u] = fn.reduce(acc[u], v[w][u]);
    }
    int dst = s.me;
    for (int k = 0; k < s.nOut; k++) {
      char* out = s.out0 + (uint64_t)dst * s.stride;
WEFT_UNROLL
      for (int u = 0; u < U; u++)
        if (base + u * nThreads < end) symStore<V>(out + (base + u * nThreads) * kBytes, acc[u]);
      dst = dst + 1 == s.n ? 0 : dst + 1;
    }
  }
}

// The fold of `len` elements over the span in one pass. False (nothing done) when the input and
// the output differ in their offset modulo 16 or are not aligned to the element: the caller then
// folds pass by pass, as reduceCopy handles any alignment. (Every rank's copy has the same offset
// modulo 16 as the team rank 0 one: the stride is a multiple of 4 GiB.) A call of its own, one
// per item: inlined beside the kernel's other paths it made the specialized kernels spill (ptxas,
// sm_90: up to 2196 bytes of spill loads; called: none).
template <typename Fn>
WEFT_DEV_NOINLINE bool symFoldWide(const Fn fn, const SymWideSpan s, int64_t len) {
  using T = typename Fn::Elem;
  constexpr int64_t S = sizeof(T);
  const uintptr_t in = detail::addr(s.in0), out = detail::addr(s.out0);
  if (((in | out) % S) != 0 || ((in ^ out) & 15) != 0) return false;
  int64_t head = (int64_t)((16 - (in & 15)) & 15) / S;  // elements before the first whole pack
  if (head > len) head = len;
  const int64_t perPack = 16 / S;
  const int64_t nPacks = (len - head) / perPack;
  symWideLoop<Fn, T, 1>(fn, s, 0, head);
  SymWideSpan packs = s;
  packs.in0 += head * S;
  packs.out0 += head * S;
  symWideLoop<Fn, Pack16, kSymUnroll>(fn, packs, 0, nPacks);
  symWideLoop<Fn, T, 1>(fn, s, head + nPacks * perPack, len);
  return true;
}

// This part's segment `seg` of `segs` (element offset and count), on 16-byte boundaries.
WEFT_DEV void symSegment(uint64_t count, int elemBytes, int segs, int seg, uint64_t* off, uint64_t* len) {
  const uint64_t align = 16 / (uint64_t)elemBytes;
  uint64_t per = (count + segs - 1) / segs;
  per = (per + align - 1) / align * align;
  const uint64_t begin = per * (uint64_t)seg < count ? per * (uint64_t)seg : count;
  const uint64_t end = seg == segs - 1 ? count : (begin + per < count ? begin + per : count);
  *off = begin;
  *len = end - begin;
}

// Whether this kernel folds in one pass (symFoldWide): the specialized kernels (Inline) on 3+ ranks
// for reductions without pre- or post-op. Two ranks already take one pass; the general kernel keeps
// its calls (its stack) and the functors that scale.
template <typename Fn, bool Inline>
WEFT_DEV bool symOnePass(int nRanks) {
  if constexpr (Inline && !Fn::kPreOp && !Fn::kPostOp) return nRanks >= 3;
  else return false;
}

// The one-pass span of a fold at element offset `at` of the inputs into `out0` (team rank 0's
// output at the right element), nOut destinations.
template <typename T>
WEFT_DEV SymWideSpan symWideSpanOf(const DevWork& w, const SymBarrier& bar, uint64_t at, T* out0, int nOut) {
  const T* in0 = static_cast<const T*>(w.sendBuff) + at;
  return SymWideSpan{reinterpret_cast<const char*>(in0), reinterpret_cast<char*>(out0),
                     (uint64_t)w.peerStride4G * kSymStrideUnit, bar.me, bar.n, nOut};
}

template <typename Fn, bool Inline = false>
WEFT_DEV void runSymmetricAllReduce(const DevWork& w, const WorkEnvT<SimpleShared>& env) {
  using T = typename Fn::Elem;
  SymBarrier bar = symBarrierOf(w, env);
  const int me = bar.me, n = bar.n;
  uint64_t segOff, segLen;
  symSegment(w.chanCount, (int)sizeof(T), n, me, &segOff, &segLen);
  const uint64_t at = w.chanOffset + segOff;
  T* out0 = static_cast<T*>(w.recvBuff) + at;
  if (bar.sync()) {
    // One pass stores the fold into every rank's output; otherwise fold, then copy.
    const bool done = segLen > 0 && symOnePass<Fn, Inline>(n) &&
                      symFoldWide(Fn::fromWork(w), symWideSpanOf(w, bar, at, out0, n), (int64_t)segLen);
    if (segLen > 0 && !done) {
      T* outMine = symPeer(out0, w, me);
      symFold<Inline, Fn>(Fn::fromWork(w), w, me, n, at, outMine, symPeer(out0, w, (me + 1) % n), (int64_t)segLen);
      if (n > 2) {
        arch::syncBlock();  // the copies read outMine with another thread-to-element mapping at the edges
        auto dst = [&](int k) {  // every rank starts with a different peer
          return static_cast<void*>(symPeer(out0, w, (me + 2 + k) % n));
        };
        // Called, also in the specialized kernels: inlined beside the fold they spilled (ptxas,
        // sm_90: 1624 bytes of spill loads in the half-sum kernel; called: none).
        symCopyToEach<false>(outMine, n - 2, dst, (int64_t)(segLen * sizeof(T)));
      }
    }
    (void)bar.sync();
  }
  symSaveEpoch(bar);
}

template <typename Fn, bool Inline = false>
WEFT_DEV void runSymmetricReduceScatter(const DevWork& w, const WorkEnvT<SimpleShared>& env) {
  using T = typename Fn::Elem;
  SymBarrier bar = symBarrierOf(w, env);
  const uint64_t at = (uint64_t)bar.me * w.count + w.chanOffset;  // block `me` of every input
  T* out0 = static_cast<T*>(w.recvBuff) + w.chanOffset;  // only this rank's copy is written
  if (bar.sync()) {
    const int64_t len = (int64_t)w.chanCount;
    const bool done =
        symOnePass<Fn, Inline>(bar.n) && symFoldWide(Fn::fromWork(w), symWideSpanOf(w, bar, at, out0, 1), len);
    if (!done) symFold<Inline, Fn>(Fn::fromWork(w), w, bar.me, bar.n, at, symPeer(out0, w, bar.me), nullptr, len);
    (void)bar.sync();
  }
  symSaveEpoch(bar);
}

// AllReduce or ReduceScatter items of functor Fn.
template <typename Fn, bool Inline = false>
WEFT_DEV void runSymmetricReduce(const DevWork& w, const WorkEnvT<SimpleShared>& env) {
  if (w.func == kFuncAllReduce) runSymmetricAllReduce<Fn, Inline>(w, env);
  else runSymmetricReduceScatter<Fn, Inline>(w, env);
}

template <bool Inline = false>
WEFT_DEV void runSymmetricAllGather(const DevWork& w, const WorkEnvT<SimpleShared>& env) {
  SymBarrier bar = symBarrierOf(w, env);
  const uint64_t es = (uint64_t)dataTypeBytes(w.dataType);
  const uint64_t bytes = w.chanCount * es;
  const char* in = symPeer(static_cast<const char*>(w.sendBuff), w, bar.me) + w.chanOffset * es;
  const uint64_t at = ((uint64_t)bar.me * w.count + w.chanOffset) * es;  // block `me` of every output
  if (bar.sync()) {
    auto dst = [&](int k) -> void* {  // every rank starts with its own output (skipped in place)
      char* out = symPeer(static_cast<char*>(w.recvBuff), w, (bar.me + k) % bar.n) + at;
      return out == in ? nullptr : out;
    };
    symCopyToEach<Inline>(in, bar.n, dst, (int64_t)bytes);
    (void)bar.sync();
  }
  symSaveEpoch(bar);
}

}  // namespace weft::dev
