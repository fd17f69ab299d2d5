// The built-in launcher (-p N): forks N processes before anything touches the GPU, hands them the
// unique id through pipes (process 0 makes it), and gathers their results through pipes so the
// parent prints one table. No MPI.
#pragma once

#include <vector>

#include "options.h"
#include "report.h"

namespace weft::perf {

// Returns the exit code: 0 when every process finished cleanly.
int runProcesses(const Options& opts, const std::vector<Case>& cases, ResultSink* printer);

}  // namespace weft::perf
