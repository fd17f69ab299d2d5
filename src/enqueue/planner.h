// The planner: a pure function from a group's tasks on one communicator to kernel launches, each a
// list of work items per channel. No GPU, no communicator object: everything it needs is in
// PlanShape, so it is unit-tested on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "device/abi.h"
#include "enqueue/task.h"
#include "graph/tuning.h"

namespace weft::enqueue {

// Which (function, algorithm, protocol, reduction, type) combinations the kernels implement.
using SupportFn = bool (*)(dev::Func, dev::Algo, dev::Proto, dev::RedOp, dev::DataType);

// What the planner runs one collective with.
struct CollChoice {
  int algo = dev::kAlgoRing;
  int proto = dev::kProtoSimple;
  int nChannels = 1;
  double timeUs = 0;  // the model's estimate for the pair (at the model's channel count)
  bool twoShot = false;  // Direct AllReduce: two-shot (DevWork flag kWorkFlagTwoShot)
};

// chooseCollective's answers, remembered per (kind, reduction, type, count, symmetric): for one
// communicator nothing else goes into them, and working the tuning model out again costs about a
// microsecond per call. Direct-mapped; a communicator owns one (PlanShape::choices).
class ChoiceCache {
 public:
  bool find(const Task& t, CollChoice* choice) const;
  void put(const Task& t, const CollChoice& choice);

 private:
  struct Entry {
    bool used = false;
    TaskKind kind = TaskKind::kAllReduce;
    dev::RedOp redOp = dev::kRedSum;
    dev::DataType dataType = dev::kUint8;
    size_t count = 0;
    bool symmetric = false;  // Task::symStride4G != 0
    CollChoice choice;
  };
  static constexpr size_t kEntries = 64;
  static size_t slot(const Task& t);
  Entry entries_[kEntries];
};

// What the planner knows about the communicator.
struct PlanShape {
  int rank = 0;
  int nRanks = 1;
  int nChannels = 1;               // channels with ring connections
  int stepBytes = 1 << 19;         // Simple step size of every connection
  // The tuning model's view of the communicator (tuning.nRanks must equal nRanks). Per call the
  // planner narrows tuning.supported[func] to what isSupported says for the call's reduction and
  // type, and tuning.maxChannels to nChannels. Every rank must pass the same values.
  graph::TuningInput tuning;
  const graph::TuningConstants* constants = nullptr;  // nullptr: TuningConstants::defaults()
  SupportFn isSupported = nullptr;                    // nullptr: dev::isSupported
  int minCollChannels = 1;          // a collective uses at least this many channels (minCTAs,
                                    // NCCL_MIN_NCHANNELS), at most nChannels
  size_t minChannelBytes = 1 << 17;  // one rank (a local copy): about bytes/minChannelBytes channels
  // sendChannels[p]: the channels on which this rank has a connection to peer p, in increasing
  // order; recvChannels[p]: those on which it has one from p. Must be the sets the peer computes
  // for the other direction (the connection plan guarantees it).
  std::vector<std::vector<int>> sendChannels;
  std::vector<std::vector<int>> recvChannels;
  // Point-to-point traffic to or from one peer uses at most the first p2pMaxChannels channels of
  // its set (0: all of them). Every rank must pass the same value.
  int p2pMaxChannels = 0;
  // A transfer to or from one peer smaller than p2pChannelBytes per channel uses fewer channels,
  // down to 1/(nRanks-1) of them, each peer distance starting at another place in the set, so that
  // the peers of an all-to-all move side by side instead of one after another on every channel
  // (planner.cc p2pWindowOf). 0: every transfer uses all p2pMaxChannels channels. Every rank must pass
  // the same value.
  size_t p2pChannelBytes = 0;
  // A transfer to or from one peer of at most p2pLLBytes bytes runs on LL (as NCCL below
  // NCCL_P2P_LL_THRESHOLD), in launches after the collectives and before the Simple point-to-point
  // ones: over the peer's channels (as Simple) when p2pLLOnPeerChannels, else over the mesh
  // channels (directChannels, where every pair of ranks has connections with LL buffers, unlike
  // the point-to-point-only ones of such a communicator). 0, or neither: Simple only. Every rank
  // must pass the same values.
  size_t p2pLLBytes = 0;
  // Every connection in sendChannels / recvChannels has LL slots (a communicator without a mesh,
  // having network peers or more than dev::kDirectMaxRanks ranks: its point-to-point-only
  // connections get them).
  bool p2pLLOnPeerChannels = false;
  // Channels on which EVERY rank has connections to and from every other rank (the same list on
  // all ranks; transport::ConnectionPlan::meshChannels), in increasing order: where the Direct
  // algorithm may run. Empty: no Direct.
  std::vector<int> directChannels;
  // Blocks beyond the channels that only run local copies (send/receive to self): channel ids
  // nChannels .. nChannels + copyLanes - 1, which have no connections. The copies then run beside
  // the transfers to peers instead of before them (AlltoAll's own block). 0: copies use the channels.
  int copyLanes = 0;
  // Where chooseCollective remembers its answers for this shape (null: it works each one out).
  // Only valid while every other field stays as it was when the answers were stored.
  ChoiceCache* choices = nullptr;
};

// The items of one launch, block by block, in one array: a 32-block launch costs three
// allocations rather than one per block (the planner's share of a stream launch's host time,
// NCCL_WEFT_HOST_PROFILE: 2.5-3.2 us at 32 channels with a list per block, on the H200 machine).
class LaunchWorks {
 public:
  // One block's items (a view into the launch).
  struct Block {
    const dev::DevWork* first;
    const dev::DevWork* last;
    const dev::DevWork* begin() const { return first; }
    const dev::DevWork* end() const { return last; }
    size_t size() const { return (size_t)(last - first); }
    bool empty() const { return first == last; }
    const dev::DevWork& operator[](size_t i) const { return first[i]; }
  };
  struct Iterator {
    const LaunchWorks* works;
    size_t block;
    Block operator*() const { return (*works)[block]; }
    Iterator& operator++() {
      ++block;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return block != o.block; }
  };

