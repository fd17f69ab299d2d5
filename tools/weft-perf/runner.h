// One process of a benchmark run: its threads, the GPUs each drives, their communicators, and
// the timed loop of every case. Only the public NCCL API and the CUDA runtime are used.
#pragma once

#include <functional>
#include <vector>

#include "nccl.h"
#include "options.h"
#include "report.h"

namespace weft::perf {

// Exit codes shared by all modes.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoGpu = 3;
constexpr int kExitTimeout = 124;

// Number of visible CUDA devices; prints "no CUDA GPU found" (when `report`) and returns 0 if none.
int visibleGpus(bool report);

// Runs every case on the ranks of process `processIndex` (ranks processIndex*R .. +R-1 where
// R = threads x GPUs) and hands each case's process-wide result to `sink`. `getId` supplies the
// unique id when communicators are made with ncclCommInitRank (it is not called for
// ncclCommInitAll). Returns an exit code.
int runProcess(const Options& opts, int processIndex, const std::vector<Case>& cases,
               const std::function<bool(ncclUniqueId*)>& getId, ResultSink* sink);

// ncclGetUniqueId, looked up at run time so weft-perf also builds against a libnccl that does
// not export it yet; prints the reason and returns false on failure.
bool getUniqueId(ncclUniqueId* id);

// Ends the process with kExitTimeout if it is still running after `seconds` (0: never).
void startWatchdog(int seconds, std::function<void()> onTimeout = nullptr);

}  // namespace weft::perf
