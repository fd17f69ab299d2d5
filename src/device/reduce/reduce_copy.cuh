// The data mover under every protocol: nThreads threads move n elements from one or two sources
// to one or two destinations, reducing the sources. The fast path moves 16-byte packs, kUnroll
// per thread in flight per source, each warp touching 512 contiguous bytes per instruction. It is
// taken when all pointers share their offset modulo 16 (after an element-wise head); otherwise
// copies use the widest common word and reductions go element by element (byte-assembled when
// an element itself is misaligned). Pure copies are compiled once, on bytes, for every type.
#pragma once

#include "device/reduce/functors.cuh"

namespace weft::dev {

// 16-byte packs in flight per thread and source. Pure copies take 8 (as NCCL does on sm_80+): a
// one-way NVLink stream from 24 SMs needs that many bytes in flight to reach the link's rate.
// Reductions keep 4: with two sources, 8 would spill registers at 128 per thread. A kernel that
// inlines copies and reductions side by side takes kNarrowCopyUnroll for its copies (CopyUnroll).
constexpr int kCopyUnroll = 8;
constexpr int kNarrowCopyUnroll = 4;
constexpr int kReduceUnroll = 4;
// Words in flight per thread on the misaligned copy path (rarely taken). 8 made ptxas spill in
// every Simple kernel that inlines its copies (ptxas -v, sm_90: SendRecv 32 -> 0 bytes of stack,
// Ring copy 72 -> 0).
constexpr int kWordUnroll = 4;

namespace detail {

template <int Bytes>
struct UintOf;
template <> struct UintOf<1> { using T = uint8_t; };
template <> struct UintOf<2> { using T = uint16_t; };
template <> struct UintOf<4> { using T = uint32_t; };
template <> struct UintOf<8> { using T = uint64_t; };

template <typename T>
WEFT_DEV T loadElem(const char* p, bool natural) {
  if (natural) return arch::bitCast<T>((typename UintOf<sizeof(T)>::T)arch::ldN<sizeof(T)>(p));
  uint64_t bits = 0;
WEFT_UNROLL
  for (int b = 0; b < (int)sizeof(T); b++) bits |= arch::ldN<1>(p + b) << (8 * b);
  return elemFromBits<T>(bits);
}

template <typename T>
WEFT_DEV void storeElem(char* p, T v, bool natural) {
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  if (natural) {
    arch::stN<sizeof(T)>(p, bits);
    return;
  }
WEFT_UNROLL
  for (int b = 0; b < (int)sizeof(T); b++) arch::stN<1>(p + b, bits >> (8 * b));
}

template <typename Fn, int NSrcs, bool Pre, bool Post, typename V>
WEFT_DEV V combine(const Fn& fn, const V& a, const V& b) {
  V v;
  if constexpr (NSrcs == 2) v = Pre ? fn.reducePre(a, b) : fn.reduce(a, b);
  else v = Pre ? fn.preOp(a) : a;
  if constexpr (Post) v = fn.postOp(v);
  return v;
}

// nPacks 16-byte packs; all pointers 16-byte aligned. Each round issues all its loads (the unroll
// per source and thread) before the first store; the guards only bite in the last round. One
// copy of the unrolled body keeps the code (and ptxas time) small.
// Thread t moves packs t + u x nThreads, so a round's U instructions of one warp are nThreads
// packs apart (warp-contiguous hunks were measured no faster on H200).
template <typename Fn, int NSrcs, int NDsts, bool Pre, bool Post, int CopyUnroll = kCopyUnroll>
WEFT_DEV void packLoop(const Fn& fn, int tid, int nThreads, const char* s0, const char* s1,
                       char* d0, char* d1, int64_t nPacks) {
  constexpr int U = NSrcs == 1 && !Pre && !Post ? CopyUnroll : kReduceUnroll;
  const int64_t kStride = nThreads;
  const int64_t first = tid;
  for (int64_t base = first; base < nPacks; base += (int64_t)nThreads * U) {
    Pack16 a[U], b[U];
WEFT_UNROLL
    for (int u = 0; u < U; u++) {
      int64_t p = base + (int64_t)u * kStride;
      if (p < nPacks) {
        a[u] = arch::ld16(s0 + p * 16);
        if constexpr (NSrcs == 2) b[u] = arch::ld16(s1 + p * 16);
      }
    }
WEFT_UNROLL
    for (int u = 0; u < U; u++) {
      int64_t p = base + (int64_t)u * kStride;
      if (p < nPacks) {
        Pack16 v = combine<Fn, NSrcs, Pre, Post>(fn, a[u], b[u]);
        arch::st16(d0 + p * 16, v);
        if constexpr (NDsts == 2) arch::st16(d1 + p * 16, v);
      }
    }
  }
}

// n elements one at a time (two in flight per thread); `natural`: every pointer is
// aligned to the element size.
template <typename Fn, int NSrcs, int NDsts, bool Pre, bool Post>
WEFT_DEV void elemLoop(const Fn& fn, int tid, int nThreads, const char* s0, const char* s1,
                       char* d0, char* d1, int64_t n, bool natural) {
  using T = typename Fn::Elem;
  constexpr int U = 2;  // the slow path: misaligned buffers only
  constexpr int64_t S = sizeof(T);
  for (int64_t base = 0; base < n; base += (int64_t)nThreads * U) {
    T a[U], b[U];
WEFT_UNROLL
    for (int u = 0; u < U; u++) {
      int64_t i = base + tid + u * nThreads;
      if (i < n) {
        a[u] = loadElem<T>(s0 + i * S, natural);
        if constexpr (NSrcs == 2) b[u] = loadElem<T>(s1 + i * S, natural);
      }
    }
WEFT_UNROLL
    for (int u = 0; u < U; u++) {
      int64_t i = base + tid + u * nThreads;
      if (i < n) {
        T v = combine<Fn, NSrcs, Pre, Post>(fn, a[u], b[u]);
        storeElem<T>(d0 + i * S, v, natural);
        if constexpr (NDsts == 2) storeElem<T>(d1 + i * S, v, natural);
      }
    }
  }
}

// The few (< 16) elements before and after the 16-byte-aligned body.
template <typename Fn, int NSrcs, int NDsts, bool Pre, bool Post>
WEFT_DEV void edgeElems(const Fn& fn, int tid, int nThreads, const char* s0, const char* s1, char* d0, char* d1,
                        int64_t n) {
  using T = typename Fn::Elem;
  constexpr int64_t S = sizeof(T);
  for (int64_t i = tid; i < n; i += nThreads) {
    T a = loadElem<T>(s0 + i * S, true);
    T b = NSrcs == 2 ? loadElem<T>(s1 + i * S, true) : a;
    T v = combine<Fn, NSrcs, Pre, Post>(fn, a, b);
    storeElem<T>(d0 + i * S, v, true);
    if constexpr (NDsts == 2) storeElem<T>(d1 + i * S, v, true);
  }
}

// n words of W bytes (W = 1, 2, 4, 8), pointers aligned to W.
template <int W, int NDsts>
WEFT_DEV void wordCopyLoop(int tid, int nThreads, const char* s, char* d0, char* d1, int64_t n) {
  constexpr int U = kWordUnroll;
  for (int64_t base = 0; base < n; base += (int64_t)nThreads * U) {
    uint64_t v[U];
WEFT_UNROLL
    for (int u = 0; u < U; u++) {
      int64_t i = base + tid + u * nThreads;
      if (i < n) v[u] = arch::ldN<W>(s + i * W);
    }
WEFT_UNROLL
    for (int u = 0; u < U; u++) {
      int64_t i = base + tid + u * nThreads;
      if (i < n) {
        arch::stN<W>(d0 + i * W, v[u]);
        if constexpr (NDsts == 2) arch::stN<W>(d1 + i * W, v[u]);
      }
    }
  }
}

WEFT_DEV uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Byte copy to one or two destinations, any alignment. Inlined: it runs once per slice on the
// data path of every copy collective, and a non-inlined call costs thousands of cycles (kHotFn).
template <int NDsts, int CopyUnroll>
WEFT_DEV void copyBytes(int tid, int nThreads, const char* s, char* d0, char* d1,
                                       int64_t nBytes) {
  // Widest word size W for which all pointers have the same offset modulo W.
  uintptr_t diff = (addr(s) ^ addr(d0)) | (NDsts == 2 ? (addr(s) ^ addr(d1)) : 0);
  int w = 16;
  while (w > 1 && (diff & (uintptr_t)(w - 1))) w >>= 1;
  int64_t head = (int64_t)((w - (addr(s) & (uintptr_t)(w - 1))) & (uintptr_t)(w - 1));
  if (head > nBytes) head = nBytes;
  wordCopyLoop<1, NDsts>(tid, nThreads, s, d0, d1, head);
  s += head;
  d0 += head;
  if (NDsts == 2) d1 += head;
  nBytes -= head;
  int64_t nWords = nBytes / w;
  switch (w) {
    case 16: packLoop<FnCopy, 1, NDsts, false, false, CopyUnroll>(FnCopy{}, tid, nThreads, s, nullptr, d0, d1, nWords); break;
    case 8: wordCopyLoop<8, NDsts>(tid, nThreads, s, d0, d1, nWords); break;
    case 4: wordCopyLoop<4, NDsts>(tid, nThreads, s, d0, d1, nWords); break;
    case 2: wordCopyLoop<2, NDsts>(tid, nThreads, s, d0, d1, nWords); break;
    default: wordCopyLoop<1, NDsts>(tid, nThreads, s, d0, d1, nWords); break;
  }
  int64_t done = nWords * w;
  wordCopyLoop<1, NDsts>(tid, nThreads, s + done, d0 + done, NDsts == 2 ? d1 + done : nullptr,
                         nBytes - done);
}

}  // namespace detail

// n elements of Fn::Elem: dst(s) = combine(src0[, src1]). With NSrcs == 2, src1 is the rank's own
// input; with NSrcs == 1 and Pre, src0 is. Pre applies Fn::preOp to the own input, Post applies
// Fn::postOp to the result. Threads tid in [0, nThreads) of the caller's group all call this.
// Callers wrap it in a non-inlined function per variant: inlining it into every call site of an
// algorithm multiplies the code, and ptxas time and memory, many times over. CopyUnroll: packs in
// flight per thread of a pure copy (kCopyUnroll or kNarrowCopyUnroll).
template <typename Fn, int NSrcs, int NDsts, bool Pre, bool Post, int CopyUnroll = kCopyUnroll>
WEFT_DEV void reduceCopy(const Fn& fn, int tid, int nThreads, const void* src0, const void* src1,
                         void* dst0, void* dst1, int64_t n) {
  using T = typename Fn::Elem;
  constexpr int64_t S = sizeof(T);
  const char* s0 = static_cast<const char*>(src0);
  const char* s1 = static_cast<const char*>(src1);
  char* d0 = static_cast<char*>(dst0);
  char* d1 = static_cast<char*>(dst1);
  if constexpr (NSrcs == 1 && !Pre && !Post) {
    detail::copyBytes<NDsts, CopyUnroll>(tid, nThreads, s0, d0, d1, n * S);
  } else {
    uintptr_t a0 = detail::addr(s0);
    uintptr_t any = a0 | detail::addr(d0);
    uintptr_t diff = detail::addr(d0) ^ a0;
    if (NSrcs == 2) { any |= detail::addr(s1); diff |= detail::addr(s1) ^ a0; }
    if (NDsts == 2) { any |= detail::addr(d1); diff |= detail::addr(d1) ^ a0; }
    const bool natural = (any % S) == 0;
    if ((diff & 15) != 0 || !natural) {
      detail::elemLoop<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, nThreads, s0, s1, d0, d1, n, natural);
      return;
    }
    // Same offset modulo 16 everywhere: elements up to the next 16-byte boundary, packs, tail.
    int64_t head = (int64_t)((16 - (a0 & 15)) & 15) / S;
    if (head > n) head = n;
    detail::edgeElems<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, nThreads, s0, s1, d0, d1, head);
    int64_t off = head * S;
    int64_t nPacks = (n - head) * S / 16;
    detail::packLoop<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, nThreads, s0 + off, NSrcs == 2 ? s1 + off : nullptr, d0 + off,
                                                   NDsts == 2 ? d1 + off : nullptr, nPacks);
    off += nPacks * 16;
    detail::edgeElems<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, nThreads, s0 + off, NSrcs == 2 ? s1 + off : nullptr, d0 + off,
                                                   NDsts == 2 ? d1 + off : nullptr, n - off / S);
  }
}

// reduceCopy as a function of its own (not inlined into the caller's loop, so its loops get every
// register): one call per Simple slice costs little next to the slice's hundreds of KiB. fn comes
// by value: a reference would make the caller keep its whole Prims object in local memory.
template <typename Fn, int NSrcs, int NDsts, bool Pre, bool Post>
WEFT_DEV_NOINLINE void reduceCopyOutlined(const Fn fn, int tid, int nThreads, const void* src0, const void* src1,
                                          void* dst0, void* dst1, int64_t n) {
  reduceCopy<Fn, NSrcs, NDsts, Pre, Post>(fn, tid, nThreads, src0, src1, dst0, dst1, n);
}

}  // namespace weft::dev
