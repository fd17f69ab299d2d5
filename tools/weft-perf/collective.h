// What each benchmarked collective means in numbers: element counts from the size column, buffer
// sizes, where in-place operands live, and how nccl-tests turns a time into algbw and busbw
// (reference/perf-model.md §1.1). Pure host code, shared with the unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace weft::perf {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv, AlltoAll, Gather, Scatter };

struct CollInfo {
  Coll coll;
  const char* name;   // as on the command line and in nccl-tests' binary names (all_reduce_perf)
  bool reduces;       // takes a reduction operation
  bool rooted;        // takes a root rank
  bool inPlace;       // has an in-place form worth timing (alltoall and sendrecv do not)
  int minVersion;     // first NCCL release with the call
};

const std::vector<CollInfo>& allCollectives();
const CollInfo& info(Coll c);
// Accepts "all_reduce", "allreduce", "all-reduce" (case-insensitive); false if unknown.
bool parseCollective(const std::string& text, Coll* out);

// The sizes of one test case on one rank. `count` is the column nccl-tests prints: the per-rank
// count passed to NCCL (sendcount for all_gather/gather, recvcount for reduce_scatter/scatter,
// per-peer count for alltoall, the whole count otherwise).
struct CaseShape {
  size_t count = 0;
  size_t sendElems = 0;  // elements the send operand holds
  size_t recvElems = 0;  // elements the receive operand holds
  size_t bytes = 0;      // the "size" column: bytes that algbw divides by time
};

// `size` is the requested size column; counts round down to whole elements per rank.
CaseShape shapeFor(Coll c, size_t size, size_t typeSize, int nranks);

// busbw = algbw * factor (nccl-tests' *GetBw functions).
double busBwFactor(Coll c, int nranks);

// algbw in GB/s (1e9 bytes) for `bytes` moved in `timeUs` microseconds.
inline double algBw(size_t bytes, double timeUs) { return timeUs > 0 ? (double)bytes / timeUs / 1e3 : 0.0; }

// Where the operands start for the in-place form, as element offsets into the single buffer that
// holds both: sendOffset for the send pointer, recvOffset for the receive pointer.
struct InPlaceOffsets {
  size_t sendOffset = 0;
  size_t recvOffset = 0;
};
InPlaceOffsets inPlaceOffsets(Coll c, size_t count, int rank);

// Sizes from min to max: multiplied by `factor` when it is > 1, else stepped by `step` bytes.
std::vector<size_t> sizeSeries(size_t minBytes, size_t maxBytes, double factor, size_t step);

// Names as nccl-tests prints them.
const char* typeName(ncclDataType_t t);
const char* opName(ncclRedOp_t op);
size_t typeSize(ncclDataType_t t);
bool parseType(const std::string& text, ncclDataType_t* out);
bool parseOp(const std::string& text, ncclRedOp_t* out);
bool isFloatType(ncclDataType_t t);
bool isUnsignedType(ncclDataType_t t);
// First NCCL release supporting the type or operation (0 if always).
int minVersion(ncclDataType_t t);
int minVersion(ncclRedOp_t op);

}  // namespace weft::perf
