// Runs one Direct work item (algo kAlgoDirect, proto kProtoLL) on one channel with every thread of
// the LL kernel's block: the channel's connections to and from every peer, the step's payload as
// chunk, then the algorithm of algo/direct.cuh. The host plans Direct only on channels where every
// rank is connected both ways with every other rank (planner.h: PlanShape::directChannels).
#pragma once

#include "device/algo/direct.cuh"
#include "device/coll/run_work.cuh"

namespace weft::dev {

// The channel's one connection pair between two ranks (the peer is 1 - rank).
struct PairConns {
  ConnInfo* recv;
  ConnInfo* send;
};
WEFT_DEV PairConns pairConnections(const ChannelView& view) {
  DevPeer& peer = view.channel.peers[1 - view.rank];
  if (peer.recv.buffs[kProtoLL] == nullptr || peer.send.buffs[kProtoLL] == nullptr) arch::trap();  // no connection
  return {&peer.recv, &peer.send};
}

// One-shot AllReduce between two ranks through the LL primitives of the channel's one connection
// pair: per chunk, send our input, then combine the peer's with ours, the lower rank's value first
// on both ends (the same bits, as DirectLinks' rank-order fold gives). Same lines, steps and slots
// as DirectLinks, so Direct, Ring and SendRecv work follow each other on these connections, and
// 1.1-1.3 us faster per call (session 12, two ranks on one H200, CUDA graph, 8 B-4 KiB float sum:
// 3.2-3.5 us against DirectLinks' 4.4-4.7; DirectLinks' general machinery for n peers costs that
// much even at one peer).
template <typename Fn>
WEFT_DEV void runDirectPairAllReduce(const DevWork& w, const WorkEnvT<FlagShared>& env) {
  using T = typename Fn::Elem;
  const int me = env.view->rank;
  const PairConns c = pairConnections(*env.view);
  const uint64_t chunk = llChunkElems(w.chunkElems, connStepBytes<LLProto>(c.recv, c.send), (int)sizeof(T));
  LLPrims<Fn> p(llFullGroup(), env.sh, env.view->abortFlag, c.recv, c.send, static_cast<const T*>(w.sendBuff),
                static_cast<T*>(w.recvBuff), chunk, Fn::fromWork(w));
  for (uint64_t off = 0; off < w.chanCount; off += chunk) {
    const int64_t n = (int64_t)minU64(chunk, w.chanCount - off);
    const int64_t at = (int64_t)(w.chanOffset + off);
    p.send(at, n);
    p.recvReduceCopyInRankOrder(at, at, n, me == 0);
  }
  p.finish();
}

// AllGather between two ranks, the same way: per chunk, send our block's part (copying it into
// our output block unless in place), then store the peer's part of its block. One step each way
// per chunk, as DirectLinks' AllGather. Session 15 (one H200 shared by both ranks, CUDA graph,
// 8 B-4 KiB): 3.5-3.9 us through DirectLinks, 2.9-3.0 this way (Ring/LL's time).
WEFT_DEV void runDirectPairAllGather(const DevWork& w, const WorkEnvT<FlagShared>& env, const char* in, char* out,
                                     uint64_t blockBytes, uint64_t es) {
  const int me = env.view->rank;
  const PairConns c = pairConnections(*env.view);
  const uint64_t chunk = llChunkElems(w.chunkElems * es, connStepBytes<LLProto>(c.recv, c.send), 1);
  LLPrims<FnCopy> p(llFullGroup(), env.sh, env.view->abortFlag, c.recv, c.send,
                    reinterpret_cast<const uint8_t*>(in), reinterpret_cast<uint8_t*>(out), chunk, FnCopy{});
  const uint64_t count = w.chanCount * es;
  const uint64_t mine = (uint64_t)me * blockBytes, peers = (uint64_t)(1 - me) * blockBytes;
  const bool inPlace = in == out + mine;
  for (uint64_t off = 0; off < count; off += chunk) {
    const int64_t n = (int64_t)minU64(chunk, count - off);
    const int64_t at = (int64_t)(w.chanOffset * es + off);
    if (inPlace) p.send(at, n);
    else p.copySend(at, (int64_t)mine + at, n);
    p.recv((int64_t)peers + at, n);
  }
  p.finish();
}

// AllReduce with functor Fn: one-shot, or two-shot with kWorkFlagTwoShot.
template <typename Fn>
WEFT_DEV void runDirectAllReduce(const DevWork& w, const WorkEnvT<FlagShared>& env) {
  using T = typename Fn::Elem;
  const Fn fn = Fn::fromWork(w);
  const T* in = static_cast<const T*>(w.sendBuff);
  T* out = static_cast<T*>(w.recvBuff);
  if (env.view->nRanks == 1) {
    flagLocal(fn, kFlagSrcIn | kFlagDstOut | kFlagPost, arch::threadId(), kLLThreads,
              reinterpret_cast<const char*>(in + w.chanOffset), reinterpret_cast<char*>(out + w.chanOffset),
              (int64_t)(w.chanCount * sizeof(T)));
    return;
  }
  if (env.view->nRanks == 2 && !(w.flags & kWorkFlagTwoShot)) {
    runDirectPairAllReduce<Fn>(w, env);
    return;
  }
  DirectLinks links(*env.view, env.sh, kLLThreads);
  const uint64_t chunk = llChunkElems(w.chunkElems, links.stepBytes(), (int)sizeof(T));
  if (w.flags & kWorkFlagTwoShot) directAllReduceTwoShot(links, fn, in, out, w.chanOffset, w.chanCount, chunk);
  else directAllReduceOneShot(links, fn, in, out, w.chanOffset, w.chanCount, chunk);
  links.finish();
}

// AllGather, on bytes.
WEFT_DEV void runDirectAllGather(const DevWork& w, const WorkEnvT<FlagShared>& env) {
  const uint64_t es = (uint64_t)dataTypeBytes(w.dataType);
  const char* in = static_cast<const char*>(w.sendBuff);
  char* out = static_cast<char*>(w.recvBuff);
  const uint64_t blockBytes = w.count * es;
  if (env.view->nRanks == 1) {
    const uint64_t at = w.chanOffset * es;
    if (in != out) flagLocal(FnCopy{}, kFlagSrcIn | kFlagDstOut, arch::threadId(), kLLThreads, in + at, out + at,
                             (int64_t)(w.chanCount * es));
    return;
  }
  if (env.view->nRanks == 2) {
    runDirectPairAllGather(w, env, in, out, blockBytes, es);
    return;
  }
  DirectLinks links(*env.view, env.sh, kLLThreads);
  const uint64_t chunk = llChunkElems(w.chunkElems * es, links.stepBytes(), 1);
  directAllGather(links, in, out, blockBytes, w.chanOffset * es, w.chanCount * es, chunk);
  links.finish();
}

}  // namespace weft::dev
