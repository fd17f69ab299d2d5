// Tree AllReduce, written once over a primitives type like the ring algorithms: reduce up the
// tree towards the root, then broadcast the result down, chunk by chunk. Inside a node the tree
// is a chain (one child); across nodes the chain heads form a double binary tree, so a head may
// have up to kMaxTreeArity children (its chain successor and two other nodes' heads).
//
// The protocol primitives have one receive peer and one send peer. How the algorithm uses them:
//  - Every rank but the root: split. One warp group reduces up (receive from the children, add
//    the own input, send to the parent) while the other broadcasts down (receive from the parent,
//    store, send to the children). The two groups run concurrently on disjoint connections, so
//    the up and down streams overlap like NCCL's split tree, and no rank ever waits for down data
//    before sending up (which keeps any tree shape deadlock-free).
//  - Several children: each chunk passes through one primitives object per child in turn,
//    within the group (up: the partial sum lives in the output buffer between them, the
//    broadcast later overwrites it; down: the chunk is received once and then sent to every
//    child from the output). Chaining objects per chunk, rather than one pass per child, keeps
//    every child's stream flowing at once. Each object is built, used and finished before the
//    next (the protocol's per-group counters allow one live object per warp group).
//  - The root with one child does both directions in one primitive: receive from the child,
//    reduce, store the final value and send it back down (recvReduceCopySend). With several
//    children it runs NCCL's non-split order: the whole reduce phase, then the whole broadcast
//    (its up stream never waits for its down stream, so this cannot deadlock either).
// Functor roles, so that pre-ops apply once to the own input and post-ops once to the final
// value when several primitives build one reduction: kTreeFnFirst (pre-op, no post-op) reads the
// user's input; kTreeFnMiddle (neither) and kTreeFnLast (post-op only) read the partial sum in the
// output; kTreeFnFull has both (single-child paths). Broadcast primitives use kTreeFnMiddle.
#pragma once

#include "device/algo/ring_args.h"

namespace weft::dev {

enum TreeGroup : int { kTreeGroupAll = 0, kTreeGroupUp = 1, kTreeGroupDown = 2 };
enum TreeFnRole : int { kTreeFnFull = 0, kTreeFnFirst = 1, kTreeFnMiddle = 2, kTreeFnLast = 3 };

struct TreeArgs {
  int up;                     // parent rank, -1 at the root
  int down[kMaxTreeArity];    // children, -1 where none (filled from index 0)
  int nDown;
  uint64_t chanOffset;        // this channel's part
  uint64_t chanCount;
  uint64_t chunkElems;        // after simpleChunkElems(): never 0
};

// `use(group, recvPeer, sendPeer, role, inputIsOutput, body)` builds the primitives of warp group
// `group` for one receive peer and one send peer (-1: none) with the functor of `role`, whose
// input is the user's send buffer (or, with inputIsOutput, the receive buffer), calls body(prims),
// finishes them and synchronises the group (the whole block for kTreeGroupAll) before returning.
// Threads outside the group skip the call. Groups Up and Down run concurrently: the caller waits
// for both after treeAllReduce returns.
template <typename Use>
WEFT_ALGO void treeAllReduce(Use& use, const TreeArgs& a) {
  const uint64_t chunk = a.chunkElems;
  auto forChunks = [&](auto&& f) {
    for (uint64_t off = 0; off < a.chanCount; off += chunk)
      f((int64_t)(a.chanOffset + off), (int64_t)minU64(chunk, a.chanCount - off));
  };
  const int last = a.nDown - 1;
  if (a.up < 0) {
    if (a.nDown == 0) {
      use(kTreeGroupAll, -1, -1, kTreeFnFull, false,
          [&](auto& p) { p.localCopy((int64_t)a.chanOffset, (int64_t)a.chanOffset, (int64_t)a.chanCount); });
    } else if (a.nDown == 1) {
      use(kTreeGroupAll, a.down[0], a.down[0], kTreeFnFull, false,
          [&](auto& p) { forChunks([&](int64_t o, int64_t n) { p.recvReduceCopySend(o, o, n); }); });
    } else {
      forChunks([&](int64_t o, int64_t n) {
        use(kTreeGroupAll, a.down[0], -1, kTreeFnFirst, false, [&](auto& p) { p.recvReduceCopy(o, o, n); });
        for (int j = 1; j <= last; j++)
          use(kTreeGroupAll, a.down[j], -1, j < last ? kTreeFnMiddle : kTreeFnLast, true,
              [&](auto& p) { p.recvReduceCopy(o, o, n); });
      });
      forChunks([&](int64_t o, int64_t n) {
        for (int j = 0; j <= last; j++)
          use(kTreeGroupAll, -1, a.down[j], kTreeFnMiddle, true, [&](auto& p) { p.send(o, n); });
      });
    }
    return;
  }
  // Up group: reduce towards the parent.
  if (a.nDown <= 1) {
    const int child = a.nDown ? a.down[0] : -1;
    use(kTreeGroupUp, child, a.up, kTreeFnFull, false, [&](auto& p) {
      forChunks([&](int64_t o, int64_t n) {
        if (child >= 0) p.recvReduceSend(o, n);
        else p.send(o, n);
      });
    });
  } else {
    forChunks([&](int64_t o, int64_t n) {
      use(kTreeGroupUp, a.down[0], -1, kTreeFnFirst, false, [&](auto& p) { p.recvReduceCopy(o, o, n); });
      for (int j = 1; j < last; j++)
        use(kTreeGroupUp, a.down[j], -1, kTreeFnMiddle, true, [&](auto& p) { p.recvReduceCopy(o, o, n); });
      use(kTreeGroupUp, a.down[last], a.up, kTreeFnMiddle, true, [&](auto& p) { p.recvReduceSend(o, n); });
    });
  }
  // Down group: broadcast from the parent.
  if (a.nDown <= 1) {
    const int child = a.nDown ? a.down[0] : -1;
    use(kTreeGroupDown, a.up, child, kTreeFnMiddle, true, [&](auto& p) {
      forChunks([&](int64_t o, int64_t n) {
        if (child >= 0) p.recvCopySend(o, n);
        else p.recv(o, n);
      });
    });
  } else {
    forChunks([&](int64_t o, int64_t n) {
      use(kTreeGroupDown, a.up, a.down[0], kTreeFnMiddle, true, [&](auto& p) { p.recvCopySend(o, n); });
      for (int j = 1; j <= last; j++)
        use(kTreeGroupDown, -1, a.down[j], kTreeFnMiddle, true, [&](auto& p) { p.send(o, n); });
    });
  }
}

}  // namespace weft::dev
