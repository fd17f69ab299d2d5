// What each rank of a communicator has asked for, where the other ranks of its host can read it:
// a small shared-memory page per (communicator, rank), /dev/shm/weft-<commHash>-<rank>, holding the
// number of collectives the rank has issued on the communicator. When this rank's work stops
// making progress, the watchdog reads its peers' pages: a rank that has issued fewer collectives
// than this one has not made the call this rank waits in (skipped it, or is stuck before it).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::core {

class OpLedger {
 public:
  // This rank's page, made and mapped read-write; null (logged at INFO) where shared memory cannot
  // be made (a container without /dev/shm): the hang report then names no ranks.
  static std::unique_ptr<OpLedger> create(uint64_t commHash, int rank);
  ~OpLedger();  // unmaps and removes the page
  OpLedger(const OpLedger&) = delete;
  OpLedger& operator=(const OpLedger&) = delete;

  void noteCollective();
  uint64_t collectives() const;

  // Another rank's count, or -1 when its page cannot be read or is not that rank's (wrong magic,
  // communicator or rank: a stale or foreign file is never believed).
  static int64_t readPeer(uint64_t commHash, int rank);
  static std::string pageName(uint64_t commHash, int rank);

 private:
  struct Page;
  OpLedger(Page* page, std::string name) : page_(page), name_(std::move(name)) {}
  Page* page_;
  std::string name_;
};

// Pure: the sentence that names the ranks behind this one. `peers[r]` is rank r's count (-1:
// unknown); `self` is this rank. "" when no rank is behind.
std::string describeLaggards(int self, uint64_t mine, const std::vector<int64_t>& peers);

}  // namespace weft::core
