// Command line of weft-perf (nccl-tests' options where they exist) and the list of test cases it
// implies. Pure host code.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collective.h"

namespace weft::perf {

struct Options {
  std::vector<Coll> colls;                 // positional names or --op; default all_reduce
  size_t minBytes = 8;                      // -b
  size_t maxBytes = 128u << 20;             // -e
  size_t stepBytes = 0;                     // -i (used when the factor is 1)
  double stepFactor = 2.0;                  // -f
  int gpusPerThread = 1;                    // -g
  int threads = 1;                          // -t
  int processes = 1;                        // -p (forked by weft-perf itself)
  int iters = 20;                           // -n
  int warmup = 5;                           // -w
  int check = 1;                            // -c
  std::vector<ncclRedOp_t> ops = {ncclSum};         // -o (or "all")
  std::vector<ncclDataType_t> types = {ncclFloat};  // -d (or "all")
  int root = 0;                             // -r
  int graphLaunches = 0;                    // -G: capture the n iterations in a graph, replay it G times
  int localRegister = 0;  // -R 1: buffers from ncclMemAlloc, ncclCommRegister'ed; 2: ncclCommWindowRegister'ed
  bool initAll = true;                      // --init all|rank (all: ncclCommInitAll when possible)
  std::string jsonPath;                     // --json
  int timeoutSec = 0;                       // --timeout (0 = none)
  bool help = false;

  int ranksPerProcess() const { return threads * gpusPerThread; }
  int nranks() const { return processes * threads * gpusPerThread; }
  // ncclCommInitAll applies to one thread driving every rank of a single process.
  bool useInitAll() const { return initAll && processes == 1 && threads == 1; }
};

// Parses argv; on error returns false with a message in *error.
bool parseOptions(int argc, char** argv, Options* out, std::string* error);
void printUsage(const char* argv0);

// "32M" -> 33554432 (K, M, G, T are powers of 1024, as in nccl-tests); false when unreadable.
bool parseSize(const std::string& text, size_t* out);

struct Case {
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;   // ncclSum placeholder for collectives without a reduction
  int root;         // -1 for collectives without a root
  size_t size;      // requested size column
};

// Every case in run order: collective, then datatype, then operation, then size. Cases the
// library version cannot run are left out and named in *skipped.
std::vector<Case> enumerateCases(const Options& opts, int ncclVersion, std::vector<std::string>* skipped);

// The largest buffer (bytes) any case needs for one operand (both operands get this size, so
// the in-place forms fit in either).
size_t maxOperandBytes(const std::vector<Case>& cases, int nranks);

}  // namespace weft::perf
