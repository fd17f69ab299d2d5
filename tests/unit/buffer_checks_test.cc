// The buffer checks of the collective calls (core/buffer_checks.h): sizes that overflow, buffers
// that overlap other than in place, and the verdicts on what the driver says about a pointer.
// The driver's side (real host, freed, pinned, managed, pool, cuMem and graph memory) is tested
// on a GPU by tests/gpu/misuse_test.cc.
#include "core/buffer_checks.h"

#include <cstdint>

#include <gtest/gtest.h>

#include "core/communicator.h"
#include "nccl.h"
#include "test_env.h"

namespace weft::core {
namespace {

using runtime::MemoryKind;
using runtime::PointerFacts;
using test::contains;

const void* at(uintptr_t address) { return (const void*)address; }

PointerFacts device(int gpu, uintptr_t begin, size_t bytes) {
  PointerFacts f;
  f.kind = MemoryKind::kDevice;
  f.device = gpu;
  f.rangeBegin = begin;
  f.rangeBytes = bytes;
  return f;
}

BufferContext onGpu(int gpu) {
  BufferContext c;
  c.device = gpu;
  c.rank = 3;
  return c;
}

TEST(BufferChecks, SpansThatOverflowAreRefusedNamingTheCall) {
  size_t bytes = 0;
  EXPECT_EQ(spanBytes("ncclAllGather", 1000, 8, 4, &bytes), ncclSuccess);
  EXPECT_EQ(bytes, 32000u);
  EXPECT_EQ(spanBytes("ncclAllGather", SIZE_MAX / 16, 8, 4, &bytes), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclAllGather: count")) << ncclGetLastError(nullptr);
  EXPECT_EQ(spanBytes("ncclSend", SIZE_MAX / 8, 1, 8, &bytes), ncclSuccess) << "just fits";
  EXPECT_EQ(spanBytes("ncclSend", SIZE_MAX / 8 + 1, 1, 8, &bytes), ncclInvalidArgument);
}

TEST(BufferChecks, DeviceMemoryOfTheCommunicatorsGpuThatHoldsTheCallPasses) {
  UserBuffer b{"sendbuff", at(0x10000), 4096};
  EXPECT_EQ(judgeBuffer("ncclAllReduce", b, device(1, 0x10000, 4096), onGpu(1)), "");
  EXPECT_EQ(judgeBuffer("ncclAllReduce", b, device(1, 0xf000, 8192), onGpu(1)), "") << "inside a larger allocation";
  // The driver's range does not say (0 bytes): no verdict on the size.
  EXPECT_EQ(judgeBuffer("ncclAllReduce", b, device(1, 0, 0), onGpu(1)), "");
  // Nothing accessed: nothing to judge, whatever the pointer.
  EXPECT_EQ(judgeBuffer("ncclAllReduce", {"sendbuff", at(0x10), 0}, PointerFacts{}, onGpu(1)), "");
}

TEST(BufferChecks, ABufferThatRunsPastItsAllocationIsRefusedWithTheNumbers) {
  UserBuffer recv{"recvbuff", at(0x10000 + 96), 4096};
  const std::string s = judgeBuffer("ncclAllReduce", recv, device(0, 0x10000, 4096), onGpu(0));
  EXPECT_TRUE(contains(s, "ncclAllReduce: recvbuff 0x10060 lies 96 bytes into an allocation of 4096 bytes, which "
                          "leaves room for 4000 bytes, but the call accesses 4096 bytes there")) << s;
  EXPECT_TRUE(contains(s, "overwrite a neighbouring allocation")) << s;
  UserBuffer send{"sendbuff", at(0x10000), 4097};
  EXPECT_TRUE(contains(judgeBuffer("ncclSend", send, device(0, 0x10000, 4096), onGpu(0)), "be read from"))
      << "one byte over";
  // Pinned host and managed memory have allocations too.
  PointerFacts pinned = device(0, 0x10000, 4096);
  pinned.kind = MemoryKind::kHostPinned;
  EXPECT_NE(judgeBuffer("ncclSend", send, pinned, onGpu(0)), "");
  pinned.kind = MemoryKind::kManaged;
  EXPECT_NE(judgeBuffer("ncclSend", send, pinned, onGpu(0)), "");
}

TEST(BufferChecks, DeviceMemoryOfAnotherGpuIsRefusedButManagedAndPinnedMemoryAreNot) {
  UserBuffer b{"recvbuff", at(0x10000), 64};
  const std::string s = judgeBuffer("ncclBroadcast", b, device(2, 0x10000, 64), onGpu(0));
  EXPECT_EQ(s, "ncclBroadcast: recvbuff 0x10000 is memory of GPU 2, but this communicator (rank 3) runs on GPU 0; "
               "pass a buffer of GPU 0");
  PointerFacts managed = device(2, 0x10000, 64);
  managed.kind = MemoryKind::kManaged;
  EXPECT_EQ(judgeBuffer("ncclBroadcast", b, managed, onGpu(0)), "");
  managed.kind = MemoryKind::kHostPinned;
  EXPECT_EQ(judgeBuffer("ncclBroadcast", b, managed, onGpu(0)), "");
}

TEST(BufferChecks, MemoryTheDriverDoesNotKnowIsRefusedUnlessCapturingOrPageableMemoryIsReachable) {
  UserBuffer b{"sendbuff", at(0x5000), 64};
  const std::string s = judgeBuffer("ncclReduce", b, PointerFacts{}, onGpu(0));
  EXPECT_TRUE(contains(s, "ncclReduce: sendbuff 0x5000 is not memory the GPU can reach")) << s;
  EXPECT_TRUE(contains(s, "cudaHostRegister")) << "says what to do instead: " << s;
  BufferContext capturing = onGpu(0);
  capturing.capturing = true;  // a graph's own allocation, mapped when the graph runs
  EXPECT_EQ(judgeBuffer("ncclReduce", b, PointerFacts{}, capturing), "");
  BufferContext hmm = onGpu(0);
  hmm.pageableMemoryAccess = true;
  EXPECT_EQ(judgeBuffer("ncclReduce", b, PointerFacts{}, hmm), "");
}

CallBuffers pair(uintptr_t send, size_t sendBytes, uintptr_t recv, size_t recvBytes, bool inPlace,
                 const char* rule = "sendbuff == recvbuff") {
  CallBuffers c;
  c.send = {"sendbuff", at(send), sendBytes};
  c.recv = {"recvbuff", at(recv), recvBytes};
  c.inPlace = inPlace;
  c.inPlaceRule = rule;
  return c;
}

TEST(BufferChecks, BuffersThatOverlapOtherThanInPlaceAreRefused) {
  // Disjoint, touching, in place: fine.
  EXPECT_EQ(judgeOverlap("ncclAllReduce", pair(0x1000, 256, 0x2000, 256, false)), "");
  EXPECT_EQ(judgeOverlap("ncclAllReduce", pair(0x1000, 256, 0x1100, 256, false)), "") << "touching, not overlapping";
  EXPECT_EQ(judgeOverlap("ncclAllReduce", pair(0x1000, 256, 0x1000, 256, true)), "");
  // Overlapping by one byte either way.
  const std::string s = judgeOverlap("ncclAllReduce", pair(0x1000, 256, 0x10ff, 256, false));
  EXPECT_EQ(s, "ncclAllReduce: sendbuff 0x1000 (256 bytes) and recvbuff 0x10ff (256 bytes) overlap without being in "
               "place (in place means sendbuff == recvbuff): the result would be wrong. Use separate buffers or "
               "exactly that layout");
  EXPECT_NE(judgeOverlap("ncclAllReduce", pair(0x10ff, 256, 0x1000, 256, false)), "");
  // All-gather: the send buffer inside the receive buffer but not at the rank's block.
  const char* rule = "sendbuff == recvbuff + rank * sendcount elements";
  EXPECT_EQ(judgeOverlap("ncclAllGather", pair(0x1100, 256, 0x1000, 1024, true, rule)), "");
  EXPECT_TRUE(contains(judgeOverlap("ncclAllGather", pair(0x1104, 256, 0x1000, 1024, false, rule)), rule));
  // A call without an in-place form.
  EXPECT_TRUE(contains(judgeOverlap("ncclAlltoAll", pair(0x1000, 1024, 0x1040, 1024, false, nullptr)),
                       "this call has no in-place form"));
  // A buffer the rank does not touch (a non-root's receive buffer) overlaps nothing.
  EXPECT_EQ(judgeOverlap("ncclReduce", pair(0x1000, 256, 0x1000, 0, false)), "");
}

// Through the API on a stand-in communicator (no GPU): the overlap is refused before anything is
// queued, with ncclInvalidArgument; the size and pointer checks need the GPU (misuse_test.cc).
TEST(BufferChecks, TheApiRefusesOverlappingBuffers) {
  ncclComm comm;
  comm.rank = 0;
  comm.nRanks = 2;
  float x[64] = {};
  EXPECT_EQ(ncclAllReduce(x, x + 8, 16, ncclFloat32, ncclSum, &comm, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(&comm), "ncclAllReduce: sendbuff")) << ncclGetLastError(&comm);
  EXPECT_EQ(ncclReduceScatter(x, x + 4, 8, ncclFloat32, ncclSum, &comm, nullptr), ncclInvalidArgument)
      << "in place would be recvbuff == sendbuff + 8 elements on rank 0";
  EXPECT_TRUE(contains(ncclGetLastError(&comm), "recvbuff == sendbuff + rank * recvcount elements"));
  EXPECT_EQ(ncclAlltoAll(x, x + 1, 4, ncclFloat32, &comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(x + 4, x, 8, ncclFloat32, &comm, nullptr), ncclInvalidArgument)
      << "rank 0's block starts at recvbuff";
  EXPECT_TRUE(comm.tasks.empty()) << "nothing was queued";
  // In a group, ncclGroupEnd's own warning repeats the cause: it is the last error the caller reads.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x + 1, 16, ncclFloat32, ncclSum, &comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  const std::string last = ncclGetLastError(&comm);
  EXPECT_TRUE(contains(last, "ncclGroupEnd: an earlier call in this group failed (invalid argument")) << last;
  EXPECT_TRUE(contains(last, "ncclAllReduce: sendbuff")) << last;
  // One rank's all-to-all in place is a copy onto itself, which ncclAlltoAll allows (so must the
  // overlap check). Inside a group, so that nothing is launched on this stand-in.
  comm.nRanks = 1;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAlltoAll(x, x, 4, ncclFloat32, &comm, nullptr), ncclSuccess) << ncclGetLastError(&comm);
  EXPECT_EQ(ncclAlltoAll(x, x + 1, 4, ncclFloat32, &comm, nullptr), ncclInvalidArgument) << "a partial overlap is not";
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
}

}  // namespace
}  // namespace weft::core