  size_t size() const { return starts_.empty() ? 0 : starts_.size() - 1; }  // blocks
  size_t itemCount() const { return items_.size(); }
  Block operator[](size_t b) const { return {items_.data() + starts_[b], items_.data() + starts_[b + 1]}; }
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }

  void reserve(size_t blocks, size_t items) {
    starts_.reserve(blocks + 1);
    items_.reserve(items);
  }
  // Appends a block of n items.
  void addBlock(const dev::DevWork* first, size_t n) {
    if (starts_.empty()) starts_.push_back(0);
    items_.insert(items_.end(), first, first + n);
    starts_.push_back((uint32_t)items_.size());
  }
  void push_back(const std::vector<dev::DevWork>& block) { addBlock(block.data(), block.size()); }
  // Every item of every block, in order, for edits that keep the blocks' shape.
  std::vector<dev::DevWork>& items() { return items_; }
  LaunchWorks& operator=(const std::vector<std::vector<dev::DevWork>>& blocks) {
    items_.clear();
    starts_.clear();
    for (const auto& b : blocks) push_back(b);
    return *this;
  }

 private:
  std::vector<dev::DevWork> items_;
  std::vector<uint32_t> starts_;  // block b's items: [starts_[b], starts_[b + 1])
};

// Ring sums on Simple up to this many bytes per item and channel run with every copy inlined
// (NCCL_WEFT_INLINE_SUM_BYTES). One H200, two ranks, graph, 32 channels (Reduce 16), us inlined
// against outlined: all_reduce 2/4/8/16/32/64 MiB 12.2/16.0/25.3/44.6/84.1/164.1 against
// 14.3/17.7/26.9/44.6/81.0/158.3, reduce_scatter 8.0/10.0/15.2/28.6/52.6/101.4 against
// 8.7/10.8/16.0/28.8/51.6/99.6, reduce 10.5/14.2/24.1/43.7/78.3/152.3 against
// 12.4/15.7/24.2/43.5/78.6/152.6; below 2 MiB inlined is 1-1.9 us faster. The outlined copies move
// 8 packs per thread instead of 4, which wins from ~512 KiB per channel.
constexpr uint64_t kInlineSumChannelBytes = 256 * 1024;

