// The file the watchdog writes when a communicator's work times out (NCCL_TIMEOUT): what this rank
// knows at that moment, for whoever looks after the job has gone. It holds the reason given in the
// warning, this rank's latest collectives, the channels a graph replay's kernel still ran on, the
// NCCL_* settings, and the host's view that weft-status prints (every rank's page: the ranks behind,
// unmatched sends and receives, call differences, exited processes).
//   NCCL_WEFT_HANG_DUMP_DIR   where it goes (default /tmp; "none" writes nothing). The name is
//                             weft-hang-<communicator hash>-r<rank>-p<pid>.txt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/op_ledger.h"

struct ncclComm;

namespace weft::core {

// What goes into the file, gathered apart from the formatting so that the formatting is testable.
struct HangFacts {
  std::string reason;  // the warning's text
  std::string when;    // local time, as date(1) prints it
  std::string hostName;
  int64_t pid = 0;
  int rank = -1, nRanks = 0, cudaDev = -1, nChannels = 0;
  std::string busId;
  uint64_t commHash = 0;
  uint64_t operations = 0;  // operations asked for (collectives, sends, receives)
  uint64_t collectives = 0;
  std::vector<std::pair<uint64_t, CallSignature>> recentCalls;  // (number, call), oldest first
  std::vector<int> replayChannels;  // the channels whose replay stamp was set
  std::vector<std::string> settings;  // "NCCL_X=value", sorted
  std::string hostStatus;             // describeCommStatus of this communicator's pages, or why none
};

// Pure: the file's text.
std::string formatHangDump(const HangFacts& facts);

// The path the dump of `facts` goes to under `dir`.
std::string hangDumpPath(const std::string& dir, const HangFacts& facts);

// Gathers what this rank knows (reads the host's ledger pages) and writes the file; returns its
// path, or "" when dumps are off or the file could not be written (logged at INFO).
std::string writeHangDump(ncclComm* comm, const std::string& reason);

}  // namespace weft::core
