// Point-to-point parts of a SendRecv work item (used for ncclSend/ncclRecv, AlltoAll, Gather,
// Scatter). The send and receive parts run on separate warp groups with their own primitives,
// so each part is a plain chunk loop; a self pair is a local copy.
#pragma once

#include "device/algo/ring_args.h"

namespace weft::dev {

template <typename Prims>
WEFT_ALGO void p2pSend(Prims& p, uint64_t offset, uint64_t count, uint64_t chunk) {
  for (uint64_t off = 0; off < count; off += chunk) p.send((int64_t)(offset + off), (int64_t)minU64(chunk, count - off));
}

template <typename Prims>
WEFT_ALGO void p2pRecv(Prims& p, uint64_t offset, uint64_t count, uint64_t chunk) {
  for (uint64_t off = 0; off < count; off += chunk) p.recv((int64_t)(offset + off), (int64_t)minU64(chunk, count - off));
}

template <typename Prims>
WEFT_ALGO void p2pSelf(Prims& p, uint64_t sendOffset, uint64_t recvOffset, uint64_t count) {
  p.localCopy((int64_t)sendOffset, (int64_t)recvOffset, (int64_t)count);
}

}  // namespace weft::dev
