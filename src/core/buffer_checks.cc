#include "core/buffer_checks.h"

#include <cstdint>

#include "core/communicator.h"
#include "core/log.h"
#include "core/param.h"
#include "util/format.h"

namespace weft::core {
bool pointerChecksOn() {
  static const bool on = param::getInt("NCCL_CHECK_POINTERS", 1) != 0;  // read once: it is asked per call
  return on;
}

namespace {

Status refuse(const std::string& sentence) {
  WEFT_WARN("%s", sentence.c_str());
  return ncclInvalidArgument;
}

}  // namespace

Status spanBytes(const char* fn, size_t count, size_t multiple, size_t typeBytes, size_t* bytes) {
  WEFT_CHECK_ARG(multiple > 0 && typeBytes > 0, "%s: internal: empty span", fn);
  WEFT_CHECK_ARG(count <= SIZE_MAX / multiple / typeBytes,
                 "%s: count %zu x %zu x %zu bytes per element does not fit in a size_t; the count is wrong", fn, count,
                 multiple, typeBytes);
  *bytes = count * multiple * typeBytes;
  return ncclSuccess;
}

std::string judgeBuffer(const char* fn, const UserBuffer& buffer, const runtime::PointerFacts& facts,
                        const BufferContext& context) {
  if (buffer.bytes == 0 || buffer.ptr == nullptr) return "";
  switch (facts.kind) {
    case runtime::MemoryKind::kUnknownToDriver:
      if (context.capturing || context.pageableMemoryAccess) return "";
      return util::formatText(
          "%s: %s %p is not memory the GPU can reach: the driver does not know it (pageable host memory "
          "from malloc, new or the stack, a freed allocation, or a stray pointer). Pass memory from "
          "cudaMalloc or ncclMemAlloc, or pin host memory with cudaHostRegister",
          fn, buffer.name, buffer.ptr);
    case runtime::MemoryKind::kDevice:
      if (facts.device != context.device) {
        return util::formatText(
            "%s: %s %p is memory of GPU %d, but this communicator (rank %d) runs on GPU %d; pass a buffer "
            "of GPU %d",
            fn, buffer.name, buffer.ptr, facts.device, context.rank, context.device, context.device);
      }
      break;
    case runtime::MemoryKind::kManaged:
    case runtime::MemoryKind::kHostPinned:
      break;
  }
  if (facts.rangeBytes == 0) return "";
  const uintptr_t begin = (uintptr_t)buffer.ptr;
  const uintptr_t rangeEnd = facts.rangeBegin + facts.rangeBytes;
  if (begin < facts.rangeBegin || begin >= rangeEnd) return "";  // the driver's range does not hold it: no verdict
  const size_t room = rangeEnd - begin;
  if (buffer.bytes <= room) return "";
  return util::formatText(
      "%s: %s %p lies %zu bytes into an allocation of %zu bytes, which leaves room for %zu bytes, but the "
      "call accesses %zu bytes there; check the count and the datatype (the rest would %s a neighbouring "
      "allocation)",
      fn, buffer.name, buffer.ptr, (size_t)(begin - facts.rangeBegin), facts.rangeBytes, room, buffer.bytes,
      buffer.name[0] == 's' ? "be read from" : "overwrite");
}

std::string judgeOverlap(const char* fn, const CallBuffers& buffers) {
  const UserBuffer& s = buffers.send;
  const UserBuffer& r = buffers.recv;
  if (buffers.inPlace || s.bytes == 0 || r.bytes == 0 || s.ptr == nullptr || r.ptr == nullptr) return "";
  const uintptr_t sBegin = (uintptr_t)s.ptr;
  const uintptr_t rBegin = (uintptr_t)r.ptr;
  if (sBegin + s.bytes <= rBegin || rBegin + r.bytes <= sBegin) return "";
  std::string head = util::formatText("%s: %s %p (%zu bytes) and %s %p (%zu bytes) overlap", fn, s.name, s.ptr, s.bytes,
                                      r.name, r.ptr, r.bytes);
  if (buffers.inPlaceRule == nullptr) {
    return head + ", and this call has no in-place form: the result would be wrong. Use separate buffers";
  }
  return head + util::formatText(
                    " without being in place (in place means %s): the result would be wrong. Use separate "
                    "buffers or exactly that layout",
                    buffers.inPlaceRule);
}

Status checkPointer(ncclComm* comm, const char* fn, const UserBuffer& buffer, runtime::Stream stream) {
  if (!pointerChecksOn() || comm->cudaDev < 0 || buffer.bytes == 0 || buffer.ptr == nullptr) {
    return ncclSuccess;  // (cudaDev < 0: no GPU, a test's stand-in communicator)
  }
  runtime::PointerFacts facts;
  if (isError(runtime::pointerFacts(buffer.ptr, &facts))) return ncclSuccess;  // no verdict without the driver
  BufferContext context;
  context.device = comm->cudaDev;
  context.rank = comm->rank;
  if (facts.kind == runtime::MemoryKind::kUnknownToDriver) {
    // Rare: only now the queries that may excuse it; the capture's first (nothing but capture-safe
    // calls while a stream is being captured).
    runtime::CaptureInfo capture;
    context.capturing = stream != nullptr && !isError(runtime::streamCaptureInfo(stream, &capture)) &&
                        capture.status != runtime::CaptureStatus::kNone;
    bool pageable = false;
    context.pageableMemoryAccess =
        !context.capturing && !isError(runtime::pageableMemoryAccess(comm->cudaDev, &pageable)) && pageable;
  }
  const std::string refusal = judgeBuffer(fn, buffer, facts, context);
  return refusal.empty() ? ncclSuccess : refuse(refusal);
}

Status checkCallBuffers(ncclComm* comm, const char* fn, runtime::Stream stream, const CallBuffers& buffers) {
  // The pointers first: a buffer that runs past its allocation may also reach into the other one,
  // and running past is the truer sentence.
  WEFT_TRY(checkPointer(comm, fn, buffers.send, stream));
  const bool inPlace = buffers.recv.ptr == buffers.send.ptr && buffers.send.bytes >= buffers.recv.bytes;
  if (!inPlace) WEFT_TRY(checkPointer(comm, fn, buffers.recv, stream));  // in place: judged as the send buffer
  std::string refusal = judgeOverlap(fn, buffers);
  if (!refusal.empty()) return refuse(refusal);
  return ncclSuccess;
}

}  // namespace weft::core
