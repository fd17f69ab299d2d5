#include "core/op_ledger.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/log.h"

namespace weft::core {

struct OpLedger::Page {
  static constexpr uint64_t kMagic = 0x7765667452616e6bULL;  // "weftRank"
  uint64_t magic;
  uint64_t commHash;
  int64_t rank;
  std::atomic<uint64_t> collectives;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the page is shared between processes");

std::string OpLedger::pageName(uint64_t commHash, int rank) {
  char name[64];
  snprintf(name, sizeof(name), "/weft-%016" PRIx64 "-%d", commHash, rank);
  return name;
}

std::unique_ptr<OpLedger> OpLedger::create(uint64_t commHash, int rank) {
  const std::string name = pageName(commHash, rank);
  shm_unlink(name.c_str());  // a page left by a process that died with the same id: start afresh
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    WEFT_INFO(log::kInit, "rank %d: no shared-memory page %s (%s); a hang report will not name other ranks", rank,
              name.c_str(), strerror(errno));
    return nullptr;
  }
  void* p = MAP_FAILED;
  if (ftruncate(fd, sizeof(Page)) == 0) p = mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    WEFT_INFO(log::kInit, "rank %d: could not map %s (%s); a hang report will not name other ranks", rank, name.c_str(),
              strerror(errno));
    shm_unlink(name.c_str());
    return nullptr;
  }
  Page* page = new (p) Page{Page::kMagic, commHash, rank, {0}};
  return std::unique_ptr<OpLedger>(new OpLedger(page, name));
}

OpLedger::~OpLedger() {
  munmap(page_, sizeof(Page));
  shm_unlink(name_.c_str());
}

// Only the owning rank writes its page (one thread at a time per communicator): no read-modify-write.
void OpLedger::noteCollective() {
  page_->collectives.store(page_->collectives.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

uint64_t OpLedger::collectives() const { return page_->collectives.load(std::memory_order_relaxed); }

int64_t OpLedger::readPeer(uint64_t commHash, int rank) {
  const int fd = shm_open(pageName(commHash, rank).c_str(), O_RDONLY, 0);
  if (fd < 0) return -1;
  struct stat st {};
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(Page)) {
    p = mmap(nullptr, sizeof(Page), PROT_READ, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (p == MAP_FAILED) return -1;
  const Page* page = static_cast<const Page*>(p);
  int64_t count = -1;
  if (page->magic == Page::kMagic && page->commHash == commHash && page->rank == rank) {
    count = (int64_t)page->collectives.load(std::memory_order_relaxed);
  }
  munmap(p, sizeof(Page));
  return count;
}

std::string describeLaggards(int self, uint64_t mine, const std::vector<int64_t>& peers) {
  std::string text;
  for (size_t r = 0; r < peers.size(); ++r) {
    if ((int)r == self || peers[r] < 0 || (uint64_t)peers[r] >= mine) continue;
    char part[160];
    snprintf(part, sizeof(part), "%srank %zu has issued %" PRId64 " collectives on this communicator against this rank's %" PRIu64,
             text.empty() ? "" : "; ", r, peers[r], mine);
    text += part;
  }
  if (!text.empty()) text += ": it has not made the call this rank waits in (skipped, or stuck before it)";
  return text;
}

}  // namespace weft::core
