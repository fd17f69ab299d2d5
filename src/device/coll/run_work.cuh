// Runs one work item on one channel: picks the connections, builds the primitives and calls the
// algorithm. Copy-only functions (Broadcast, AllGather, SendRecv) run on bytes; reductions run on
// their element type with the work's functor. The protocol is a traits type (SimpleProto,
// LLProto, LL128Proto): its primitives, warp groups, shared state and chunk rule.
#pragma once

#include <type_traits>

#include "device/algo/p2p_direct.cuh"
#include "device/algo/ring.cuh"
#include "device/algo/sendrecv.cuh"
#include "device/proto/ll.cuh"
#include "device/proto/simple.cuh"
#if defined(WEFT_ARCH_HAS_LL128)  // set by the arch layer (included above) where 128-byte stores arrive whole
#include "device/proto/ll128.cuh"
#endif

namespace weft::dev {

// Everything a work runner needs besides the work item.
template <typename Shared>
struct WorkEnvT {
  const ChannelView* view;
  Shared* sh;
};
using WorkEnv = WorkEnvT<SimpleShared>;

// OutlineCopies: see SimplePrims. SplitRoles: the runners build one instance of the primitives
// per role (PrimsRole), so the algorithm is compiled twice; the specialized kernels take it.
template <bool OutlineCopies, bool SplitRoles = false, int CopyUnroll = kCopyUnroll>
struct SimpleProtoT {
  static constexpr int kId = kProtoSimple;
  // The general kernel runs every item through one non-inlined body per functor, the hot ones too
  // (kernel_dispatch.cuh): Simple moves big slices, so a call per item costs nothing measurable,
  // and inlined Simple loops made the kernel's own frame (spills, registers saved around calls) the
  // largest part of the stack every thread of every launch reserves.
  static constexpr bool kInlineHotWork = false;
  static constexpr uint64_t kNoConnStepBytes = kSimpleMinStepBytes;
  using Shared = SimpleShared;
  using Group = SimpleGroup;
  template <typename Fn, int Role = kRoleAny>
  using Prims = SimplePrims<Fn, OutlineCopies, Role, CopyUnroll>;
  static constexpr bool kSplitRoles = SplitRoles;
  static WEFT_DEV bool isSyncThread(const Group& g) { return isSyncWarp(g); }
  static WEFT_DEV Group fullGroup() { return simpleFullGroup(); }
  // sendWarps: DevComm::p2pSendWarps (0: an even split).
  static WEFT_DEV Group sendGroup(int sendWarps) { return simpleSendGroup(sendWarps); }
  static WEFT_DEV Group recvGroup(int sendWarps) { return simpleRecvGroup(sendWarps); }
  static WEFT_DEV uint64_t chunkElems(uint64_t workChunk, uint64_t stepBytes, int elemSize) {
    return simpleChunkElems(workChunk, stepBytes, elemSize);
  }
  // The first named barrier the protocol leaves free.
  static constexpr int kFirstFreeBarrier = 1 + kSimpleMaxGroups * kSimpleReadyDepth;
  // Tree's up and down groups: both cross links, so an even split.
  static WEFT_DEV Group treeUpGroup() { return simpleSendGroup(kSimpleDataWarps / 2); }
  static WEFT_DEV Group treeDownGroup() { return simpleRecvGroup(kSimpleDataWarps / 2); }
};
using SimpleProto = SimpleProtoT<false>;

// LL and LL128 differ only in their primitives, block size (warps) and chunk rule; the warp groups
// have the same shape (flag_link.cuh).
template <int Id, template <typename> class PrimsT, int NWarps>
struct FlagProto {
  static_assert(Id == kProtoLL || Id == kProtoLL128, "a flag protocol");
  static constexpr int kId = Id;
  // LL inlines the hot functors for latency (kHotFn). LL128's general kernel runs every item out
  // of line, so that it fits CUDA's default stack (cuobjdump: 424 B; with the hot functors inlined
  // 1216 B); the hot ones have kernels of their own instead (special_kernels.h: kSpecialLL128*).
  static constexpr bool kInlineHotWork = Id == kProtoLL;
  static constexpr uint64_t kNoConnStepBytes = Id == kProtoLL ? kLLMinStepBytes : kLL128MinStepBytes;
  using Shared = FlagShared;
  using Group = FlagGroup;
  // Every thread of a group runs the same code: one role.
  template <typename Fn, int Role = kRoleAny>
  using Prims = PrimsT<Fn>;
  static constexpr bool kSplitRoles = false;  // so withRole never asks for isSyncThread
  static WEFT_DEV Group fullGroup() { return flagFullGroup(NWarps); }
  static WEFT_DEV Group sendGroup(int) { return flagSendGroup(NWarps); }
  static WEFT_DEV Group recvGroup(int) { return flagRecvGroup(NWarps); }
  static WEFT_DEV uint64_t chunkElems(uint64_t workChunk, uint64_t stepBytes, int elemSize) {
    return Id == kProtoLL ? llChunkElems(workChunk, stepBytes, elemSize) : ll128ChunkElems(workChunk, stepBytes, elemSize);
  }
  static constexpr int kFirstFreeBarrier = 1 + kFlagMaxGroups;
  static WEFT_DEV Group treeUpGroup() { return flagSendGroup(NWarps); }
  static WEFT_DEV Group treeDownGroup() { return flagRecvGroup(NWarps); }
};

using LLProto = FlagProto<kProtoLL, LLPrims, kLLWarps>;
#if defined(WEFT_ARCH_HAS_LL128)
using LL128Proto = FlagProto<kProtoLL128, LL128Prims, kLL128Warps>;
#endif

template <typename P = SimpleProto>
WEFT_DEV uint64_t connStepBytes(const ConnInfo* recv, const ConnInfo* send) {
  uint64_t b = ~0ull;
  if (recv) b = minU64(b, (uint64_t)recv->stepBytes[P::kId]);
  if (send) b = minU64(b, (uint64_t)send->stepBytes[P::kId]);
  return b == ~0ull ? P::kNoConnStepBytes : b;
}

// Ring arguments in units of `elemSize`-byte elements; `scale` converts the work's element
// counts to those units (dataTypeBytes for byte-wise copies, 1 otherwise).
template <typename Shared>
WEFT_DEV RingArgs makeRingArgs(const DevWork& w, const WorkEnvT<Shared>& env, int elemSize, uint64_t scale) {
  const ChannelView& v = *env.view;
  const DevRing& ring = v.channel.ring;
  RingArgs a;
  a.rank = v.rank;
  a.nRanks = v.nRanks;
  a.ringPos = ring.index;
  a.prev = ring.prev;
  a.next = ring.next;
  a.userRanks = ring.userRanks;
  a.root = w.root;
  a.count = w.count * scale;
  a.chanOffset = w.chanOffset * scale;
  a.chanCount = w.chanCount * scale;
  a.chunkElems = 0;  // set once the connections are known
  a.elemSize = elemSize;
  const char* s = static_cast<const char*>(w.sendBuff);
  const char* r = static_cast<const char*>(w.recvBuff);
  const uint64_t block = w.count * (uint64_t)dataTypeBytes(w.dataType) * (uint64_t)a.rank;
  switch (w.func) {
    case kFuncAllGather: a.inPlace = s == r + block; break;
    case kFuncReduceScatter: a.inPlace = r == s + block; break;
    default: a.inPlace = s == r; break;
  }
  return a;
}

// Calls body(role) with role = std::integral_constant<int, PrimsRole>: once with this thread's
// role where P splits them, else once with kRoleAny.
template <typename P, typename Body>
WEFT_DEV void withRole(const typename P::Group& g, Body&& body) {
  if constexpr (P::kSplitRoles) {
    if (P::isSyncThread(g)) body(std::integral_constant<int, kRoleSync>{});
    else body(std::integral_constant<int, kRoleData>{});
  } else {
    body(std::integral_constant<int, kRoleAny>{});
  }
}

template <typename Fn, typename P, int Role>
WEFT_DEV void runRingCollAs(const DevWork& w, const WorkEnvT<typename P::Shared>& env, const RingArgs& a,
                            ConnInfo* recvConn, ConnInfo* sendConn) {
  using T = typename Fn::Elem;
  typename P::template Prims<Fn, Role> p(P::fullGroup(), env.sh, env.view->abortFlag, recvConn, sendConn,
                                         static_cast<const T*>(w.sendBuff), static_cast<T*>(w.recvBuff), a.chunkElems,
                                         Fn::fromWork(w));
  if constexpr (Fn::kIsCopy) {
    if constexpr (P::kSplitRoles) ringCopyColl(p, a, w.func == kFuncAllGather);
    else if (w.func == kFuncAllGather) ringAllGather(p, a);
    else ringBroadcast(p, a);
  } else if constexpr (P::kSplitRoles) {
    ringSumColl(p, a, w.func);
  } else {
    if (w.func == kFuncAllReduce) ringAllReduce(p, a);
    else if (w.func == kFuncReduceScatter) ringReduceScatter(p, a);
    else ringReduce(p, a);
  }
  p.finish();
}

// A ring collective with functor Fn (FnCopy for Broadcast/AllGather, on bytes).
template <typename Fn, typename P = SimpleProto>
WEFT_DEV void runRingColl(const DevWork& w, const WorkEnvT<typename P::Shared>& env) {
  using T = typename Fn::Elem;
  const uint64_t scale = Fn::kIsCopy ? (uint64_t)dataTypeBytes(w.dataType) : 1;
  RingArgs a = makeRingArgs(w, env, sizeof(T), scale);
  const DevChannel& ch = env.view->channel;
  ConnInfo* recvConn = ringUsesRecv(w.func, a) ? &ch.peers[a.prev].recv : nullptr;
  ConnInfo* sendConn = ringUsesSend(w.func, a) ? &ch.peers[a.next].send : nullptr;
  a.chunkElems = P::chunkElems(w.chunkElems * scale, connStepBytes<P>(recvConn, sendConn), sizeof(T));
  withRole<P>(P::fullGroup(),
              [&](auto role) { runRingCollAs<Fn, P, decltype(role)::value>(w, env, a, recvConn, sendConn); });
}

// SendRecv: the send part to sendPeer and the receive part from recvPeer, concurrently.
template <typename P = SimpleProto>
WEFT_DEV void runSendRecv(const DevWork& w, const WorkEnvT<typename P::Shared>& env) {
  using Group = typename P::Group;
  const int rank = env.view->rank;
  const uint64_t es = (uint64_t)dataTypeBytes(w.dataType);
  DevPeer* peers = env.view->channel.peers;
  const char* in = static_cast<const char*>(w.sendBuff);
  char* out = static_cast<char*>(w.recvBuff);
  if (w.sendPeer == rank || w.recvPeer == rank) {
    if (w.sendPeer != w.recvPeer) arch::trap();  // a self send must come with its self receive
    if (inGroup(P::fullGroup())) {
      typename P::template Prims<FnCopy> p(P::fullGroup(), env.sh, env.view->abortFlag, nullptr, nullptr,
                                           reinterpret_cast<const uint8_t*>(in), reinterpret_cast<uint8_t*>(out), 0,
                                           FnCopy{});
      p2pSelf(p, w.chanOffset * es, w.recvOffset * es, w.chanCount * es);
    }
    return;
  }
  const bool doSend = w.sendPeer >= 0 && w.chanCount > 0;
  const bool doRecv = w.recvPeer >= 0 && w.recvCount > 0;
  const Group sendGroup = doRecv ? P::sendGroup(env.view->p2pSendWarps) : P::fullGroup();
  const Group recvGroup = doSend ? P::recvGroup(env.view->p2pSendWarps) : P::fullGroup();
  if (doSend && inGroup(sendGroup)) {
    ConnInfo* conn = &peers[w.sendPeer].send;
    const uint64_t bytes = w.chanCount * es;
    const uint8_t* src = reinterpret_cast<const uint8_t*>(in);
    bool sent = false;
    if constexpr (P::kId == kProtoSimple) {
      const DevRegSlot* regs = peers[w.sendPeer].sendRegs;
      sent = (w.flags & kWorkFlagDirectSend) && regs != nullptr &&
             p2pDirectQualifies(bytes, (uint64_t)conn->stepBytes[kProtoSimple]) &&
             p2pDirectSend(sendGroup, env.sh, env.view->abortFlag, conn, regs, src + w.chanOffset * es, bytes);
    }
    if (!sent) {
      uint64_t chunk = P::chunkElems(w.chunkElems * es, connStepBytes<P>(nullptr, conn), 1);
      withRole<P>(sendGroup, [&](auto role) {
        typename P::template Prims<FnCopy, decltype(role)::value> p(sendGroup, env.sh, env.view->abortFlag, nullptr,
                                                                    conn, src, nullptr, chunk, FnCopy{});
        p2pSend(p, w.chanOffset * es, bytes, chunk);
        p.finish();
      });
    }
  }
  if (doRecv && inGroup(recvGroup)) {
    ConnInfo* conn = &peers[w.recvPeer].recv;
    const uint64_t bytes = w.recvCount * es;
    if constexpr (P::kId == kProtoSimple) {
      // redOpArg/count: the receive buffer's registration token and offset (DevWork)
      if (p2pDirectQualifies(bytes, (uint64_t)conn->stepBytes[kProtoSimple]) &&
          p2pDirectRecv(recvGroup, env.sh, env.view->abortFlag, conn, w.redOpArg, w.count + w.recvOffset * es, bytes))
        return;
    }
    uint64_t chunk = P::chunkElems(w.chunkElems * es, connStepBytes<P>(conn, nullptr), 1);
    withRole<P>(recvGroup, [&](auto role) {
      typename P::template Prims<FnCopy, decltype(role)::value> p(
          recvGroup, env.sh, env.view->abortFlag, conn, nullptr, nullptr, reinterpret_cast<uint8_t*>(out), chunk,
          FnCopy{});
      p2pRecv(p, w.recvOffset * es, bytes, chunk);
      p.finish();
    });
  }
}

}  // namespace weft::dev
