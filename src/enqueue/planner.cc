#include "enqueue/planner.h"

#include <algorithm>
#include <map>

#include "core/log.h"
#include "device/kernel_api.h"
#include "device/special_kernels.h"
#include "device/work_math.h"
#include "graph/algo_proto_env.h"

namespace weft::enqueue {
namespace {

constexpr uint64_t kChannelAlignBytes = 512;  // channel boundaries keep 16-byte vectors aligned
constexpr uint64_t kMinCopyLaneBytes = 256 << 10;  // a local copy takes one more lane per this many bytes

dev::Func deviceFunc(TaskKind kind) {
  switch (kind) {
    case TaskKind::kBroadcast: return dev::kFuncBroadcast;
    case TaskKind::kReduce: return dev::kFuncReduce;
    case TaskKind::kAllGather: return dev::kFuncAllGather;
    case TaskKind::kReduceScatter: return dev::kFuncReduceScatter;
    case TaskKind::kAllReduce: return dev::kFuncAllReduce;
    default: return dev::kFuncSendRecv;
  }
}

// Point-to-point moves one connection step per chunk; both ends compute the same value.
uint32_t p2pChunkElems(const PlanShape& shape) { return (uint32_t)dev::p2pChunkElems(shape.stepBytes, 1); }

dev::DevWork baseWork(const Task& t, const PlanShape& shape) {
  dev::DevWork w{};
  w.func = deviceFunc(t.kind);
  w.algo = dev::kAlgoRing;
  w.proto = dev::kProtoSimple;
  w.redOp = t.redOp;
  w.dataType = t.dataType;
  w.flags = t.scalarOnDevice ? dev::kWorkFlagScalarOnDevice : 0;
  w.root = t.root;
  w.sendBuff = t.sendBuff;
  w.recvBuff = t.recvBuff;
  w.count = t.count;
  w.chunkElems = 0;  // collectives: set per channel from its part (planCollective)
  w.sendPeer = -1;
  w.recvPeer = -1;
  w.redOpArg = t.redOpArg;
  return w;
}

// Work of the whole group, per channel, before it is cut into launches.
using ChannelWorks = std::vector<std::vector<dev::DevWork>>;

// The byte count the tuning model prices: NCCL's nBytes, the whole gathered/scattered array for
// AllGather/ReduceScatter (whose count is one rank's block).
size_t modelBytes(const Task& t, int nRanks) {
  size_t b = t.bytes();
  if (t.kind == TaskKind::kAllGather || t.kind == TaskKind::kReduceScatter) b *= (size_t)nRanks;
  return b;
}

// chunkElems of one channel's item; rules in device/work_math.h.
uint32_t collChunkElems(const dev::DevWork& w, const PlanShape& shape, int elemBytes) {
  if (w.proto != dev::kProtoSimple) return 0;  // LL/LL128: the kernel derives it from its buffers
  if (w.algo == dev::kAlgoTree) return (uint32_t)dev::treeChunkElems(w.chanCount, elemBytes, (uint64_t)shape.stepBytes);
  return (uint32_t)dev::recommendedChunkElems(w.func, shape.nRanks, w.chanCount, elemBytes,
                                              (uint64_t)shape.stepBytes);
}

void planCollective(const Task& t, const CollChoice& choice, const PlanShape& shape, ChannelWorks* perChannel) {
  int elemBytes = dev::dataTypeBytes(t.dataType);
  int parts = choice.nChannels;
  uint64_t align = kChannelAlignBytes / (uint64_t)elemBytes;
  const bool direct = choice.algo == dev::kAlgoDirect && choice.proto == dev::kProtoLL;
  const bool symmetric = choice.algo == dev::kAlgoDirect && choice.proto == dev::kProtoSimple;
  dev::DevWork base = baseWork(t, shape);
  base.algo = (uint8_t)choice.algo;
  base.proto = (uint8_t)choice.proto;
  if (direct && choice.twoShot) base.flags |= dev::kWorkFlagTwoShot;
  if (symmetric) {  // team rank 0's copies; the kernel finds every rank's (device/abi.h DevWork)
    base.sendBuff = t.symSend0;
    base.recvBuff = t.symRecv0;
    base.peerStride4G = t.symStride4G;
  }
  const RangeSplit split(t.count, parts, align);  // its divisions once, not per channel
  for (int c = 0; c < parts; ++c) {
    dev::DevWork w = base;
    split.part(c, &w.chanOffset, &w.chanCount);
    if (w.chanCount == 0) continue;
    if (symmetric) w.symSlot = (uint16_t)c;  // each rank plans the same parts on the same channels
    else w.chunkElems = collChunkElems(w, shape, elemBytes);
    (*perChannel)[direct ? shape.directChannels[c] : c].push_back(w);
  }
}

// Appends launches of at most kMaxWorksPerChannel items per channel; order is kept per channel.
// Launch k takes items [k * kMaxWorksPerChannel, ...) of every channel's list (nearly always there
// is one launch).
void cutLaunches(int proto, const ChannelWorks& perChannel, std::vector<PlannedLaunch>* launches) {
  constexpr size_t kMax = (size_t)dev::kMaxWorksPerChannel;
  for (size_t from = 0;; from += kMax) {
    size_t blocks = 0, items = 0;
    for (const auto& list : perChannel) {
      if (list.size() <= from) continue;
      blocks++;
      items += std::min(list.size() - from, kMax);
    }
    if (blocks == 0) return;
    PlannedLaunch& launch = launches->emplace_back();
    launch.proto = proto;
    launch.channels.reserve(blocks);
    launch.works.reserve(blocks, items);
    for (size_t c = 0; c < perChannel.size(); ++c) {
      const std::vector<dev::DevWork>& list = perChannel[c];
      if (list.size() <= from) continue;
      launch.channels.push_back((int)c);
      launch.works.addBlock(list.data() + from, std::min(list.size() - from, kMax));
    }
  }
}

// Per-channel lists for planTasks, kept per thread between calls so that their storage is reused
// (a 32-channel plan allocated a list per channel on every call). Slot i holds a plan's i-th
// protocol segment; planTasks fills them and cuts them into launches before it returns.
std::vector<ChannelWorks>& scratchPool() {
  static thread_local std::vector<ChannelWorks> pool;
  return pool;
}

// Slot `slot` of the pool, emptied, with at least nBlocks lists (references to other slots may
// move: the pool can grow).
ChannelWorks& freshLists(size_t slot, int nBlocks) {
  std::vector<ChannelWorks>& pool = scratchPool();
  if (pool.size() <= slot) pool.resize(slot + 1);
  ChannelWorks& lists = pool[slot];
  if ((int)lists.size() < nBlocks) lists.resize((size_t)nBlocks);
  for (auto& list : lists) list.clear();
  return lists;
}

// Position of `channel` in `set`, or -1.
int indexIn(const std::vector<int>& set, int channel) {
  auto it = std::find(set.begin(), set.end(), channel);
  return it == set.end() ? -1 : (int)(it - set.begin());
}

// How many channels of a peer's set point-to-point traffic uses (PlanShape::p2pMaxChannels).
int usedP2pChannels(const std::vector<int>& set, const PlanShape& shape) {
  const int n = (int)set.size();
  return shape.p2pMaxChannels > 0 ? std::min(n, shape.p2pMaxChannels) : n;
}

// Which channels of a peer's set (its first `cap`) carry a transfer of `bytes` bytes to or from
// the rank `distance` places away: `used` of them from position `start` on (mod cap). Both ends
// of a transfer see the same set, distance and bytes, hence the same channels.
struct P2pWindow {
  int cap = 0, start = 0, used = 0;
  // Position of the piece that channel `c` carries, or -1 when it carries none.
  int pieceOn(const std::vector<int>& set, int c) const {
    const int pos = indexIn(set, c);
    if (pos < 0 || pos >= cap) return -1;
    const int k = (pos - start + cap) % cap;
    return k < used ? k : -1;
  }
};

P2pWindow p2pWindowOf(const std::vector<int>& set, uint64_t bytes, int distance, const PlanShape& shape) {
  P2pWindow w;
  w.cap = usedP2pChannels(set, shape);
  w.used = w.cap;
  if (shape.p2pChannelBytes == 0 || shape.nRanks <= 2 || w.cap == 0) return w;
  const int least = std::max(1, w.cap / (shape.nRanks - 1));
  const uint64_t wanted = (bytes + shape.p2pChannelBytes - 1) / shape.p2pChannelBytes;
  w.used = (int)std::clamp<uint64_t>(wanted, (uint64_t)least, (uint64_t)w.cap);
  w.start = (int)((int64_t)(distance - 1) * w.cap / (shape.nRanks - 1) % w.cap);
  return w;
}

// A send/receive pair to self: a local copy of the send's bytes into the receive's buffer, spread
// over the copy lanes (or the channels when there are none); no peer sees it.
void planSelfCopy(const Task& s, const Task& r, const PlanShape& shape, ChannelWorks* perChannel) {
  const uint64_t bytes = s.bytes();
  const int firstLane = shape.copyLanes > 0 ? shape.nChannels : 0;
  const int lanes = shape.copyLanes > 0 ? shape.copyLanes : shape.nChannels;
  const int used = (int)std::clamp<uint64_t>(bytes / kMinCopyLaneBytes, 1, (uint64_t)lanes);
  for (int i = 0; i < used; ++i) {
    dev::DevWork w = baseWork(s, shape);
    w.func = dev::kFuncSendRecv;
    w.dataType = dev::kUint8;
    w.recvBuff = r.recvBuff;
    w.count = bytes;
    splitRange(bytes, used, 16, i, &w.chanOffset, &w.chanCount);
    if (w.chanCount == 0) continue;
    w.recvOffset = w.chanOffset;
    w.recvCount = w.chanCount;
    w.sendPeer = w.recvPeer = shape.rank;
    w.chunkElems = p2pChunkElems(shape);
    (*perChannel)[firstLane + i].push_back(w);
  }
}

// Items of one round's i-th send s (to sendPeer, over the channels sendSet) and i-th receive r
// (from recvPeer, over recvSet), either may be null, on protocol `proto`: one item per channel
// that carries a piece of either.
Status planP2pPair(const Task* s, const Task* r, int sendPeer, int recvPeer, const std::vector<int>& sendSet,
                   const std::vector<int>& recvSet, int d, int proto, const PlanShape& shape, ChannelWorks* perChannel) {
  WEFT_ASSERT(!s || !sendSet.empty());
  WEFT_ASSERT(!r || !recvSet.empty());
  // Each direction's window of its set; the peer computes the same one for its end.
  const P2pWindow sendWin = p2pWindowOf(sendSet, s ? s->bytes() : 0, d, shape);
  const P2pWindow recvWin = p2pWindowOf(recvSet, r ? r->bytes() : 0, d, shape);
  const int nSend = sendWin.used, nRecv = recvWin.used;
  for (int c = 0; c < shape.nChannels; ++c) {
    const int si = s ? sendWin.pieceOn(sendSet, c) : -1;
    const int ri = r ? recvWin.pieceOn(recvSet, c) : -1;
    if (si < 0 && ri < 0) continue;
    const Task* any = s && si >= 0 ? s : r;
    dev::DevWork w = baseWork(*any, shape);
    w.func = dev::kFuncSendRecv;
    w.proto = (uint8_t)proto;
    w.sendBuff = nullptr;
    w.recvBuff = nullptr;
    // Both sides cut a transfer the same way: bytes over the channels of that direction.
    if (si >= 0) {
      uint64_t bytes = s->bytes();
      splitRange(bytes, nSend, 16, si, &w.chanOffset, &w.chanCount);
      w.sendPeer = sendPeer;
      w.sendBuff = s->sendBuff;
      w.count = bytes;
    }
    if (ri >= 0) {
      uint64_t bytes = r->bytes();
      splitRange(bytes, nRecv, 16, ri, &w.recvOffset, &w.recvCount);
      w.recvPeer = recvPeer;
      w.recvBuff = r->recvBuff;
    }
    // Point-to-point moves bytes: the device treats it as uint8 data.
    w.dataType = dev::kUint8;
    w.chunkElems = proto == dev::kProtoSimple ? p2pChunkElems(shape) : 0;  // LL: one step's payload
    if (w.sendPeer >= 0 && w.chanCount == 0) w.sendPeer = -1;
    if (w.recvPeer >= 0 && w.recvCount == 0) w.recvPeer = -1;
    if (w.sendPeer < 0 && w.recvPeer < 0) continue;
    (*perChannel)[c].push_back(w);
  }
  return ncclSuccess;
}

// Point-to-point: round d pairs this rank's i-th send to rank+d with its i-th receive from rank-d.
// A transfer of at most shape.p2pLLBytes goes to *llItems (LL over the peer's channels or the mesh
// channels: PlanShape::p2pLLOnPeerChannels), the others to *simpleItems; both ends of a transfer
// see its size, hence the same protocol and channels.
// A send and a receive of one pair share an item only when they share the protocol.
Status planPointToPoint(const std::vector<const Task*>& p2p, const PlanShape& shape, ChannelWorks* simpleItems,
                        ChannelWorks* llItems) {
  const int n = shape.nRanks;
  std::vector<std::vector<const Task*>> sendsTo(n), recvsFrom(n);
  for (const Task* t : p2p) {
    if (t->count == 0) continue;  // both sides of a zero-byte exchange skip it alike
    (t->kind == TaskKind::kSend ? sendsTo : recvsFrom)[t->peer].push_back(t);
  }
  const bool llPossible = shape.p2pLLBytes > 0 && (shape.p2pLLOnPeerChannels || !shape.directChannels.empty());
  auto protoOf = [&](const Task* t) {
    return t && llPossible && t->bytes() <= shape.p2pLLBytes ? dev::kProtoLL : dev::kProtoSimple;
  };
  for (int d = 0; d < n; ++d) {
    int sendPeer = (shape.rank + d) % n;
    int recvPeer = (shape.rank - d + n) % n;
    const auto& sends = sendsTo[sendPeer];
    const auto& recvs = recvsFrom[recvPeer];
    size_t pairs = std::max(sends.size(), recvs.size());
    if (d == 0) {
      // The i-th send to self pairs with the i-th receive from self: a local copy.
      for (size_t i = 0; i < pairs; ++i) {
        if (i >= sends.size() || i >= recvs.size() || sends[i]->bytes() != recvs[i]->bytes()) {
          WEFT_WARN("rank %d: ncclSend/ncclRecv to self in one group must pair up with equal sizes; "
                    "pair %zu has a send of %zu bytes and a receive of %zu bytes", shape.rank, i,
                    i < sends.size() ? sends[i]->bytes() : (size_t)0, i < recvs.size() ? recvs[i]->bytes() : (size_t)0);
          return ncclInvalidUsage;
        }
        planSelfCopy(*sends[i], *recvs[i], shape, simpleItems);
      }
      continue;
    }
    for (size_t i = 0; i < pairs; ++i) {
      const Task* s = i < sends.size() ? sends[i] : nullptr;
      const Task* r = i < recvs.size() ? recvs[i] : nullptr;
      const int sendProto = protoOf(s), recvProto = protoOf(r);
      auto setOf = [&](int proto, const std::vector<int>& peerSet) -> const std::vector<int>& {
        return proto == dev::kProtoLL && !shape.p2pLLOnPeerChannels ? shape.directChannels : peerSet;
      };
      auto itemsOf = [&](int proto) { return proto == dev::kProtoLL ? llItems : simpleItems; };
      const std::vector<int>& sendSet = setOf(sendProto, shape.sendChannels[sendPeer]);
      const std::vector<int>& recvSet = setOf(recvProto, shape.recvChannels[recvPeer]);
      if (!s || !r || sendProto == recvProto) {
        const int proto = s ? sendProto : recvProto;
        WEFT_TRY(planP2pPair(s, r, sendPeer, recvPeer, sendSet, recvSet, d, proto, shape, itemsOf(proto)));
      } else {
        WEFT_TRY(planP2pPair(s, nullptr, sendPeer, recvPeer, sendSet, recvSet, d, sendProto, shape, itemsOf(sendProto)));
        WEFT_TRY(planP2pPair(nullptr, r, sendPeer, recvPeer, sendSet, recvSet, d, recvProto, shape, itemsOf(recvProto)));
      }
    }
  }
  return ncclSuccess;
}

}  // namespace

int specialKernelOfLaunch(const PlannedLaunch& launch, uint64_t inlineSumBytes) {
  int kind = dev::kSpecialNone;
  uint64_t largest = 0;  // bytes of the largest item on its channel
  for (const LaunchWorks::Block list : launch.works)
    for (const dev::DevWork& w : list) {
      const int k = dev::specialKernelOf(w);
      if (k == dev::kSpecialNone || (kind != dev::kSpecialNone && k != kind)) return dev::kSpecialNone;
      kind = k;
      largest = std::max(largest, w.chanCount * (uint64_t)dev::dataTypeBytes(w.dataType));
    }
  // Items carry their launch's protocol (the planner's rule); a kernel of another shape must not run them.
  if (kind == dev::kSpecialNone || dev::specialKernelProto(kind) != launch.proto) return dev::kSpecialNone;
  return inlineSumBytes > 0 && largest <= inlineSumBytes ? dev::specialInlineTwin(kind) : kind;
}

int defaultCopyLanes(int nChannels) {
  const int room = dev::kMaxChannels - nChannels;  // none: self copies share the channels
  return room <= 0 ? 0 : std::min(std::max(nChannels / 2, kMinCopyLanes), room);
}

int collectiveChannels(size_t bytes, const PlanShape& shape) {
  size_t want = (bytes + shape.minChannelBytes - 1) / shape.minChannelBytes;
  return (int)std::clamp<size_t>(want, 1, (size_t)shape.nChannels);
}

RangeSplit::RangeSplit(uint64_t count, int parts, uint64_t alignElems) : count_(count), parts_(parts) {
  if (alignElems == 0) alignElems = 1;
  per_ = (count + parts - 1) / parts;
  per_ = (per_ + alignElems - 1) / alignElems * alignElems;
}

void RangeSplit::part(int index, uint64_t* offset, uint64_t* length) const {
  const uint64_t begin = std::min<uint64_t>(count_, per_ * (uint64_t)index);
  const uint64_t end = index == parts_ - 1 ? count_ : std::min<uint64_t>(count_, begin + per_);
  *offset = begin;
  *length = end - begin;
}

void splitRange(uint64_t count, int parts, uint64_t alignElems, int index, uint64_t* offset, uint64_t* length) {
  RangeSplit(count, parts, alignElems).part(index, offset, length);
}

size_t ChoiceCache::slot(const Task& t) {
  const uint64_t fields = (uint64_t)(t.symStride4G != 0) << 24 | (uint64_t)t.kind << 16 | (uint64_t)t.redOp << 8 |
                          t.dataType;
  const uint64_t h = (uint64_t)t.count * 0x9E3779B97F4A7C15ull ^ fields;
  return (size_t)(h ^ h >> 29) % kEntries;
}

bool ChoiceCache::find(const Task& t, CollChoice* choice) const {
  const Entry& e = entries_[slot(t)];
  if (!e.used || e.kind != t.kind || e.redOp != t.redOp || e.dataType != t.dataType || e.count != t.count ||
      e.symmetric != (t.symStride4G != 0))
    return false;
  *choice = e.choice;
  return true;
}

void ChoiceCache::put(const Task& t, const CollChoice& choice) {
  entries_[slot(t)] = Entry{true, t.kind, t.redOp, t.dataType, t.count, t.symStride4G != 0, choice};
}

Status chooseCollective(const Task& t, const PlanShape& shape, CollChoice* choice) {
  if (shape.choices && shape.choices->find(t, choice)) return ncclSuccess;
  const dev::Func func = deviceFunc(t.kind);
  WEFT_ASSERT(func != dev::kFuncSendRecv);
  WEFT_ASSERT(shape.nChannels >= 1 && shape.tuning.nRanks == shape.nRanks);
  const int lo = std::clamp(shape.minCollChannels, 1, shape.nChannels);
  CollChoice c;
  if (shape.nRanks == 1) {
    // A local copy: no algorithm to choose; spread large copies so they run at memory speed.
    c.nChannels = std::max(lo, collectiveChannels(t.bytes(), shape));
    *choice = c;
    return ncclSuccess;
  }
  const graph::TuningConstants& k = shape.constants ? *shape.constants : graph::TuningConstants::defaults();
  const SupportFn supported = shape.isSupported ? shape.isSupported : &dev::isSupported;
  graph::TuningInput in = shape.tuning;
  in.maxChannels = std::clamp(in.maxChannels, 1, shape.nChannels);
  uint32_t pairs = 0;
  for (int a = 0; a < dev::kNumAlgos; ++a) {
    for (int p = 0; p < dev::kNumProtos; ++p) {
      if (supported(func, (dev::Algo)a, (dev::Proto)p, t.redOp, t.dataType)) pairs |= graph::pairBit(a, p);
    }
  }
  in.supported[func] &= pairs;
  // Direct needs a channel connecting every pair of ranks (see PlanShape::directChannels).
  in.meshChannels = shape.nRanks <= dev::kDirectMaxRanks ? (int)shape.directChannels.size() : 0;
  in.symmetric = t.symStride4G != 0;
  graph::TuningChoice tc;
  WEFT_TRY(graph::selectAlgoProto(in, k, func, modelBytes(t, shape.nRanks), &tc));
  c.algo = tc.algo;
  c.proto = tc.proto;
  c.timeUs = tc.timeUs;
  if (tc.algo == dev::kAlgoDirect && tc.proto == dev::kProtoLL) {
    const int mesh = (int)shape.directChannels.size();
    c.nChannels = std::clamp(tc.nChannels, std::min(lo, mesh), mesh);
    c.twoShot = tc.twoShot;
  } else {
    c.nChannels = std::clamp(tc.nChannels, lo, shape.nChannels);
  }
  if (shape.choices) shape.choices->put(t, c);
  *choice = c;
  return ncclSuccess;
}

Status estimateTasks(const std::vector<Task>& tasks, const PlanShape& shape, double* us) {
  double total = 0;
  for (const Task& t : tasks) {
    if (t.isP2p() || t.count == 0) continue;
    CollChoice c;
    WEFT_TRY(chooseCollective(t, shape, &c));
    total += c.timeUs;
  }
  *us = total;
  return ncclSuccess;
}

namespace {

// One rank: true when the i-th non-empty send (to self) and the i-th non-empty receive have equal
// sizes for every i. Anything else is left to planPointToPoint, which reports it.
bool selfPairsMatch(const std::vector<Task>& tasks) {
  std::vector<size_t> sends, recvs;
  for (const Task& t : tasks) {
    if (!t.isP2p() || t.count == 0) continue;
    (t.kind == TaskKind::kSend ? sends : recvs).push_back(t.bytes());
  }
  return sends == recvs;
}

}  // namespace

void takeLocalCopies(std::vector<Task>* tasks, int nRanks, std::vector<LocalCopy>* copies) {
  if (nRanks != 1) return;
  const bool pairs = selfPairsMatch(*tasks);
  std::vector<const void*> sources;  // the sends to self, in order, until their receives come
  std::vector<LocalCopy> selfCopies;
  size_t kept = 0, nextSend = 0;
  for (Task& t : *tasks) {
    if (t.isP2p() && pairs) {
      if (t.count > 0) {
        if (t.kind == TaskKind::kSend) sources.push_back(t.sendBuff);
        else selfCopies.push_back({t.recvBuff, nullptr, t.bytes()});
      }
      continue;
    }
    if (t.isP2p() || t.redOp == dev::kRedPreMulSum) {
      (*tasks)[kept++] = t;
      continue;
    }
    if (t.bytes() > 0 && t.sendBuff != t.recvBuff) copies->push_back({t.recvBuff, t.sendBuff, t.bytes()});
  }
  tasks->resize(kept);
  // Point-to-point work runs after the collectives (planTasks' order); the i-th receive gets the
  // i-th send's bytes.
  for (LocalCopy& c : selfCopies) {
    c.src = sources[nextSend++];
    if (c.src != c.dst) copies->push_back(c);
  }
}

Status planTasks(const std::vector<Task>& tasks, const PlanShape& shape, std::vector<PlannedLaunch>* launches) {
  WEFT_ASSERT(shape.nChannels >= 1 && shape.copyLanes >= 0 && shape.nChannels + shape.copyLanes <= dev::kMaxChannels);
  WEFT_ASSERT((int)shape.sendChannels.size() == shape.nRanks && (int)shape.recvChannels.size() == shape.nRanks);
  // Work per protocol segment: consecutive collectives of one protocol share a segment. Blocks
  // beyond the channels are copy lanes (self copies only).
  const int nBlocks = shape.nChannels + shape.copyLanes;
  // Segment i's lists are scratch slot i; the point-to-point lists come after the segments.
  struct Segment {
    int proto;
    size_t slot;
  };
  std::vector<Segment> segments;
  segments.reserve(4);
  auto segmentFor = [&](int proto) -> ChannelWorks& {
    if (segments.empty() || segments.back().proto != proto) {
      segments.push_back({proto, segments.size()});
      return freshLists(segments.back().slot, nBlocks);
    }
    return scratchPool()[segments.back().slot];
  };
  std::vector<const Task*> p2p;
  for (const Task& t : tasks) {
    if (t.isP2p()) {
      p2p.push_back(&t);
      continue;
    }
    if (t.count == 0) continue;
    CollChoice c;
    WEFT_TRY(chooseCollective(t, shape, &c));
    WEFT_INFO(log::kTuning, "%s: %zu Bytes -> Algo %d proto %d channel{Lo..Hi}={0..%d} (%s/%s%s, model %.1f us)",
              taskKindName(t.kind), modelBytes(t, shape.nRanks), c.algo, c.proto, c.nChannels - 1,
              graph::algoName(c.algo), graph::protoName(c.proto), c.twoShot ? " two-shot" : "", c.timeUs);
    planCollective(t, c, shape, &segmentFor(c.proto));
  }
  if (!p2p.empty()) {
    // Point-to-point items end the plan: LL ones, then Simple ones, each appended to the last
    // segment when it has their protocol, else in a segment of their own. They are planned into
    // slots past the two segments they may open (freshLists may move the pool: indices only).
    const size_t simpleSlot = segments.size() + 2, llSlot = simpleSlot + 1;
    freshLists(simpleSlot, nBlocks);
    freshLists(llSlot, nBlocks);
    WEFT_TRY(planPointToPoint(p2p, shape, &scratchPool()[simpleSlot], &scratchPool()[llSlot]));
    for (const auto& [proto, from] : {std::pair<int, size_t>{dev::kProtoLL, llSlot}, {dev::kProtoSimple, simpleSlot}}) {
      const ChannelWorks& items = scratchPool()[from];
      if (std::all_of(items.begin(), items.end(), [](const auto& list) { return list.empty(); })) continue;
      segmentFor(proto);  // its slot is below simpleSlot: the pool does not move
      ChannelWorks& lists = scratchPool()[segments.back().slot];
      for (int c = 0; c < nBlocks; ++c) lists[c].insert(lists[c].end(), items[c].begin(), items[c].end());
    }
  }
  launches->clear();
  for (const Segment& seg : segments) cutLaunches(seg.proto, scratchPool()[seg.slot], launches);
  return ncclSuccess;
}

const char* taskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kBroadcast: return "Broadcast";
    case TaskKind::kReduce: return "Reduce";
    case TaskKind::kAllGather: return "AllGather";
    case TaskKind::kReduceScatter: return "ReduceScatter";
    case TaskKind::kAllReduce: return "AllReduce";
    case TaskKind::kSend: return "Send";
    case TaskKind::kRecv: return "Recv";
  }
  return "?";
}

}  // namespace weft::enqueue
