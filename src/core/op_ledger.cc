#include "core/op_ledger.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/log.h"

namespace weft::core {

// One call's arguments, written as a sequence lock: `seq` is 0 while the words change, then the
// call's number; a reader that finds the same number before and after copying has a whole record.
struct CallSlot {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> shape;  // call | dataType << 8 | redOp << 16 | (uint32_t)root << 32
};

// One send or receive, as a CallSlot.
struct P2pSlot {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> dataType;
};

// The sends to (or receives from) one rank of the host.
struct alignas(64) P2pLane {
  std::atomic<uint64_t> ops;
  P2pSlot recent[OpLedger::kRecentP2p];
};

struct LedgerPage {
  static constexpr uint64_t kMagic = 0x7765667443616c6cULL;  // "weftCall"
  static constexpr size_t kFindingBytes = 768;
  uint64_t magic;
  uint64_t commHash;
  int64_t rank;
  uint64_t hostRanks;  // P2pLanes after the page: [hostRanks][2] (P2pDirection)
  std::atomic<uint64_t> collectives;
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
  __atomic_store_n(&page->magic, LedgerPage::kMagic, __ATOMIC_RELEASE);
  return std::unique_ptr<OpLedger>(new OpLedger(page, bytes, name));
}

OpLedger::~OpLedger() {
  munmap(page_, bytes_);
  shm_unlink(name_.c_str());
}

// Only the owning rank writes its page (one thread at a time per communicator): plain stores.
uint64_t OpLedger::publish(const CallSignature& call) {
  const uint64_t seq = page_->collectives.load(std::memory_order_relaxed) + 1;
  CallSlot& slot = page_->recent[seq % kRecentCalls];
  slot.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.count.store(call.count, std::memory_order_relaxed);
  slot.shape.store(packShape(call), std::memory_order_relaxed);
  slot.seq.store(seq, std::memory_order_release);
  page_->collectives.store(seq, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return seq;
}

uint64_t OpLedger::collectives() const { return page_->collectives.load(std::memory_order_relaxed); }

uint64_t OpLedger::publishP2p(int hostPeer, P2pDirection dir, const P2pSignature& op) {
  if (hostPeer < 0 || (uint64_t)hostPeer >= page_->hostRanks) return 0;
  P2pLane& lane = lanes(page_)[hostPeer * 2 + (int)dir];
  const uint64_t seq = lane.ops.load(std::memory_order_relaxed) + 1;
  P2pSlot& slot = lane.recent[seq % kRecentP2p];
  slot.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.count.store(op.count, std::memory_order_relaxed);
  slot.dataType.store(op.dataType, std::memory_order_relaxed);
  slot.seq.store(seq, std::memory_order_release);
  lane.ops.store(seq, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return seq;
}

uint64_t OpLedger::p2pOps(int hostPeer, P2pDirection dir) const {
  if (hostPeer < 0 || (uint64_t)hostPeer >= page_->hostRanks) return 0;
  return lanes(page_)[hostPeer * 2 + (int)dir].ops.load(std::memory_order_relaxed);
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
  // The lanes the header promises must all be there (a bounded count first: the product must not wrap).
  if (!pageIsRanks(page, commHash, rank) || page->hostRanks > (1u << 20) || bytes < pageBytes(page->hostRanks)) {
    munmap(p, bytes);
    return nullptr;
  }
  return std::unique_ptr<PeerLedger>(new PeerLedger(page, bytes));
}

PeerLedger::~PeerLedger() { munmap(const_cast<LedgerPage*>(page_), bytes_); }

uint64_t PeerLedger::collectives() const { return page_->collectives.load(std::memory_order_relaxed); }

bool PeerLedger::recent(uint64_t seq, CallSignature* out) const {
  if (seq == 0) return false;
  const CallSlot& slot = page_->recent[seq % OpLedger::kRecentCalls];
  if (slot.seq.load(std::memory_order_acquire) != seq) return false;
  const uint64_t count = slot.count.load(std::memory_order_relaxed);
  const uint64_t shape = slot.shape.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.seq.load(std::memory_order_relaxed) != seq) return false;  // rewritten while copied
  *out = unpack(shape, count);
  return true;
}

bool PeerLedger::recentP2p(int hostPeer, P2pDirection dir, uint64_t seq, P2pSignature* out) const {
  if (seq == 0 || hostPeer < 0 || (uint64_t)hostPeer >= page_->hostRanks) return false;
  const P2pSlot& slot = lanes(page_)[hostPeer * 2 + (int)dir].recent[seq % OpLedger::kRecentP2p];
  if (slot.seq.load(std::memory_order_acquire) != seq) return false;
  P2pSignature op;
  op.count = slot.count.load(std::memory_order_relaxed);
  op.dataType = (uint8_t)slot.dataType.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.seq.load(std::memory_order_relaxed) != seq) return false;
  *out = op;
  return true;
}

int64_t PeerLedger::p2pOps(int hostPeer, P2pDirection dir) const {
  if (hostPeer < 0 || (uint64_t)hostPeer >= page_->hostRanks) return -1;
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
