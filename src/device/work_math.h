// Partition, chunk and slice math shared by the host planner, the kernels and CPU tests. Every
// function here is WEFT_HD and pure: the two ends of a connection run them on the same inputs and
// must reach the same answers, or the step protocol goes out of step.
//
// ============================ How the host fills a DevWork (Simple) ============================
// Connections (ConnInfo, per channel and peer, both directions):
//   - buffs[kProtoSimple]: kSteps slots of stepBytes[kProtoSimple] each, 16-byte aligned, in the
//     receiver's memory (the sender's ConnInfo holds the peer-mapped pointer). stepBytes must be a
//     multiple of kSimpleGrainBytes, at least kSimpleMinStepBytes and at most kSimpleMaxStepBytes,
//     and the SAME for every Simple connection of a communicator (both ends slice with it).
//     Default: NCCL_BUFFSIZE 4 MiB -> stepBytes 512 KiB.
//   - tail (receiver's memory), head (sender's memory), step: zero at creation, never reset while
//     the communicator lives; the kernel loads step when a work item starts and stores it back
//     when the item ends, so successive items and launches continue the sequence.
// Collectives (func = Broadcast/Reduce/AllGather/ReduceScatter/AllReduce, algo = kAlgoRing,
// proto = kProtoSimple):
//   - sendBuff/recvBuff: the user's whole buffers (not offset by the channel's part); any byte
//     alignment works, 16-byte aligned buffers take the vectorized path. In-place is detected by
//     pointer equality: sendBuff == recvBuff (AllReduce/Broadcast/Reduce), sendBuff == recvBuff +
//     rank*count (AllGather), recvBuff == sendBuff + rank*count (ReduceScatter).
//     Broadcast reads sendBuff only at root; Reduce writes recvBuff only at root.
//   - count: elements of the collective; for AllGather/ReduceScatter, of ONE rank's block.
//   - chanOffset/chanCount: this channel's part of [0, count) (of every rank block for AllGather/
//     ReduceScatter). Every rank must use the same part on the same channel id. channelPart() is
//     the reference split (offsets multiples of the 16-byte grain); a channel with chanCount 0
//     gets no work item. The channel's ring (DevRing) must be the same ring on all ranks.
//   - chunkElems: elements one ring step of the algorithm moves (one primitive call); the same on
//     all ranks. 0 means "largest allowed". The kernel clamps it to simpleMaxChunkElems() =
//     kSteps/2 connection steps (more would let a ring deadlock), and splits each chunk into
//     slices of min(chunk, one step) elements, one connection step each. Choose a multiple of
//     grainElems() (16 bytes) so that slices stay 16-byte aligned; recommendedChunkElems() is
//     the reference choice (small chunks for small parts: better pipelining; full size for big).
//   - redOp/redOpArg/flags: kRedPreMulSum with the scalar's bits in redOpArg (the data type's
//     width, zero-extended), or with kWorkFlagScalarOnDevice a device pointer to a scalar of the
//     data type; kRedSumPostDiv (integer types only) with the divisor in redOpArg. Avg on
//     floating types is PreMulSum by 1/nRanks; on integers SumPostDiv by nRanks.
//   - root: the root rank for Broadcast/Reduce.
// SendRecv (func = kFuncSendRecv, any algo, proto = kProtoSimple or kProtoLL), moved as bytes:
//   - send part: chanCount elements of dataType from sendBuff + chanOffset to sendPeer (-1: none);
//     receive part: recvCount elements into recvBuff + recvOffset from recvPeer (-1: none).
//     The two parts run concurrently (separate warps), so an exchange with one peer cannot
//     deadlock. A self pair (sendPeer == recvPeer == rank) is a local copy of chanCount elements
//     (chanCount must equal recvCount); it touches no connection, so the host may give it to a
//     block whose channel id is beyond DevComm.nChannels (a "copy lane").
//   - byte counts of a send part and of the matching receive part (same channel, peer's item)
//     must be equal, and so must the protocol and chunkElems * dataTypeBytes on both sides
//     (p2pChunkElems() is the reference for Simple; LL takes 0: one step's payload). LL needs
//     the channel's connection to have LL buffers (planner.h p2pLLBytes: the mesh channels, or
//     every connection where point-to-point-only ones have LL slots). Items of one channel run in
//     order: pair sends and receives in the same order on both ranks (NCCL's rounds: send to
//     rank+d, receive from rank-d).
// Tree AllReduce (func = kFuncAllReduce, algo = kAlgoTree, any proto; LL/LL128 as below):
//   - DevChannel.tree: this rank's parent (up, -1 at the root) and children (down[], -1 where
//     none, filled from index 0) in the channel's tree, the same tree on all ranks: a chain inside
//     each node, chain heads joined by a double binary tree across nodes (graph/channels.h).
//     Both directions of every tree edge need a connection (ConnInfo send and recv to/from the
//     parent and every child) on that channel.
//   - sendBuff/recvBuff/count/chanOffset/chanCount/redOp/redOpArg/flags: as for Ring AllReduce;
//     in place when sendBuff == recvBuff. A rank with several children keeps partial sums in
//     recvBuff (overwritten by the result).
//   - chunkElems: elements per primitive call, the same on all ranks (clamped like Ring's);
//     treeChunkElems() is the reference for Simple, 0 (one step) for LL/LL128. Each chunk goes up
//     the tree and comes back down; with at most one child the up and down streams run
//     concurrently on two warp groups.
// Launch (DevKernelArgs): one block per channel with work, kernelThreads(kProtoSimple) = 512
// threads, kernelDynamicSmem() = 0 bytes of dynamic shared memory, at most kMaxWorksPerChannel
// items per block; works 8-byte aligned (any FIFO of DevWork is); blockArrivals zero before the
// first launch (the kernel leaves it zero); fifoConsumed receives fifoConsumedValue once all
// blocks have copied their items. A block is one SM (128 registers x 512 threads): the host must
// not expect several channels per SM, and ranks sharing a GPU need nChannels x ranks <= SMs.
// Simple buffers: kSteps x stepBytes per connection and direction (4 MiB at the default).
// ======================== LL and LL128 (proto = kProtoLL / kProtoLL128) ========================
// Same DevWork fields and rules as Simple, except:
//   - chunkElems: the planner sets 0; the kernel uses one connection step per primitive call, with
//     llChunkElems()/ll128ChunkElems() elements (a step's payload; a non-zero chunkElems only
//     lowers it, and must then be the same on all ranks, as for Simple).
//   - buffs[kProtoLL]: kSteps slots of stepBytes[kProtoLL]; a slot is an array of 16-byte lines
//     {data 4 B, flag 4 B, data 4 B, flag 4 B}: payload byte b of a step travels in line b / 8.
//     stepBytes: multiple of 16, in [kLLMinStepBytes, kLLMaxStepBytes]. Default NCCL_LL_BUFFSIZE
//     512 KiB -> 64 KiB steps (32 KiB payload).
//   - buffs[kProtoLL128]: kSteps slots of stepBytes[kProtoLL128], 128-byte aligned; a slot is an
//     array of 128-byte lines, 120 payload bytes then an 8-byte flag: payload byte b travels in
//     line b / 120. stepBytes: multiple of 128, in [kLL128MinStepBytes, kLL128MaxStepBytes].
//     Default NCCL_LL128_BUFFSIZE 4,915,200 B -> 614,400 B steps (576,000 B payload). Use LL128
//     only where a 128-byte warp store reaches the peer whole (NVLink P2P), as NCCL does.
//   - Flags: the sender of step s writes flag llFlag(s) (LL, 32 bits) or s + 1 (LL128, 64 bits)
//     into every line it sends, in the same store as the data; the receiver spins until it reads
//     that flag, so neither tail nor a fence is used. Buffers start zeroed: no step's flag is 0.
//     After consuming step s the receiver publishes head = s + 1; the sender writes step s once
//     head + kSteps > s. tail is left alone: a later Simple item waits for tail > its step, which
//     only the Simple sender's own publication satisfies, so protocols can alternate on one
//     connection (they share step and head, each has its own buffer).
//   - LL flags are 32 bits: after 2^32 steps a line last written 2^32 steps ago (never touched
//     since) would look current. The receiver therefore rewrites every line of a slot with a
//     flag that slot never carries when it consumes a step in the last 8 of each 2^31 (so every
//     line is rewritten at least every 2^31 steps), as long as those steps are LL steps.
//   - SendRecv: the same, on bytes (chunk = a step's payload in bytes).
// Launch: kernelFunction(proto), kernelThreads(proto) (512 threads for LL and LL128 on NVIDIA),
// kernelDynamicSmem(proto) = 0; one launch carries items of one protocol only.
// ==============================================================================================
#pragma once

