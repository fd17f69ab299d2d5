// Ring algorithms, written once over a primitives type (Prims = a protocol's primitives for
// <T, RedOp>; see proto/simple.cuh for the interface) and only calling primitives. Offsets are
// elements from the user buffers' base; n == 1 degenerates to a local copy.
//
// Ring steps: the rank at ring position pos handles, at step k, chunk ringChunkIndex(pos, k, n),
// i.e. what position pos-1 sent at step k-1 (work_math.h). Reduce-scatter phase: steps 0..n-1,
// position pos completes chunk pos at step n-1; all-gather phase: steps n..2n-2.
#pragma once

#include "device/algo/ring_args.h"

namespace weft::dev {

template <typename Prims>
WEFT_ALGO void ringAllReduce(Prims& p, const RingArgs& a) {
  const int n = a.nRanks;
  if (n == 1) {
    p.localCopy(a.chanOffset, a.chanOffset, (int64_t)a.chanCount);
    return;
  }
  const uint64_t loopElems = (uint64_t)n * a.chunkElems;
  for (uint64_t base = 0; base < a.chanCount; base += loopElems) {
    const uint64_t chunk = ringAllReduceChunk(a.chanCount, base, a.chunkElems, n, a.elemSize);
    auto at = [&](int k) {
      ElemRange r = ringAllReduceChunkRange(a.chanCount, base, chunk, ringChunkIndex(a.ringPos, k, n));
      r.offset += a.chanOffset;
      return r;
    };
    ElemRange r = at(0);
    p.send((int64_t)r.offset, (int64_t)r.count);
    for (int k = 1; k < n - 1; k++) {
      r = at(k);
      p.recvReduceSend((int64_t)r.offset, (int64_t)r.count);
    }
    r = at(n - 1);
    p.recvReduceCopySend((int64_t)r.offset, (int64_t)r.offset, (int64_t)r.count);
    for (int k = n; k < 2 * n - 2; k++) {
      r = at(k);
      p.recvCopySend((int64_t)r.offset, (int64_t)r.count);
    }
    r = at(2 * n - 2);
    p.recv((int64_t)r.offset, (int64_t)r.count);
  }
}

// AllGather and Broadcast move bytes along the ring with the same four primitives. ringCopyColl
// runs either collective in one loop with one call site per primitive, so that a kernel inlining the
// primitives holds each copy loop once: the specialized Simple copy kernel with its primitives
// split by role (SimpleProtoT's SplitRoles) held ten and ptxas spilled 760 bytes per thread, 72
// in one loop. The other kernels keep a loop per collective (below): with ringCopyColl the LL
// all_gather took 0.2-0.3 us longer (one H200, session 18). Unit tests check that both give the
// same primitive calls.
enum RingCopyOp { kRingSend, kRingCopySend, kRingRecvCopySend, kRingRecv };
struct RingCopyStep {
  int op;
  int64_t inOff, outOff;  // elements from the input / output base, where op reads or writes them
};

// AllGather, step k (0 <= k < nRanks) of the chunk at channel offset o: output block b is at
// b * count; our input is block `rank` (in place: already there). Step k receives the block of
// the rank k positions before us on the ring.
WEFT_ALGO RingCopyStep ringAllGatherStep(const RingArgs& a, uint64_t o, int k) {
  const int n = a.nRanks;
  if (k == 0) {
    const int64_t own = (int64_t)((uint64_t)a.rank * a.count + o);
    return a.inPlace ? RingCopyStep{kRingSend, (int64_t)o, 0} : RingCopyStep{kRingCopySend, (int64_t)o, own};
  }
  const int pos = (a.ringPos - k + n) % n;
  const int64_t out = (int64_t)((uint64_t)a.userRanks[pos] * a.count + o);
  return {k < n - 1 ? kRingRecvCopySend : kRingRecv, 0, out};
}

// Broadcast: a chain along the ring from the root; the rank before the root only receives.
WEFT_ALGO RingCopyStep ringBroadcastStep(const RingArgs& a, uint64_t o) {
  const int64_t off = (int64_t)o;
  if (a.rank == a.root) return a.inPlace ? RingCopyStep{kRingSend, off, 0} : RingCopyStep{kRingCopySend, off, off};
  return {a.next == a.root ? kRingRecv : kRingRecvCopySend, 0, off};
}

template <typename Prims>
WEFT_ALGO void ringCopyColl(Prims& p, const RingArgs& a, bool allGather) {
  const int n = a.nRanks;
  if (n == 1) {
    const uint64_t own = allGather ? (uint64_t)a.rank * a.count : 0;
    if (!a.inPlace) p.localCopy(a.chanOffset, own + a.chanOffset, (int64_t)a.chanCount);
    return;
  }
  const int steps = allGather ? n : 1;
  for (uint64_t off = 0; off < a.chanCount; off += a.chunkElems) {
    const int64_t len = (int64_t)minU64(a.chunkElems, a.chanCount - off);
    const uint64_t o = a.chanOffset + off;
    for (int k = 0; k < steps; k++) {
      const RingCopyStep s = allGather ? ringAllGatherStep(a, o, k) : ringBroadcastStep(a, o);
      switch (s.op) {
        case kRingSend: p.send(s.inOff, len); break;
        case kRingCopySend: p.copySend(s.inOff, s.outOff, len); break;
        case kRingRecvCopySend: p.recvCopySend(s.outOff, len); break;
        default: p.recv(s.outOff, len); break;
      }
    }
  }
}

// The reductions in one loop, for the same reason as ringCopyColl: one call site per primitive
// (six, against eleven in the three loops below). RingSumStep is step k of a chunk.
enum RingSumOp { kSumSend, kSumRecvReduceSend, kSumRecvReduceCopySend, kSumRecvCopySend, kSumRecv, kSumRecvReduceCopy };
struct RingSumStep {
  int op;
  int64_t inOff, outOff, n;
};

// AllReduce, step k (0 <= k <= 2 nRanks - 2) of the loop at `base` (chunk: ringAllReduceChunk).
WEFT_ALGO RingSumStep ringAllReduceStep(const RingArgs& a, uint64_t base, uint64_t chunk, int k) {
  const int n = a.nRanks;
  const ElemRange r = ringAllReduceChunkRange(a.chanCount, base, chunk, ringChunkIndex(a.ringPos, k, n));
  const int64_t off = (int64_t)(r.offset + a.chanOffset);
  int op = kSumRecv;
  if (k == 0) op = kSumSend;
  else if (k < n - 1) op = kSumRecvReduceSend;
  else if (k == n - 1) op = kSumRecvReduceCopySend;
  else if (k < 2 * n - 2) op = kSumRecvCopySend;
  return {op, off, off, (int64_t)r.count};
}

// ReduceScatter, step k (0 <= k < nRanks) of the chunk at channel offset o.
WEFT_ALGO RingSumStep ringReduceScatterStep(const RingArgs& a, uint64_t o, int64_t len, int k) {
  const int n = a.nRanks;
  const int64_t in = (int64_t)((uint64_t)a.userRanks[ringChunkIndex(a.ringPos, k, n)] * a.count + o);
  const int op = k == 0 ? kSumSend : k < n - 1 ? kSumRecvReduceSend : kSumRecvReduceCopy;
  return {op, in, (int64_t)o, len};
}

// Reduce: the chain that ends at the root.
WEFT_ALGO RingSumStep ringReduceStep(const RingArgs& a, uint64_t o, int64_t len) {
  const int op = a.rank == a.root ? kSumRecvReduceCopy : a.prev == a.root ? kSumSend : kSumRecvReduceSend;
  return {op, (int64_t)o, (int64_t)o, len};
}

template <typename Prims>
WEFT_ALGO void ringSumColl(Prims& p, const RingArgs& a, int func) {
  const int n = a.nRanks;
  if (n == 1) {
    p.localCopy(a.chanOffset, a.chanOffset, (int64_t)a.chanCount);
    return;
  }
  const bool allReduce = func == kFuncAllReduce;
  const uint64_t loopElems = allReduce ? (uint64_t)n * a.chunkElems : a.chunkElems;
  const int steps = allReduce ? 2 * n - 1 : func == kFuncReduceScatter ? n : 1;
  for (uint64_t base = 0; base < a.chanCount; base += loopElems) {
    const uint64_t chunk = allReduce ? ringAllReduceChunk(a.chanCount, base, a.chunkElems, n, a.elemSize) : 0;
    const int64_t len = (int64_t)minU64(a.chunkElems, a.chanCount - base);
    const uint64_t o = a.chanOffset + base;
    for (int k = 0; k < steps; k++) {
      const RingSumStep s = allReduce                    ? ringAllReduceStep(a, base, chunk, k)
                            : func == kFuncReduceScatter ? ringReduceScatterStep(a, o, len, k)
                                                         : ringReduceStep(a, o, len);
      switch (s.op) {
        case kSumSend: p.send(s.inOff, s.n); break;
        case kSumRecvReduceSend: p.recvReduceSend(s.inOff, s.n); break;
        case kSumRecvReduceCopySend: p.recvReduceCopySend(s.inOff, s.outOff, s.n); break;
        case kSumRecvCopySend: p.recvCopySend(s.outOff, s.n); break;
        case kSumRecvReduceCopy: p.recvReduceCopy(s.inOff, s.outOff, s.n); break;
        default: p.recv(s.outOff, s.n); break;
      }
    }
  }
}

// Output block b is at b * count; our input is block `rank` (in place: already there).
template <typename Prims>
WEFT_ALGO void ringAllGather(Prims& p, const RingArgs& a) {
  const int n = a.nRanks;
  const uint64_t own = (uint64_t)a.rank * a.count;
  if (n == 1) {
    if (!a.inPlace) p.localCopy(a.chanOffset, own + a.chanOffset, (int64_t)a.chanCount);
    return;
  }
  for (uint64_t off = 0; off < a.chanCount; off += a.chunkElems) {
    const int64_t len = (int64_t)minU64(a.chunkElems, a.chanCount - off);
    const uint64_t o = a.chanOffset + off;
    if (a.inPlace) p.send((int64_t)o, len);
    else p.copySend((int64_t)o, (int64_t)(own + o), len);
    for (int k = 1; k < n; k++) {
      int pos = (a.ringPos - k + n) % n;
      int64_t out = (int64_t)((uint64_t)a.userRanks[pos] * a.count + o);
      if (k < n - 1) p.recvCopySend(out, len);
      else p.recv(out, len);
    }
  }
}

// Input block b is at b * count; we end with the reduction of block `rank` in the output.
template <typename Prims>
WEFT_ALGO void ringReduceScatter(Prims& p, const RingArgs& a) {
  const int n = a.nRanks;
  if (n == 1) {
    p.localCopy(a.chanOffset, a.chanOffset, (int64_t)a.chanCount);
    return;
  }
  for (uint64_t off = 0; off < a.chanCount; off += a.chunkElems) {
    const int64_t len = (int64_t)minU64(a.chunkElems, a.chanCount - off);
    const uint64_t o = a.chanOffset + off;
    auto in = [&](int k) {
      return (int64_t)((uint64_t)a.userRanks[ringChunkIndex(a.ringPos, k, n)] * a.count + o);
    };
    p.send(in(0), len);
    for (int k = 1; k < n - 1; k++) p.recvReduceSend(in(k), len);
    p.recvReduceCopy(in(n - 1), (int64_t)o, len);
  }
}

// A chain along the ring from the root: root sends, the rank before the root only receives.
template <typename Prims>
WEFT_ALGO void ringBroadcast(Prims& p, const RingArgs& a) {
  if (a.nRanks == 1) {
    if (!a.inPlace) p.localCopy(a.chanOffset, a.chanOffset, (int64_t)a.chanCount);
    return;
  }
  for (uint64_t off = 0; off < a.chanCount; off += a.chunkElems) {
    const int64_t len = (int64_t)minU64(a.chunkElems, a.chanCount - off);
    const int64_t o = (int64_t)(a.chanOffset + off);
    if (a.rank == a.root) {
      if (a.inPlace) p.send(o, len);
      else p.copySend(o, o, len);
    } else if (a.next == a.root) {
      p.recv(o, len);
    } else {
      p.recvCopySend(o, len);
    }
  }
}

// A chain along the ring ending at the root: the rank after the root starts it.
template <typename Prims>
WEFT_ALGO void ringReduce(Prims& p, const RingArgs& a) {
  if (a.nRanks == 1) {
    p.localCopy(a.chanOffset, a.chanOffset, (int64_t)a.chanCount);
    return;
  }
  for (uint64_t off = 0; off < a.chanCount; off += a.chunkElems) {
    const int64_t len = (int64_t)minU64(a.chunkElems, a.chanCount - off);
    const int64_t o = (int64_t)(a.chanOffset + off);
    if (a.rank == a.root) p.recvReduceCopy(o, o, len);
    else if (a.prev == a.root) p.send(o, len);
    else p.recvReduceSend(o, len);
  }
}

// Which connections a ring rank uses for a collective (Broadcast/Reduce chains use one at ends).
WEFT_ALGO bool ringUsesRecv(int func, const RingArgs& a) {
  if (a.nRanks == 1) return false;
  if (func == kFuncBroadcast) return a.rank != a.root;
  if (func == kFuncReduce) return a.prev != a.root;
  return true;
}
WEFT_ALGO bool ringUsesSend(int func, const RingArgs& a) {
  if (a.nRanks == 1) return false;
  if (func == kFuncBroadcast) return a.next != a.root;
  if (func == kFuncReduce) return a.rank != a.root;
  return true;
}

}  // namespace weft::dev