// One kernel launch: block b serves channel `channels[b]` and runs works[b] in order. Every
// item of a launch has protocol `proto` (one kernel per protocol).
struct PlannedLaunch {
  int proto = dev::kProtoSimple;
  std::vector<int> channels;
  LaunchWorks works;
  size_t workCount() const { return works.itemCount(); }
};

// The specialized kernel (device/special_kernels.h) that can run every item of the launch, or
// dev::kSpecialNone when its items are not all of one such kind. A Ring-sum launch whose items
// each move at most inlineSumBytes on their channel runs the kind's inlined twin
// (dev::specialInlineTwin); 0 never picks it.
int specialKernelOfLaunch(const PlannedLaunch& launch, uint64_t inlineSumBytes = kInlineSumChannelBytes);

// Picks (algorithm, protocol, channels) for a collective task with the tuning model: the fastest
// pair that the kernels implement for its reduction and type and that NCCL_ALGO/NCCL_PROTO
// allow; channels as the model says, within [minCollChannels, nChannels] (Direct: within
// directChannels, which then name the channels the parts run on). Fails with
// ncclInvalidUsage (WARN naming the function and the settings) when nothing is left.
[[nodiscard]] Status chooseCollective(const Task& task, const PlanShape& shape, CollChoice* choice);

// One rank: a collective whose result is its input (a reduction over one rank returns that rank's
// value; only a user PreMulSum scales it) needs no kernel. Such tasks leave *tasks and become
// device-to-device copies, which the launch runs as cudaMemcpyAsync, as NCCL does (in a CUDA
// graph, 2xH200: 5.4 us per 8-byte all_reduce with weft's kernel against NCCL's 0.95 us). So do
// sends and receives (all to self), the i-th receive taking the i-th send's bytes, after the
// collectives' copies: a copy lane block moves ~48 GB/s on an H200, cudaMemcpyAsync ~2.1 TB/s
// (1 GiB). Self pairs that do not match (count or size) stay, for the planner to report. In-place
// and empty ones become nothing. Task order is kept among the tasks that stay.
struct LocalCopy {
  void* dst;
  const void* src;
  size_t bytes;
};
void takeLocalCopies(std::vector<Task>* tasks, int nRanks, std::vector<LocalCopy>* copies);

// Turns tasks into launches. Collectives keep their call order and come first; point-to-point
// tasks follow in rounds (round d: send to rank+d, receive from rank-d), the order every rank
// computes alike, so that matching sends and receives meet without deadlock. Consecutive work of
// one protocol shares launches; a change of protocol starts a new launch, so launches run the
// tasks in call order.
[[nodiscard]] Status planTasks(const std::vector<Task>& tasks, const PlanShape& shape,
                               std::vector<PlannedLaunch>* launches);

// The model's estimate of the tasks' time in microseconds: the sum over collectives of the chosen
// pair's estimate (point-to-point tasks are not modeled and count 0, as in NCCL).
[[nodiscard]] Status estimateTasks(const std::vector<Task>& tasks, const PlanShape& shape, double* us);

// How many channels a single-rank collective (a local copy) of `bytes` uses (at least 1, at most
// shape.nChannels).
int collectiveChannels(size_t bytes, const PlanShape& shape);

// Copy lanes for a communicator with nChannels channels: half as many, but at least
// kMinCopyLanes, within kMaxChannels. A one-rank communicator has a single channel, and one block
// copies ~390 GB/s on an H200 against NCCL's ~1.9 TB/s for a 1 GiB send/receive to self.
constexpr int kMinCopyLanes = 16;
int defaultCopyLanes(int nChannels);

// Splits `count` elements into `parts` contiguous ranges whose boundaries fall on multiples of
// `alignElems` (the last part takes the remainder). Empty parts are possible when count is small.
void splitRange(uint64_t count, int parts, uint64_t alignElems, int index, uint64_t* offset,
                uint64_t* length);

// splitRange for every part of one range: the part size is worked out once (two divisions, which
// a 32-channel plan otherwise repeats per channel).
class RangeSplit {
 public:
  RangeSplit(uint64_t count, int parts, uint64_t alignElems);
  void part(int index, uint64_t* offset, uint64_t* length) const;

 private:
  uint64_t count_, per_ = 0;
  int parts_;
};

}  // namespace weft::enqueue
