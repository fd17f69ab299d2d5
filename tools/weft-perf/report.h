// Results: what each process measures for a case, how results from several processes combine,
// and the nccl-tests-style table and JSON file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "options.h"

namespace weft::perf {

// Sums over the ranks of one process (or of all processes, once combined). Index 0 is
// out-of-place, 1 in-place. Plain data: it travels through a pipe from child processes.
struct PartialResult {
  double sumTimeUs[2] = {0, 0};
  double maxTimeUs[2] = {0, 0};
  int64_t wrong[2] = {0, 0};  // -1: not checked
  int32_t ran[2] = {0, 0};    // 0: this placement was not run (no in-place form)
  int32_t ranks = 0;
};

void combine(PartialResult* into, const PartialResult& from);

// Where finished cases go: the printer (single process, or the parent of several) or a pipe.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // False if the result could not be delivered (the reader went away).
  virtual bool submit(size_t caseIndex, const PartialResult& result) = 0;
};

struct LibraryInfo {
  std::string path;    // the libnccl that was really loaded
  int version = 0;     // its ncclGetVersion
};

class Printer : public ResultSink {
 public:
  Printer(const Options& opts, const std::vector<Case>& cases, LibraryInfo lib, FILE* out = stdout);
  void printHeader(const std::vector<std::string>& skipped);
  bool submit(size_t caseIndex, const PartialResult& result) override;
  // Prints the footer and writes the JSON file. Returns the process exit code: 0, or 1 when an
  // element was wrong or the JSON file could not be written.
  int finish();

 private:
  struct Row {
    size_t caseIndex;
    PartialResult result;
  };
  void printTableHeader(Coll coll);
  bool writeJson() const;

  const Options& opts_;
  const std::vector<Case>& cases_;
  LibraryInfo lib_;
  FILE* out_;
  std::vector<Row> rows_;
  bool haveColl_ = false;
  Coll lastColl_ = Coll::AllReduce;
};

// "12.34" style with the width nccl-tests uses, switching to fewer decimals for long times.
std::string formatTime(double us);

}  // namespace weft::perf
