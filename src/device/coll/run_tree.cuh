// Runs one Tree AllReduce work item on one channel with the Simple primitives: builds the
// primitives algo/tree.cuh asks for (warp group, peers, functor role, input buffer) on the
// channel's tree connections (DevChannel.tree, ConnInfo to/from the parent and children).
#pragma once

#include "device/algo/tree.cuh"
#include "device/coll/run_work.cuh"

namespace weft::dev {

// Named barrier of a split warp group between two primitives objects (after the Simple
// protocol's slice barriers).
constexpr int kTreeGroupBarrierBase = 1 + kSimpleMaxGroups * kSimpleReadyDepth;
static_assert(kTreeGroupBarrierBase + kSimpleMaxGroups <= arch::kNamedBarriers, "not enough named barriers");

// The functor of each role (tree.cuh): the pre-op only where the own input is read first, the
// post-op only where the reduction completes. Other functors have neither and serve every role.
template <typename Fn>
struct TreeRoleFns {
  using First = Fn;
  using Middle = Fn;
  using Last = Fn;
};
template <typename T>
struct TreeRoleFns<FnPreMulSum<T>> {
  using First = FnPreMulSum<T>;
  using Middle = FnSum<T>;
  using Last = FnSum<T>;
};
template <typename T>
struct TreeRoleFns<FnSumPostDiv<T>> {
  using First = FnSum<T>;
  using Middle = FnSum<T>;
  using Last = FnSumPostDiv<T>;
};

template <typename F, typename Body>
WEFT_DEV void withTreePrims(const SimpleGroup& g, const WorkEnv& env, ConnInfo* recvConn, ConnInfo* sendConn,
                            const void* input, void* output, uint64_t chunkElems, const DevWork& w, Body& body) {
  using T = typename F::Elem;
  SimplePrims<F> p(g, env.sh, env.comm->abortFlag, recvConn, sendConn, static_cast<const T*>(input),
                   static_cast<T*>(output), chunkElems, F::fromWork(w));
  body(p);
  p.finish();
}

template <typename Fn>
WEFT_DEV void runTreeAllReduce(const DevWork& w, const WorkEnv& env) {
  using T = typename Fn::Elem;
  using Roles = TreeRoleFns<Fn>;
  DevChannel& ch = env.comm->channels[env.channel];
  TreeArgs a;
  a.up = ch.tree.up;
  a.nDown = 0;
  for (int j = 0; j < kMaxTreeArity; j++) {
    a.down[j] = ch.tree.down[j];
    if (a.down[j] >= 0) a.nDown = j + 1;
  }
  a.chanOffset = w.chanOffset;
  a.chanCount = w.chanCount;
  // Every connection of a communicator has the same Simple step size.
  const int anyPeer = a.up >= 0 ? a.up : a.down[0];
  a.chunkElems = simpleChunkElems(w.chunkElems, connStepBytes(anyPeer >= 0 ? &ch.peers[anyPeer].recv : nullptr, nullptr),
                                  sizeof(T));
  auto use = [&](int group, int recvPeer, int sendPeer, int role, bool inputIsOutput, auto&& body) {
    // Up and down both cross links: an even split.
    const SimpleGroup g = group == kTreeGroupUp     ? simpleSendGroup(kSimpleDataWarps / 2)
                          : group == kTreeGroupDown ? simpleRecvGroup(kSimpleDataWarps / 2)
                                                    : simpleFullGroup();
    if (inGroup(g)) {
      ConnInfo* rc = recvPeer >= 0 ? &ch.peers[recvPeer].recv : nullptr;
      ConnInfo* sc = sendPeer >= 0 ? &ch.peers[sendPeer].send : nullptr;
      const void* in = inputIsOutput ? static_cast<const void*>(w.recvBuff) : w.sendBuff;
      switch (role) {
        case kTreeFnFirst: withTreePrims<typename Roles::First>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
        case kTreeFnMiddle: withTreePrims<typename Roles::Middle>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
        case kTreeFnLast: withTreePrims<typename Roles::Last>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
        default: withTreePrims<Fn>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
      }
      // The group's next primitives object reloads the connection steps this one saved (all its
      // threads read them).
      if (group != kTreeGroupAll) arch::barSync(kTreeGroupBarrierBase + g.index, (g.nDataWarps + 1) * arch::kWarpSize);
    }
    if (group == kTreeGroupAll) arch::syncBlock();
  };
  treeAllReduce(use, a);
}

}  // namespace weft::dev
