#include "core/op_ledger.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/log.h"

namespace weft::core {

// One call's arguments, written as a sequence lock: `seq` is 0 while the words change, then the
// call's number; a reader that finds the same number before and after copying has a whole record.
// `shape`: for a collective call | dataType << 8 | redOp << 16 | (uint32_t)root << 32; for a send
// or receive its dataType.
struct CallSlot {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> shape;
};

// The sends to (or receives from) one rank of the host.
struct alignas(64) P2pLane {
  std::atomic<uint64_t> ops;
  CallSlot recent[OpLedger::kRecentP2p];
};

struct LedgerPage {
  static constexpr uint64_t kMagic = 0x7765667443616c34ULL;  // "weftCal4" (2: the pid, 3: replays, 4: memory)
  static constexpr size_t kFindingBytes = 768;
  uint64_t magic;
  uint64_t commHash;
  int64_t rank;
  uint64_t hostRanks;  // P2pLanes after the page: [hostRanks][2] (P2pDirection)
  int64_t pid;         // the owning process (weft-status names it)
  std::atomic<uint64_t> collectives;
  // Graph replays as the owner's watchdog last saw them (OpLedger::publishReplays).
  std::atomic<int64_t> replayChannels;
  std::atomic<int64_t> replaySinceMs;
  // The memory the communicator holds here (OpLedger::publishMemory), bytes per LedgerMemory field.
  std::atomic<int64_t> memoryBytes[3];
  // The first difference this rank found: the text is written before findingSeq, and never again.
  alignas(128) std::atomic<uint64_t> findingSeq;
  char finding[kFindingBytes];
  alignas(128) CallSlot recent[OpLedger::kRecentCalls];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the page is shared between processes");

namespace {

// The page and its lanes, as mapped.
size_t pageBytes(uint64_t hostRanks) { return sizeof(LedgerPage) + hostRanks * 2 * sizeof(P2pLane); }

P2pLane* lanes(LedgerPage* page) { return reinterpret_cast<P2pLane*>(page + 1); }
const P2pLane* lanes(const LedgerPage* page) { return reinterpret_cast<const P2pLane*>(page + 1); }

// Records call `seq` in its slot of a ring of `slots`, then its number in `counter`. Ends with a
// full fence: what this rank reads next is read after the record became visible (call_check.h).
uint64_t writeNext(std::atomic<uint64_t>& counter, CallSlot* slots, uint64_t nSlots, uint64_t count, uint64_t shape) {
  const uint64_t seq = counter.load(std::memory_order_relaxed) + 1;  // one writer: plain stores
  CallSlot& slot = slots[seq % nSlots];
  slot.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.count.store(count, std::memory_order_relaxed);
  slot.shape.store(shape, std::memory_order_relaxed);
  slot.seq.store(seq, std::memory_order_release);
  counter.store(seq, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return seq;
}

// Takes back the records after number `keep`: their slots read as empty, the counter goes back.
void unwindTo(std::atomic<uint64_t>& counter, CallSlot* slots, uint64_t nSlots, uint64_t keep) {
  const uint64_t last = counter.load(std::memory_order_relaxed);
  if (last <= keep) return;
  for (uint64_t seq = std::max(keep + 1, last >= nSlots ? last - nSlots + 1 : 1); seq <= last; ++seq) {
    slots[seq % nSlots].seq.store(0, std::memory_order_relaxed);
  }
  counter.store(keep, std::memory_order_relaxed);
}

// Copies call `seq` out of its slot; false when the slot holds another call or changed meanwhile.
bool readSlot(const CallSlot* slots, uint64_t nSlots, uint64_t seq, uint64_t* count, uint64_t* shape) {
  if (seq == 0) return false;
  const CallSlot& slot = slots[seq % nSlots];
  if (slot.seq.load(std::memory_order_acquire) != seq) return false;
  *count = slot.count.load(std::memory_order_relaxed);
  *shape = slot.shape.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return slot.seq.load(std::memory_order_relaxed) == seq;  // not rewritten while copied
}

uint64_t packShape(const CallSignature& c) {
  return (uint64_t)c.call | (uint64_t)c.dataType << 8 | (uint64_t)c.redOp << 16 | (uint64_t)(uint32_t)c.root << 32;
}

CallSignature unpack(uint64_t shape, uint64_t count) {
  CallSignature c;
  c.call = (uint8_t)shape;
  c.dataType = (uint8_t)(shape >> 8);
  c.redOp = (uint8_t)(shape >> 16);
  c.root = (int32_t)(uint32_t)(shape >> 32);
  c.count = count;
  return c;
}

bool pageIsRanks(const LedgerPage* page, uint64_t commHash, int rank) {
  return __atomic_load_n(&page->magic, __ATOMIC_ACQUIRE) == LedgerPage::kMagic && page->commHash == commHash &&
         page->rank == rank;
}

}  // namespace

std::string OpLedger::pageName(uint64_t commHash, int rank) {
  char name[64];
  snprintf(name, sizeof(name), "/weft-%016" PRIx64 "-%d", commHash, rank);
  return name;
}

std::unique_ptr<OpLedger> OpLedger::create(uint64_t commHash, int rank, int hostRanks) {
  const std::string name = pageName(commHash, rank);
  shm_unlink(name.c_str());  // a page left by a process that died with the same id: start afresh
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    WEFT_INFO(log::kInit, "rank %d: no shared-memory page %s (%s); a hang report will not name other ranks, and "
              "this rank's calls are not compared with theirs", rank, name.c_str(), strerror(errno));
    return nullptr;
  }
  const size_t bytes = pageBytes(hostRanks < 0 ? 0 : (uint64_t)hostRanks);
  void* p = MAP_FAILED;
  if (ftruncate(fd, bytes) == 0) p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    WEFT_INFO(log::kInit, "rank %d: could not map %s (%s); a hang report will not name other ranks, and this "
              "rank's calls are not compared with theirs", rank, name.c_str(), strerror(errno));
    shm_unlink(name.c_str());
    return nullptr;
  }
  // The file is zero-filled: every slot and the finding start empty. The header goes last, so a
  // peer that maps the page early does not believe it before it is whole.
  LedgerPage* page = static_cast<LedgerPage*>(p);
  page->commHash = commHash;
  page->rank = rank;
  page->hostRanks = hostRanks < 0 ? 0 : (uint64_t)hostRanks;
  page->pid = getpid();
  __atomic_store_n(&page->magic, LedgerPage::kMagic, __ATOMIC_RELEASE);
  return std::unique_ptr<OpLedger>(new OpLedger(page, bytes, name));
}

OpLedger::~OpLedger() {
  munmap(page_, bytes_);
  shm_unlink(name_.c_str());
}

// Only the owning rank writes its page (one thread at a time per communicator).
uint64_t OpLedger::publish(const CallSignature& call) {
  return writeNext(page_->collectives, page_->recent, kRecentCalls, call.count, packShape(call));
}

uint64_t OpLedger::collectives() const { return page_->collectives.load(std::memory_order_relaxed); }

uint64_t OpLedger::publishP2p(int hostPeer, P2pDirection dir, const P2pSignature& op) {
  if (hostPeer < 0 || (uint64_t)hostPeer >= page_->hostRanks) return 0;
  P2pLane& lane = lanes(page_)[hostPeer * 2 + (int)dir];
  return writeNext(lane.ops, lane.recent, kRecentP2p, op.count, op.dataType);
}

uint64_t OpLedger::p2pOps(int hostPeer, P2pDirection dir) const {
  if (hostPeer < 0 || (uint64_t)hostPeer >= page_->hostRanks) return 0;
  return lanes(page_)[hostPeer * 2 + (int)dir].ops.load(std::memory_order_relaxed);
}

OpLedger::Mark OpLedger::mark() const {
  Mark m;
  mark(&m);
  return m;
}

void OpLedger::mark(Mark* out) const {
  out->collectives = collectives();
  out->p2pOps.resize(page_->hostRanks * 2);
  for (size_t i = 0; i < out->p2pOps.size(); ++i)
    out->p2pOps[i] = lanes(page_)[i].ops.load(std::memory_order_relaxed);
}

void OpLedger::retract(const Mark& mark) {
  unwindTo(page_->collectives, page_->recent, kRecentCalls, mark.collectives);
  for (size_t i = 0; i < mark.p2pOps.size() && i < page_->hostRanks * 2; ++i) {
    P2pLane& lane = lanes(page_)[i];
    unwindTo(lane.ops, lane.recent, kRecentP2p, mark.p2pOps[i]);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void OpLedger::publishReplays(int channels, int64_t sinceMs) {
  page_->replaySinceMs.store(sinceMs, std::memory_order_relaxed);
  page_->replayChannels.store(channels, std::memory_order_release);
}

void OpLedger::publishMemory(const LedgerMemory& m) {
  page_->memoryBytes[0].store(m.gpu, std::memory_order_relaxed);
  page_->memoryBytes[1].store(m.pinnedHost, std::memory_order_relaxed);
  page_->memoryBytes[2].store(m.sharedHost, std::memory_order_relaxed);
}

void OpLedger::postFinding(uint64_t seq, const std::string& text) {
  if (seq == 0 || page_->findingSeq.load(std::memory_order_relaxed) != 0) return;
  snprintf(page_->finding, sizeof(page_->finding), "%s", text.c_str());
  page_->findingSeq.store(seq, std::memory_order_release);
}

std::unique_ptr<PeerLedger> PeerLedger::open(uint64_t commHash, int rank) {
  const int fd = shm_open(OpLedger::pageName(commHash, rank).c_str(), O_RDONLY, 0);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* p = MAP_FAILED;
  size_t bytes = 0;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(LedgerPage)) {
    bytes = (size_t)st.st_size;
    p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  const LedgerPage* page = static_cast<const LedgerPage*>(p);
  // The lanes the header promises must all be there (a bounded count first: the product must not
  // wrap). Read once: the page is shared, and every later bound uses this value.
  const uint64_t hostRanks = *const_cast<const volatile uint64_t*>(&page->hostRanks);
  if (!pageIsRanks(page, commHash, rank) || hostRanks > (1u << 20) || bytes < pageBytes(hostRanks)) {
    munmap(p, bytes);
    return nullptr;
  }
  return std::unique_ptr<PeerLedger>(new PeerLedger(page, bytes, hostRanks));
}

PeerLedger::~PeerLedger() { munmap(const_cast<LedgerPage*>(page_), bytes_); }

uint64_t PeerLedger::collectives() const { return page_->collectives.load(std::memory_order_relaxed); }

int64_t PeerLedger::pid() const { return page_->pid; }

int PeerLedger::replayChannels(int64_t* sinceMs) const {
  const int64_t channels = page_->replayChannels.load(std::memory_order_acquire);
  if (sinceMs != nullptr) *sinceMs = page_->replaySinceMs.load(std::memory_order_relaxed);
  return (int)std::clamp<int64_t>(channels, 0, 1 << 16);  // the page is another process's: bound it
}

LedgerMemory PeerLedger::memory() const {
  auto read = [this](int i) { return std::max<int64_t>(0, page_->memoryBytes[i].load(std::memory_order_relaxed)); };
  return LedgerMemory{read(0), read(1), read(2)};
}

bool PeerLedger::recent(uint64_t seq, CallSignature* out) const {
  uint64_t count = 0, shape = 0;
  if (!readSlot(page_->recent, OpLedger::kRecentCalls, seq, &count, &shape)) return false;
  *out = unpack(shape, count);
  return true;
}

bool PeerLedger::recentP2p(int hostPeer, P2pDirection dir, uint64_t seq, P2pSignature* out) const {
  if (hostPeer < 0 || (uint64_t)hostPeer >= hostRanks_) return false;
  uint64_t count = 0, shape = 0;
  if (!readSlot(lanes(page_)[hostPeer * 2 + (int)dir].recent, OpLedger::kRecentP2p, seq, &count, &shape)) return false;
  out->count = count;
  out->dataType = (uint8_t)shape;
  return true;
}

int64_t PeerLedger::p2pOps(int hostPeer, P2pDirection dir) const {
  if (hostPeer < 0 || (uint64_t)hostPeer >= hostRanks_) return -1;
  return (int64_t)lanes(page_)[hostPeer * 2 + (int)dir].ops.load(std::memory_order_relaxed);
}

bool PeerLedger::finding(uint64_t* seq, std::string* text) const {
  const uint64_t s = page_->findingSeq.load(std::memory_order_acquire);
  if (s == 0) return false;
  *seq = s;
  text->assign(page_->finding, strnlen(page_->finding, sizeof(page_->finding)));
  return true;
}

int64_t OpLedger::readPeer(uint64_t commHash, int rank) {
  const auto peer = PeerLedger::open(commHash, rank);
  return peer ? (int64_t)peer->collectives() : -1;
}

std::string describeLaggards(int self, uint64_t mine, const std::vector<int64_t>& peers) {
  std::string text;
  for (size_t r = 0; r < peers.size(); ++r) {
    if ((int)r == self || peers[r] < 0 || (uint64_t)peers[r] >= mine) continue;
    char part[160];
    snprintf(part, sizeof(part),
             "%srank %zu has issued %" PRId64 " collectives on this communicator against this rank's %" PRIu64,
             text.empty() ? "" : "; ", r, peers[r], mine);
    text += part;
  }
  if (!text.empty()) text += ": it has not made the call this rank waits in (skipped, or stuck before it)";
  return text;
}

std::string rankListText(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

std::string describeReplayLaggards(const std::vector<int>& idlePeers) {
  if (idlePeers.empty()) return "";
  return rankListText(idlePeers) + (idlePeers.size() == 1 ? " runs" : " run") + " no kernel of a graph replay on this communicator while this rank's waits: the replay was not "
                "launched there (skipped, or stuck before it)";
}

std::string describeP2pLaggards(const std::vector<P2pTally>& tallies) {
  std::string text;
  auto add = [&text](int peer, int64_t theirs, const char* what, int64_t mine, const char* mineWhat) {
    char part[192];
    snprintf(part, sizeof(part), "%srank %d has posted %" PRId64 " %s this rank against this rank's %" PRId64 " %s it",
             text.empty() ? "" : "; ", peer, theirs, what, mine, mineWhat);
    text += part;
  };
  for (const P2pTally& t : tallies) {
    if (t.peerSentHere >= 0 && t.peerSentHere < t.receivedFromPeer) {
      add(t.peer, t.peerSentHere, "sends to", t.receivedFromPeer, "receives from");
    }
    if (t.peerReceivedHere >= 0 && t.peerReceivedHere < t.sentToPeer) {
      add(t.peer, t.peerReceivedHere, "receives from", t.sentToPeer, "sends to");
    }
  }
  if (!text.empty()) text += " (zero-byte ones not counted): a send or receive this rank waits for is missing";
  return text;
}

}  // namespace weft::core
