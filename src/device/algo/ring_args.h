// What a ring algorithm needs to know about its rank, ring and work item: plain values, so the
// algorithms compile for the device and, against a mock protocol, for CPU tests.
#pragma once

#include <cstdint>

#include "device/work_math.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define WEFT_ALGO __device__ __forceinline__
#else
#define WEFT_ALGO inline
#endif

namespace weft::dev {

struct RingArgs {
  int rank;
  int nRanks;
  int ringPos;               // our index in userRanks
  int prev;                  // rank we receive from
  int next;                  // rank we send to
  const int32_t* userRanks;  // ranks in ring order
  int root;                  // Broadcast/Reduce
  uint64_t count;            // elements of the collective (of one rank block: AllGather/ReduceScatter)
  uint64_t chanOffset;       // this channel's part
  uint64_t chanCount;
  uint64_t chunkElems;       // after simpleChunkElems(): never 0, never above the protocol's bound
  int elemSize;              // bytes per element as the primitives count them
  bool inPlace;
};

}  // namespace weft::dev
