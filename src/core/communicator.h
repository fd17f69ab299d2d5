// The communicator: what ncclComm_t points to. It owns the per-rank state of one NCCL communicator
// (bootstrap, topology, channels, transports, the enqueue engine); sub-objects keep their own logic.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "nccl.h"

struct ncclComm {
  static constexpr uint64_t kMagic = 0x77656674436f6d6dULL;  // "weftComm"
  static constexpr uint64_t kDeadMagic = 0xdeaddeaddeaddeadULL;

  uint64_t magic = kMagic;
  int rank = -1;
  int nRanks = 0;
  int cudaDev = -1;

  // A cheap guard against garbage and destroyed handles passed to the API.
  bool looksValid() const { return magic == kMagic; }

  // The text of the last warning raised about this communicator (ncclGetLastError(comm)).
  const char* lastError() const { return lastError_; }
  void setLastError(const char* text);

 private:
  mutable std::mutex lastErrorMutex_;
  char lastError_[1024] = "";
};
