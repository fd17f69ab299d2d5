// The status of this host's communicators as their ledger pages tell it (core/op_ledger.h), for
// weft-status: read from outside the ranks' processes at any time, e.g. while a job hangs, it names
// the ranks behind (fewer collectives issued, or fewer sends or receives posted to a host mate),
// their processes and the call the others wait in, and any call difference a rank found.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/op_ledger.h"

namespace weft::core {

// One rank's page, copied.
struct RankLedgerView {
  int rank = -1;
  int64_t pid = 0;
  bool alive = true;  // its process still exists (a killed rank leaves its page behind)
  uint64_t collectives = 0;
  bool haveLatest = false;  // `latest` holds collective number `collectives`
  CallSignature latest;
  // Per host index (the host's ranks of the communicator in rank order): sends posted to that rank
  // and receives posted from it.
  std::vector<int64_t> sends, receives;
  int replayChannels = 0;    // channels on which a graph replay's kernel of the rank runs
  double replaySeconds = 0;  // ... and for how long its watchdog has seen the same one
  LedgerMemory memory;      // what the rank's communicator holds (as its watchdog last published it)
  uint64_t findingSeq = 0;  // 0: the rank found no difference
  std::string finding;
};

struct CommLedgerView {
  uint64_t commHash = 0;
  uint64_t hostRanks = 0;              // as the pages say
  std::vector<RankLedgerView> ranks;   // the pages found, in rank order
};

// Parses "weft-<16 hex digits>-<rank>", the name of a ledger page in /dev/shm; false otherwise
// (other weft files live there too).
bool parseLedgerPageName(const std::string& name, uint64_t* commHash, int* rank);

// Every ledger page in /dev/shm (where shm_open puts them) that passes PeerLedger's checks, grouped
// by communicator (in the order of their hashes).
std::vector<CommLedgerView> scanLedgerPages();

// Removes the pages of ranks whose process has exited (a killed rank leaves its page behind); returns
// how many. Only for pages whose owner ran in this pid namespace: a live rank of another container
// sharing /dev/shm would look exited here.
int removeExitedPages(const CommLedgerView& comm);

// Pure: the lines that describe one communicator: its ranks, the ranks behind, ranks without the
// graph replay others wait in, point-to-point shortfalls between host mates, findings.
std::string describeCommStatus(const CommLedgerView& comm);

}  // namespace weft::core