#include <cstdint>

#include "device/abi.h"

namespace weft::dev {

constexpr uint32_t kSimpleGrainBytes = 16;           // alignment unit of parts, chunks, slices
constexpr uint32_t kSimpleMinStepBytes = 4096;
constexpr uint32_t kSimpleMaxStepBytes = 1u << 30;
constexpr uint32_t kSimpleMaxChunkSteps = kSteps / 2;  // see simpleMaxChunkElems()
constexpr uint64_t kSimpleMinChunkBytes = 32 * 1024;   // below this, recommended chunks stop shrinking
constexpr uint32_t kSimpleTargetSlices = 4;            // slices per chunk path aimed for when shrinking

// LL / LL128 line formats and step bounds (rules in the header comment).
constexpr uint32_t kLLLineBytes = 16;
constexpr uint32_t kLLLineDataBytes = 8;
constexpr uint32_t kLLMinStepBytes = 256;
constexpr uint32_t kLLMaxStepBytes = 1u << 28;
constexpr uint32_t kLL128LineBytes = 128;
constexpr uint32_t kLL128LineDataBytes = 120;
constexpr uint32_t kLL128MinStepBytes = 4096;
constexpr uint32_t kLL128MaxStepBytes = 1u << 30;
constexpr uint64_t kLLDefaultBuffBytes = 512 * 1024;         // NCCL_LL_BUFFSIZE default
constexpr uint64_t kLL128DefaultBuffBytes = 120 * 640 * 8 * 8;  // NCCL_LL128_BUFFSIZE default

struct ElemRange {
  uint64_t offset;
  uint64_t count;
};

WEFT_HD uint64_t divUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
WEFT_HD uint64_t alignUp(uint64_t a, uint64_t b) { return divUp(a, b) * b; }
WEFT_HD uint64_t minU64(uint64_t a, uint64_t b) { return a < b ? a : b; }
WEFT_HD uint64_t maxU64(uint64_t a, uint64_t b) { return a > b ? a : b; }

// Elements per 16-byte grain (1 for 16-byte and larger elements, which never occur here).
WEFT_HD uint32_t grainElems(int elemSize) {
  return elemSize >= (int)kSimpleGrainBytes ? 1u : kSimpleGrainBytes / (uint32_t)elemSize;
}

// True when a connection's step size satisfies the rules above.
WEFT_HD bool simpleStepBytesValid(uint64_t stepBytes) {
  return stepBytes % kSimpleGrainBytes == 0 && stepBytes >= kSimpleMinStepBytes &&
         stepBytes <= kSimpleMaxStepBytes;
}

// Elements that fit one connection step.
WEFT_HD uint64_t simpleStepElems(uint64_t stepBytes, int elemSize) {
  return (stepBytes / kSimpleGrainBytes) * kSimpleGrainBytes / (uint64_t)elemSize;
}

// Largest chunk: kSteps/2 steps. A ring rank sends at most one chunk more than it has received;
// with kSteps slots per connection, chunks of at most kSteps/2 slots guarantee that not every
// rank can be blocked on a full buffer (NCCL uses the same bound), whatever the ring length.
WEFT_HD uint64_t simpleMaxChunkElems(uint64_t stepBytes, int elemSize) {
  return kSimpleMaxChunkSteps * simpleStepElems(stepBytes, elemSize);
}

// The chunk the kernel actually uses for a work item's chunkElems (0 = largest).
WEFT_HD uint64_t simpleChunkElems(uint64_t chunkElems, uint64_t stepBytes, int elemSize) {
  uint64_t maxChunk = simpleMaxChunkElems(stepBytes, elemSize);
  uint64_t c = chunkElems == 0 ? maxChunk : minU64(chunkElems, maxChunk);
  return c == 0 ? 1 : c;
}

// Elements per slice (= per connection step) for a chunk size: one step at most.
WEFT_HD uint64_t simpleSliceElems(uint64_t chunkElems, uint64_t stepBytes, int elemSize) {
  uint64_t s = minU64(simpleChunkElems(chunkElems, stepBytes, elemSize),
                      simpleStepElems(stepBytes, elemSize));
  return s == 0 ? 1 : s;
}

// Connection steps one primitive call of nelem elements consumes (0 for nelem == 0: both ends
// skip empty calls, which they agree on because they compute the same nelem).
WEFT_HD uint64_t simpleSliceCount(uint64_t nelem, uint64_t sliceElems) {
  return divUp(nelem, sliceElems);
}

// ---- LL / LL128 ----
WEFT_HD bool llStepBytesValid(uint64_t stepBytes) {
  return stepBytes % kLLLineBytes == 0 && stepBytes >= kLLMinStepBytes && stepBytes <= kLLMaxStepBytes;
}
WEFT_HD bool ll128StepBytesValid(uint64_t stepBytes) {
  return stepBytes % kLL128LineBytes == 0 && stepBytes >= kLL128MinStepBytes && stepBytes <= kLL128MaxStepBytes;
}
// Payload bytes of one step.
WEFT_HD uint64_t llStepPayload(uint64_t stepBytes) { return stepBytes / kLLLineBytes * kLLLineDataBytes; }
WEFT_HD uint64_t ll128StepPayload(uint64_t stepBytes) {
  return stepBytes / kLL128LineBytes * kLL128LineDataBytes;
}
// Elements per primitive call (one step): the payload, in whole 16-byte grains.
WEFT_HD uint64_t flagChunkFromPayload(uint64_t chunkElems, uint64_t payload, int elemSize) {
  uint64_t g = grainElems(elemSize);
  uint64_t maxChunk = payload / (uint64_t)elemSize / g * g;
  if (maxChunk == 0) maxChunk = 1;
  return chunkElems == 0 ? maxChunk : minU64(chunkElems, maxChunk);
}
WEFT_HD uint64_t llChunkElems(uint64_t chunkElems, uint64_t stepBytes, int elemSize) {
  return flagChunkFromPayload(chunkElems, llStepPayload(stepBytes), elemSize);
}
WEFT_HD uint64_t ll128ChunkElems(uint64_t chunkElems, uint64_t stepBytes, int elemSize) {
  return flagChunkFromPayload(chunkElems, ll128StepPayload(stepBytes), elemSize);
}
// The LL flag of step s: s + 1 in 32 bits, except that 0 (the zeroed buffer) is replaced by
// 0xffffffff, a value slot kSteps-1 (the only slot whose flags are multiples of kSteps) never holds.
WEFT_HD uint32_t llFlag(uint64_t step) {
  uint32_t f = (uint32_t)(step + 1);
  return f == 0 ? 0xffffffffu : f;
}
// The value an LL receiver wipes slot (step % kSteps) with: congruent to step + 5 modulo kSteps,
// never a flag of that slot (those are congruent to step + 1, or 0xffffffff in the last slot).
WEFT_HD uint32_t llWipeFlag(uint64_t step) { return (uint32_t)(step + 5); }
// True when consuming step s must wipe its slot (the last kSteps steps of every 2^31).
// ConnInfo::sendFree to save: the slots from `step` on that a sender knows are free, given the
// first step it does not know to be free (`limit`: head + kSteps as last read).
WEFT_HD uint32_t sendFreeToSave(uint64_t limit, uint64_t step) {
  return limit > step ? (uint32_t)(limit - step < kSteps ? limit - step : kSteps) : 0u;
}

WEFT_HD bool llWipeAfter(uint64_t step) { return ((uint32_t)step & 0x7fffffffu) >= 0x80000000u - kSteps; }

// Reference split of count elements over nChannels channels: equal parts rounded up to the grain,
// so that the last channels may get less or nothing.
WEFT_HD ElemRange channelPart(uint64_t count, int nChannels, int channel, int elemSize) {
  uint64_t per = alignUp(divUp(count, (uint64_t)nChannels), grainElems(elemSize));
  uint64_t off = minU64(per * (uint64_t)channel, count);
  return ElemRange{off, minU64(per, count - off)};
}

// Reference chunk size for a collective's channel part. Every chunk costs a fixed synchronisation
// with the peers, several microseconds (2xH200, session 9, all_reduce 8 MiB: 130 GB/s with four
// chunks per rank part, 205 with one; NCCL 178). A ring's AllReduce, AllGather and ReduceScatter
// keep every rank busy on a chunk of its own from the first step, so they need no pipeline to
// fill: a part of up to one connection step is one chunk, a larger one is cut into chunks of at
// least one step (about kSimpleTargetSlices of them, up to the largest chunk). Broadcast and
// Reduce run a chain whose hops only overlap with several chunks: their parts are cut into about
// kSimpleTargetSlices chunks, never below kSimpleMinChunkBytes.
WEFT_HD uint64_t recommendedChunkElems(int func, int nRanks, uint64_t chanCount, int elemSize,
                                       uint64_t stepBytes) {
  uint64_t maxChunk = simpleMaxChunkElems(stepBytes, elemSize);
  uint64_t perRank = func == kFuncAllReduce ? divUp(chanCount, (uint64_t)nRanks) : chanCount;
  uint64_t want = alignUp(divUp(perRank, kSimpleTargetSlices), grainElems(elemSize));
  uint64_t floor = func == kFuncBroadcast || func == kFuncReduce
                       ? minU64(maxChunk, kSimpleMinChunkBytes / (uint64_t)elemSize)
                       : minU64(alignUp(maxU64(perRank, 1), grainElems(elemSize)), simpleStepElems(stepBytes, elemSize));
  return minU64(maxChunk, maxU64(want, floor));
}

// Reference chunk for SendRecv items: one connection step, so a transfer pipelines at step
// granularity; both ends of a pair must use the same value.
WEFT_HD uint64_t p2pChunkElems(uint64_t stepBytes, int elemSize) {
  return simpleStepElems(stepBytes, elemSize);
}

// Reference chunk for Tree items: like a chain broadcast of the whole part (the tree moves every
// element up and down once), small parts cut into about kSimpleTargetSlices chunks.
WEFT_HD uint64_t treeChunkElems(uint64_t chanCount, int elemSize, uint64_t stepBytes) {
  return recommendedChunkElems(kFuncBroadcast, 1, chanCount, elemSize, stepBytes);
}

// ---- ring AllReduce ----
// A channel's part is processed in loops of nRanks chunks. In the last loop the remaining
// elements are balanced over the nRanks chunks (rounded up to the grain), so some trailing
// chunks may be short or empty.
WEFT_HD uint64_t ringAllReduceChunk(uint64_t chanCount, uint64_t loopBase, uint64_t chunkElems,
                                    int nRanks, int elemSize) {
  uint64_t remaining = chanCount - loopBase;
  return minU64(chunkElems, alignUp(divUp(remaining, (uint64_t)nRanks), grainElems(elemSize)));
}

// Elements of chunk `index` (0..nRanks-1) in the loop at loopBase, relative to the channel part.
WEFT_HD ElemRange ringAllReduceChunkRange(uint64_t chanCount, uint64_t loopBase, uint64_t chunk,
                                          int index) {
  uint64_t remaining = chanCount - loopBase;
  uint64_t start = chunk * (uint64_t)index;
  if (start >= remaining) return ElemRange{loopBase + remaining, 0};
  return ElemRange{loopBase + start, minU64(chunk, remaining - start)};
}

// Which chunk (ring position whose data it is) the rank at ring position `pos` handles at ring
// step k, 0 <= k <= 2*nRanks - 2. At step k it receives what position pos-1 sent at step k-1;
// at step nRanks-1 it completes its own position's chunk.
WEFT_HD int ringChunkIndex(int pos, int k, int nRanks) {
  int c = (pos - 1 - k) % nRanks;
  return c < 0 ? c + nRanks : c;
}

}  // namespace weft::dev
