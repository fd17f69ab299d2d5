// Runs one Tree AllReduce work item on one channel with protocol P's primitives (Simple, LL or
// LL128: coll/run_work.cuh's traits): builds the primitives algo/tree.cuh asks for (warp group,
// peers, functor role, input buffer) on the channel's tree connections (DevChannel.tree, ConnInfo
// to/from the parent and children).
#pragma once

#include "device/algo/tree.cuh"
#include "device/coll/run_work.cuh"

namespace weft::dev {

// Named barriers of a split warp group between two primitives objects: the first two ids
// after the protocol's own barriers.
template <typename P>
constexpr int treeGroupBarrier(int groupIndex) {
  static_assert(P::kFirstFreeBarrier + 2 <= arch::kNamedBarriers, "not enough named barriers");
  return P::kFirstFreeBarrier + groupIndex;
}

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

template <typename P, typename F, typename Body>
WEFT_DEV void withTreePrims(const typename P::Group& g, const WorkEnvT<typename P::Shared>& env, ConnInfo* recvConn,
                            ConnInfo* sendConn, const void* input, void* output, uint64_t chunkElems, const DevWork& w,
                            Body& body) {
  using T = typename F::Elem;
  typename P::template Prims<F> p(g, env.sh, env.view->abortFlag, recvConn, sendConn, static_cast<const T*>(input),
                                  static_cast<T*>(output), chunkElems, F::fromWork(w));
  body(p);
  p.finish();
}

template <typename Fn, typename P = SimpleProto>
WEFT_DEV void runTreeAllReduce(const DevWork& w, const WorkEnvT<typename P::Shared>& env) {
  using T = typename Fn::Elem;
  using Roles = TreeRoleFns<Fn>;
  using Group = typename P::Group;
  const DevChannel& ch = env.view->channel;
  TreeArgs a;
  a.up = ch.tree.up;
  a.nDown = 0;
  for (int j = 0; j < kMaxTreeArity; j++) {
    a.down[j] = ch.tree.down[j];
    if (a.down[j] >= 0) a.nDown = j + 1;
  }
  a.chanOffset = w.chanOffset;
  a.chanCount = w.chanCount;
  // Every connection of a communicator has the same step size per protocol.
  const int anyPeer = a.up >= 0 ? a.up : a.down[0];
  a.chunkElems = P::chunkElems(w.chunkElems, connStepBytes<P>(anyPeer >= 0 ? &ch.peers[anyPeer].recv : nullptr, nullptr),
                               sizeof(T));
  auto use = [&](int group, int recvPeer, int sendPeer, int role, bool inputIsOutput, auto&& body) {
    const Group g = group == kTreeGroupUp     ? P::treeUpGroup()
                    : group == kTreeGroupDown ? P::treeDownGroup()
                                              : P::fullGroup();
    if (inGroup(g)) {
      ConnInfo* rc = recvPeer >= 0 ? &ch.peers[recvPeer].recv : nullptr;
      ConnInfo* sc = sendPeer >= 0 ? &ch.peers[sendPeer].send : nullptr;
      const void* in = inputIsOutput ? static_cast<const void*>(w.recvBuff) : w.sendBuff;
      switch (role) {
        case kTreeFnFirst: withTreePrims<P, typename Roles::First>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
        case kTreeFnMiddle: withTreePrims<P, typename Roles::Middle>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
        case kTreeFnLast: withTreePrims<P, typename Roles::Last>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
        default: withTreePrims<P, Fn>(g, env, rc, sc, in, w.recvBuff, a.chunkElems, w, body); break;
      }
      // The group's next primitives object reloads the connection steps this one saved (all its
      // threads read them).
      if (group != kTreeGroupAll) arch::barSync(treeGroupBarrier<P>(g.index), groupThreads(g));
    }
    if (group == kTreeGroupAll) arch::syncBlock();
  };
  treeAllReduce(use, a);
}

}  // namespace weft::dev
