// The contract between the host enqueue engine and the device kernels: plain structs that the host
// fills (in device or host-mapped memory) and kernels read. Shared by host and device compilers, so
// only standard-layout types, fixed-width integers and raw pointers; sizes are pinned by static_assert.
//
// Vocabulary (NCCL's): a *channel* is one thread block's share of a collective with its own ring
// order and connections; a *connection* moves data one way between two ranks through the receiver's
// staging buffer split into kSteps *steps*; *work* items tell a channel what to do.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define WEFT_HD __host__ __device__ __forceinline__
#else
#define WEFT_HD inline
#endif

namespace weft::dev {

constexpr int kSteps = 8;           // slots per connection buffer (NCCL_STEPS)
constexpr int kMaxChannels = 64;    // hard limit of channels per communicator
constexpr int kMaxWorksPerChannel = 32;  // work items one channel takes from one launch
constexpr int kMaxTreeArity = 3;    // tree children per rank: chain successor + two other nodes' heads
constexpr int kDirectMaxRanks = 8;  // Direct (kAlgoDirect) serves communicators of 2..8 ranks
constexpr int kSymMaxRanks = 32;    // symmetric collectives (Direct on Simple): one warp signals the peers

// Protocol and algorithm numbers are NCCL's (tuner plugins and NCCL_PROTO/NCCL_ALGO use them),
// except kAlgoDirect, a weft extension after NCCL's last value: collectives moved straight between
// the ranks of one node. On LL: small AllReduce/AllGather through the connections, in one hop
// (algo/direct.cuh). On Simple: the symmetric collectives, which read and write the peers' own
// buffers in symmetric windows (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC) mapped flat, with
// no connection at all (coll/run_symmetric.cuh).
enum Proto : uint8_t { kProtoLL = 0, kProtoLL128 = 1, kProtoSimple = 2, kNumProtos = 3 };
enum Algo : uint8_t { kAlgoTree = 0, kAlgoRing = 1, kAlgoCollnetDirect = 2, kAlgoCollnetChain = 3,
                      kAlgoNvls = 4, kAlgoNvlsTree = 5, kAlgoPat = 6, kAlgoDirect = 7, kNumAlgos = 8 };

// What a work item does. Gather/Scatter/AlltoAll reach the device as SendRecv items.
enum Func : uint8_t { kFuncBroadcast = 0, kFuncReduce = 1, kFuncAllGather = 2, kFuncReduceScatter = 3,
                      kFuncAllReduce = 4, kFuncSendRecv = 5, kNumFuncs = 6 };

// Device-side reduction. ncclAvg becomes PreMulSum (floating types, scalar 1/n) or SumPostDiv
// (integers, divide by n at the end); user PreMulSum ops carry their scalar in the work item.
enum RedOp : uint8_t { kRedSum = 0, kRedProd = 1, kRedMax = 2, kRedMin = 3, kRedPreMulSum = 4,
                       kRedSumPostDiv = 5, kNumRedOps = 6 };

// Element types, numbered as ncclDataType_t.
enum DataType : uint8_t { kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
                          kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10,
                          kFloat8e5m2 = 11, kNumDataTypes = 12 };

WEFT_HD int dataTypeBytes(int type) {
  switch (type) {
    case kInt8: case kUint8: case kFloat8e4m3: case kFloat8e5m2: return 1;
    case kFloat16: case kBfloat16: return 2;
    case kInt32: case kUint32: case kFloat32: return 4;
    default: return 8;
  }
}

// One direction of one connection, as seen by one end.
//  - The sender writes step s's data into buffs[proto] + (s % kSteps) * stepBytes[proto] (memory of the
//    receiver's GPU, or host memory for shm), then publishes tail = s + 1.
//  - The receiver waits for tail > s, consumes the slot, then publishes head = s + 1.
//  - The sender may write step s once head + kSteps > s.
// `tail` lives next to the receiver's buffer; `head` lives with the sender. Both ends hold pointers
// to both (one of them remote). LL and LL128 carry flags inside the data and use head only.
struct ConnInfo {
  char* buffs[kNumProtos];
  int32_t stepBytes[kNumProtos];
  // Send side: slots known free from `step` on when the last kernel exited (head + kSteps - step
  // as it last read head: a lower bound, head only grows), so that the next kernel need not read
  // head before its first steps. 0: unknown. Saved with step by every kernel; host: zero.
  uint32_t sendFree;
  volatile uint64_t* tail;
  volatile uint64_t* head;
  uint64_t step;  // next step to send/receive; the kernel saves it here when it exits
};
static_assert(sizeof(ConnInfo) == 64, "ConnInfo layout is shared by host and device");
// tail and head each start a line of kCounterLineWords words of the same connection; the words
// after them carry zero-copy offers and markers (algo/p2p_direct.cuh). Zero-filled at creation.
constexpr int kCounterLineWords = 16;
// Words of those lines beyond head and tail: the offer after head (written by the receiver into
// the sender's memory), the marker and the receiver's count of direct parts after tail (the
// receiver's memory).
constexpr int kOfferSeqWord = 1, kOfferTokenWord = 2, kOfferOffsetWord = 3, kOfferBytesWord = 4;
constexpr int kMarkerWord = 1, kDirectCountWord = 2;
// The sender's step sizes, in its head line: step s's word at kStepSizeWord + s % kSteps. A
// Simple step's is stored before its tail; the network proxy sends that many bytes of the slot (a
// peer through GPU or shared memory reads only what its work says; the store stays in the sender's
// own memory). The word carries the low 32 bits of step + 1 above its byte count, so that the proxy
// tells which step a word is for (a word still zero, as the line starts, names no step below
// 2^32 - 1). An LL step, which publishes no tail, stores its payload bytes with kLLSizeBit set, in
// no order with its lines: the plugin proxy (proxy/plugin_proxy.h) sends an LL step once all its
// lines carry their flags; the socket proxy sends lines as they appear and skips these words.
constexpr int kStepSizeWord = 8;
static_assert(kStepSizeWord > kOfferBytesWord && kStepSizeWord + kSteps <= kCounterLineWords,
              "step sizes fit the line");
constexpr int kStepTagShift = 32;  // the tag's place in the word; the bytes fill the bits below it
WEFT_HD uint64_t stepSizeWord(uint64_t step, uint64_t bytes) {
  return (step + 1) << kStepTagShift | (bytes & 0xffffffffu);
}
WEFT_HD bool stepSizeWordIsFor(uint64_t word, uint64_t step) {
  return (word >> kStepTagShift) == ((step + 1) & 0xffffffffu);
}
constexpr uint64_t kLLSizeBit = 1ull << 31;  // Simple steps are far below 2 GiB
WEFT_HD uint64_t llStepSizeWord(uint64_t step, uint64_t bytes) { return stepSizeWord(step, bytes | kLLSizeBit); }
WEFT_HD bool stepSizeWordIsLL(uint64_t word) { return (word & kLLSizeBit) != 0; }
WEFT_HD uint64_t stepSizeWordBytes(uint64_t word) { return word & (kLLSizeBit - 1); }

// Zero-copy point-to-point (algo/p2p_direct.cuh): registrations (ncclCommRegister) that a peer
// shared with this rank, mapped here: where this rank may write what it sends to that peer. A slot
// is live while token != 0; the host writes base and bytes before the token and clears the token
// first, so a kernel that matches a token reads a finished slot.
constexpr int kMaxPeerRegs = 64;  // slots per peer
struct DevRegSlot {
  uint64_t base;   // the registration's first byte, in this rank's address space
  uint64_t bytes;  // its length
  uint64_t token;  // the peer's registration handle (never reused), 0: free
};
static_assert(sizeof(DevRegSlot) == 24, "DevRegSlot layout is shared by host and device");

struct DevPeer {
  ConnInfo send;  // to this peer
  ConnInfo recv;  // from this peer
  const DevRegSlot* sendRegs;  // [kMaxPeerRegs]: the peer's registrations mapped here; null: none
  uint64_t pad;
};

struct DevRing {
  int32_t prev;        // rank we receive from
  int32_t next;        // rank we send to
  int32_t index;       // our position in the ring (userRanks[index] == our rank)
  int32_t pad0;
  const int32_t* userRanks;  // device array [nRanks]: ranks in ring order
};

// This rank's place in a channel's tree (Tree algorithm): a chain inside each node, a double
// binary tree across nodes. Every rank of the communicator holds the same tree per channel.
struct DevTree {
  int32_t up;                   // parent rank, -1 at the root
  int32_t down[kMaxTreeArity];  // children, -1 where none; filled from index 0
};

struct DevChannel {
  DevRing ring;
  DevTree tree;
  DevPeer* peers;      // device array [nRanks], indexed by peer rank
};

// The symmetric collectives' barrier memory: one such block per rank, all of them mapped flat
// (rank r's at DevComm::symSignals + r * symSignalStride), zero at creation. arrive[s][p] is
// written by peer p (the epoch it reached) for barrier slot s (the channel a part was planned on);
// epoch[s] is this rank's own count of barriers passed on slot s, kept between kernels.
struct DevSymSignals {
  uint64_t arrive[kMaxChannels][kSymMaxRanks];
  uint64_t epoch[kMaxChannels];
};

// Per-communicator device state, allocated once by the host.
struct DevComm {
  int32_t rank;
  int32_t nRanks;
  int32_t nChannels;
  int32_t p2pSendWarps;  // SendRecv with both parts: data warps of the send part (the rest receive)
  volatile uint32_t* abortFlag;  // host-mapped; non-zero: every spin loop gives up and the kernel exits
  DevSymSignals* symSignals;     // team rank 0's barrier memory (flat); null until a symmetric window
  uint64_t symSignalStride;      // bytes between two ranks' DevSymSignals
  DevChannel channels[kMaxChannels];
};

// The communicator's first fields and one channel (DevComm, DevChannel: constant once set up),
// copied into shared memory by every block before it waits for the previous launch (kernelBody).
// Read from global memory after that wait, they cost one more L2 round trip before every item's
// first connection access (prefetching them into L1 before the wait gained nothing: the wait
// seems to leave L1 cold).
struct ChannelView {
  int32_t rank;
  int32_t nRanks;
  int32_t nChannels;
  int32_t p2pSendWarps;
  volatile uint32_t* abortFlag;
  DevSymSignals* symSignals;
  uint64_t symSignalStride;
  DevChannel channel;
};
static_assert(offsetof(ChannelView, channel) == offsetof(DevComm, channels) &&
                  offsetof(ChannelView, abortFlag) == offsetof(DevComm, abortFlag) &&
                  offsetof(ChannelView, symSignalStride) == offsetof(DevComm, symSignalStride) &&
                  offsetof(ChannelView, p2pSendWarps) == offsetof(DevComm, p2pSendWarps),
              "ChannelView's first part is copied word by word from DevComm's");
static_assert(sizeof(ChannelView) % 8 == 0 && offsetof(DevComm, channels) % 8 == 0 && sizeof(DevChannel) % 8 == 0,
              "ChannelView is copied in 8-byte words");

// One item of work for one channel. For collectives, [chanOffset, chanOffset + chanCount) is this
// channel's part of the `count` elements (of every rank's block where the collective has per-rank
// blocks: AllGather/ReduceScatter), processed in chunks of chunkElems (one connection step each or
// a fraction of it). For SendRecv, sendCount elements go to `sendPeer` and recvCount come from
// `recvPeer` (either may be -1: none), this channel's part given by the offsets. SendRecv items
// reuse two fields that only collectives need: redOpArg is the token of the registration holding
// the receive buffer (0: none) and count the receive buffer's byte offset in it. Symmetric items
// (kAlgoDirect on kProtoSimple) carry team rank 0's flat addresses of the buffers; rank r's are
// peerStride4G x 4 GiB x r further.
struct DevWork {
  uint8_t func;      // Func
  uint8_t algo;      // Algo
  uint8_t proto;     // Proto
  uint8_t redOp;     // RedOp
  uint8_t dataType;  // DataType
  uint8_t flags;     // kWorkFlag*
  uint16_t symSlot;  // symmetric items: the barrier slot (DevSymSignals), the channel planned on
  int32_t root;      // Broadcast/Reduce root rank
  const void* sendBuff;
  void* recvBuff;
  uint64_t count;       // elements of the whole collective (per rank block for AllGather/ReduceScatter)
  uint64_t chanOffset;  // this channel's first element
  uint64_t chanCount;   // this channel's element count
  uint32_t chunkElems;  // elements per ring chunk (one primitive call; Simple cuts it into
                        // slices of at most one step); rules in device/work_math.h
  int32_t sendPeer;     // SendRecv: -1 when none
  int32_t recvPeer;
  uint32_t peerStride4G;  // symmetric items: distance between two ranks' buffers, in units of 4 GiB
  uint64_t recvOffset;  // SendRecv: this channel's first element of the receive side
  uint64_t recvCount;   // SendRecv: this channel's element count of the receive side
  uint64_t redOpArg;    // PreMulSum: scalar bits (type of the data, zero-extended) or, with
                        // kWorkFlagScalarOnDevice, a device pointer to it; SumPostDiv: the divisor
};
static_assert(sizeof(DevWork) == 96, "DevWork layout is shared by host and device");

constexpr uint8_t kWorkFlagScalarOnDevice = 0x1;
constexpr uint8_t kWorkFlagTwoShot = 0x2;  // kAlgoDirect AllReduce: reduce-scatter + all-gather, not one-shot
// SendRecv: the send part is registered and the peer shared registrations with us: ask the
// receiver where its buffer is and write there directly when it is one of them (p2p_direct.cuh).
constexpr uint8_t kWorkFlagDirectSend = 0x4;

// Arguments of one kernel launch: blockIdx.x serves channel blocks[blockIdx.x].channel and runs
// items first .. first + count - 1, in order, taken from one of two places:
//  - inline (worksInline != 0): inlineWorks[first + i], carried in the kernel parameters. Launches
//    of at most kMaxInlineWorks items use it: no host-memory reads and no FIFO slots to give back,
//    which is most of a small collective's fixed cost; graph captures need no buffer of their own.
//  - otherwise works[(first + i) & worksMask]: the communicator's rolling work FIFO (host-mapped)
//    or, for CUDA graphs, a persistent buffer (worksMask = ~0u). Once every block has copied its
//    items, the last block to do so stores fifoConsumedValue into *fifoConsumed (host-mapped),
//    telling the host those FIFO slots are free again.
// 36 items fill the classic 4 KB of parameters, so a launch of one item on each of 32 channels
// (every mid-size ring or Direct call at 2 ranks) reads nothing from host memory. On H200 a block's
// host read costs ~1.4 us (tools/launch_floor.cu; 32 blocks reading ONE host word: ~32 us), the
// FIFO path ~0.7 us at one block; 3.4 KB of parameters cost nothing measurable over a few bytes.
constexpr int kMaxInlineWorks = 36;
// Built with WEFT_DIAGNOSTIC_HOOKS=OFF (CMake), the diagnostic hooks are compiled out: replay stamps
// (below), the host's enqueue profile (NCCL_WEFT_HOST_PROFILE) and the per-call ledger and call
// check (core/call_check.h). That build exists to measure what the hooks cost when present but
// switched off (reliability matrix row 23; tools/hooks_ab.py): in graph replays, the stamps' code
// (README "Diagnostic hooks").
#ifdef WEFT_NO_DIAGNOSTIC_HOOKS
inline constexpr bool kDiagnosticHooks = false;
#else
inline constexpr bool kDiagnosticHooks = true;
#endif

struct DevKernelArgs {
  DevComm* comm;
  const DevWork* works;
  uint32_t worksMask;
  uint32_t fifoConsumedValue;
  volatile uint32_t* fifoConsumed;    // may be null (graph and inline launches)
  uint32_t* blockArrivals;            // device counter, zero between launches; the last block resets it
  uint32_t nBlocks;
  uint32_t worksInline;
  // Launches captured into CUDA graphs only (null otherwise): host-mapped, one word per channel.
  // Thread 0 of a block stores the GPU time it started (never 0) into its channel's word once the
  // previous launch is done, and 0 when its items are done, so the host's watchdog can tell a
  // replay's kernel that stopped moving from replays that follow each other (core/watchdog.cc).
  volatile uint64_t* replayStamps;
  struct Block { uint32_t first; uint16_t count; uint8_t channel; uint8_t pad; } blocks[kMaxChannels];
  DevWork inlineWorks[kMaxInlineWorks];
};
static_assert(sizeof(DevKernelArgs) <= 4096, "kernel parameters must stay within the classic 4 KB");

}  // namespace weft::dev
