// The buffers of a collective call, checked before anything is queued (user-pains matrix row 22:
// misuse gets an error naming the argument, never a crash, a hang or wrong numbers):
//   - sizes: count x ranks x datatype bytes must not overflow;
//   - overlap: send and receive buffers may share memory only exactly as the collective defines
//     in place (allgather: sendbuff == recvbuff + rank * sendcount); any other overlap would make
//     the kernels read what they have already overwritten;
//   - pointers (one driver query per buffer, ~0.1 us; NCCL_CHECK_POINTERS=0 skips them, NCCL's
//     own check is off by default): memory the GPU cannot reach (pageable host memory, a freed
//     allocation), device memory of another GPU, and a buffer that runs past the end of its
//     allocation, which would read or overwrite a neighbouring allocation. (Not the stream's GPU:
//     cudaStreamGetDevice ended the CUDA graph captures that called it on an H200: a stream of
//     another GPU is left for the launch to refuse.)
// Inside a CUDA graph capture, memory the driver does not know is let through: a graph's own
// allocation (cudaMallocAsync during capture) has no memory until the graph runs.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "runtime/gpu.h"
#include "runtime/pointer_facts.h"

struct ncclComm;

namespace weft::core {

// One buffer of a call: bytes 0 means this rank does not touch it (a non-root's receive buffer).
struct UserBuffer {
  const char* name = "";
  const void* ptr = nullptr;
  size_t bytes = 0;
};

struct CallBuffers {
  UserBuffer send{"sendbuff", nullptr, 0};
  UserBuffer recv{"recvbuff", nullptr, 0};
  bool inPlace = false;                // the two alias exactly as the collective defines in place
  const char* inPlaceRule = nullptr;   // that definition, for the message; null: no in-place form
};

// count x multiple elements of typeBytes each, in bytes; fails, naming fn, when that overflows.
[[nodiscard]] Status spanBytes(const char* fn, size_t count, size_t multiple, size_t typeBytes, size_t* bytes);

// What a pointer judgement needs besides the driver's facts.
struct BufferContext {
  int device = -1;                    // the communicator's GPU
  int rank = -1;
  bool capturing = false;             // the call's stream is being captured into a graph
  bool pageableMemoryAccess = false;  // the GPU reads pageable host memory (HMM, ATS)
};

// Pure: the sentence refusing `buffer`, or "" when the facts allow it.
std::string judgeBuffer(const char* fn, const UserBuffer& buffer, const runtime::PointerFacts& facts,
                        const BufferContext& context);
// Pure: the sentence refusing an overlap of the two buffers, or "".
std::string judgeOverlap(const char* fn, const CallBuffers& buffers);

// NCCL_CHECK_POINTERS (weft's default 1): whether buffers are judged by the driver's facts.
bool pointerChecksOn();

// One buffer judged by the driver's facts (judgeBuffer); ncclInvalidArgument with the sentence as
// a WARN when refused. `stream` (may be null) is the call's: memory unknown to the driver passes
// while it is being captured.
[[nodiscard]] Status checkPointer(ncclComm* comm, const char* fn, const UserBuffer& buffer, runtime::Stream stream);

// All of the above for one call; ncclInvalidArgument with the sentence as a WARN when refused.
[[nodiscard]] Status checkCallBuffers(ncclComm* comm, const char* fn, runtime::Stream stream,
                                      const CallBuffers& buffers);

}  // namespace weft::core
