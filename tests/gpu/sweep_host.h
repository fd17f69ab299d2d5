// Host side of the collective sweep: options, the case list, per-rank state, result tallies, the
// case runner, the extra tests and the three ways of driving GPUs (one thread for all GPUs, one thread
// per GPU, one process per GPU).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sweep_common.h"

namespace sweep {

// Every receive region has this many poisoned bytes before (plus the offset) and after it.
constexpr uint64_t kPad = 256;
constexpr uint64_t kGuard = 256;
// Guard mismatches after the region are reported with this added to their byte offset.
constexpr uint64_t kTailGuardTag = 1ull << 62;

uint64_t inCountOf(int coll, uint64_t count, int nranks);   // elements read from sendbuff
uint64_t outCountOf(int coll, uint64_t count, int nranks);  // elements written to recvbuff

struct Options {
  bool quick = false;
  bool sweep = true;
  bool extras = true;
  std::vector<std::string> extraGroups;  // --extras: only these groups of extras (empty = all)
  bool selfTest = true;
  bool ncclMemAlloc = false;      // allocate the sweep's buffers with ncclMemAlloc instead of cudaMalloc
  std::vector<int> colls, types, ops;  // empty = all (or the quick subset)
  std::vector<uint64_t> counts;        // empty = the standard list
  uint64_t largeBytes = 64ull << 20;   // the "large" count is this many bytes of data
  int timeoutSec = 120;           // no progress for this long: print where each rank is, exit 3
  int maxPrint = 10;              // failing cases printed in detail per rank
  uint64_t seed = 0x5eed;
  bool fp8 = true;                // decided from the devices (sm_90+)
  double abortLimitSec = 10;      // ncclCommAbort must return within this
  int devices = 1;                // visible GPUs: rank r runs on GPU r % devices (more ranks than GPUs
                                  // only with NCCL_WEFT_ALLOW_GPU_SHARING=1, a test-only setting)
};

struct Case {
  int coll = kAllReduce;
  int type = ncclFloat;
  int op = kNoOp;
  uint64_t count = 0;
  int root = 0;
  int inplace = 0;
  int sendOff = 0;  // bytes added to the 256-byte-aligned buffer start (unaligned pointers)
  int recvOff = 0;
  uint64_t seed = 0;
};

std::vector<Case> buildCases(const Options& o, int nranks);
std::string describe(const Case& c);
// Bytes of buffer a case needs (send and recv areas each), guards included.
uint64_t areaBytesFor(const Case& c, int nranks);

// Results of one rank (or, after merging, of all ranks).
struct Tally {
  struct Line {
    std::string coll, type, op;
    uint64_t cases = 0;   // cases run (per rank)
    uint64_t failed = 0;  // failed (rank, case) pairs
  };
  struct Extra {
    std::string name;
    int pass = 0;  // 1 pass, 0 fail, -1 skipped
    std::string detail;
  };
  std::vector<Line> lines;
  std::map<std::string, size_t> index;
  std::vector<Extra> extras;
  uint64_t casesFailed = 0;
  int ranksMerged = 0;

  void addCase(const Case& c, bool failed);
  void addExtra(const std::string& name, int pass, const std::string& detail);
  void merge(const Tally& other);
  std::string serialize() const;
  bool parse(const std::string& text);
  bool allPassed() const;
};

// One GPU rank as seen by the thread that drives it.
struct RankCtx {
  int rank = 0;
  int nranks = 1;
  int dev = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  char* sendBase = nullptr;  // each `areaBytes` long
  char* recvBase = nullptr;
  uint64_t areaBytes = 0;
  bool memAllocated = false;  // buffers came from ncclMemAlloc
  CheckResult* dRes = nullptr;  // result slots, device
  CheckResult* hRes = nullptr;  // pinned host copy
  int resSlots = 0;
  void* dScalars = nullptr;  // one 8-byte slot per datatype: the PreMulSum scalar
  unsigned char hScalars[kNumTypes][8] = {};
  Tally tally;
  int printed = 0;
  int maxPrint = 10;
  bool fatal = false;  // a CUDA error: stop using this rank
};

// Hands every rank the same fresh ncclUniqueId (rank 0 makes it). One implementation per mode.
class IdChannel {
 public:
  virtual ~IdChannel() = default;
  // Rank 0 (or the only thread) creates the id; the others receive it. False on failure.
  virtual bool share(int rank, ncclUniqueId* id) = 0;
};

// --- sweep_rank.cc
bool setupRank(RankCtx& x, const Options& o, uint64_t areaBytes);
void teardownRank(RankCtx& x);
// Runs all cases on the local ranks (one thread). Ranks of other threads/processes run the same list.
// batchCases: cases issued between two host synchronisations (at most kSweepBatchCases).
constexpr size_t kSweepBatchCases = 384;
void runSweep(std::vector<RankCtx*>& locals, const std::vector<Case>& cases, const Options& o, size_t batchCases);
// Checker self-test: a deliberately wrong element, guard byte and input element must all be caught.
void runSelfTest(std::vector<RankCtx*>& locals, const Options& o);

// Where a case's buffers are inside a send area and a receive area.
struct Placement {
  char* send = nullptr;
  char* recv = nullptr;
  char* region = nullptr;       // start of the receive-side region (recv, or the in-place buffer)
  uint64_t inCount = 0;         // input elements at `send`
  uint64_t outCount = 0;        // output elements at `recv`
  uint64_t regionBytes = 0;     // bytes of the region
  uint64_t frontBytes = 0;      // guard bytes before `region`
  bool fillInput = false;       // this rank's input matters
  bool checkInput = false;      // out-of-place: the input must come back unchanged
};
Placement place(const Case& c, int rank, int nranks, char* sendArea, char* recvArea);
CaseParams paramsFor(const Case& c, int rank, int nranks);
// Poisons the receive region and its guards, writes the input.
cudaError_t prepareCase(const Case& c, const Placement& pl, const CaseParams& p, cudaStream_t s, char* recvArea);
ncclResult_t issueCase(const Case& c, const Placement& pl, ncclRedOp_t op, int rank, int nranks, ncclComm_t comm,
                       cudaStream_t s);
cudaError_t checkCase(const Case& c, const Placement& pl, const CaseParams& p, CheckResult* slot, cudaStream_t s,
                      char* recvArea);
// ncclRedOp_t for a sweep op; creates a PreMulSum op (then *created = true; destroy it after the group).
ncclResult_t makeOp(const Case& c, RankCtx& x, ncclComm_t comm, ncclRedOp_t* op, bool* created);
// True when the slot shows no error; otherwise prints the first mismatches (bounded per rank).
bool evaluate(RankCtx& x, const Case& c, const CheckResult& r, const char* context);

// Runs f(x) for every local rank (device set first) inside ncclGroupStart/End when there are several
// (one thread driving several GPUs must group). Returns the first error of f, else the group's result.
template <typename F>
ncclResult_t groupCall(std::vector<RankCtx*>& locals, F&& f) {
  const bool grouped = locals.size() > 1;
  if (grouped) {
    const ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
  }
  ncclResult_t first = ncclSuccess;
  for (RankCtx* x : locals) {
    cudaSetDevice(x->dev);
    const ncclResult_t r = f(*x);
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  }
  if (grouped) {
    const ncclResult_t r = ncclGroupEnd();
    if (first == ncclSuccess) first = r;
  }
  return first;
}

// One participant of a single checked case outside the sweep (extras): any communicator, any areas.
struct Member {
  RankCtx* x = nullptr;
  ncclComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  char* sendArea = nullptr;
  char* recvArea = nullptr;
};
// Runs and checks one case on the members driven by this thread (grouped when several). With
// `nonblocking`, calls may answer ncclInProgress and are then polled with ncclCommGetAsyncError.
// True when every member passed; otherwise *why says what went wrong (details are printed).
bool runCaseOn(std::vector<Member>& members, const Case& c, bool nonblocking, std::string* why);
std::vector<Member> membersOf(std::vector<RankCtx*>& locals, uint64_t areaOffset = 0);
// Polls ncclCommGetAsyncError until the communicator leaves ncclInProgress; returns its final state.
ncclResult_t waitComm(ncclComm_t comm, double timeoutSec);
// Records the same extra on every local rank.
void addExtraAll(std::vector<RankCtx*>& locals, const std::string& name, int pass, const std::string& detail);

// --- sweep_lifecycle.cc
void testSplit(std::vector<RankCtx*>& locals);
void testShrink(std::vector<RankCtx*>& locals);  // called by testSplit
void testNonBlockingInit(std::vector<RankCtx*>& locals, IdChannel& ids);
void testAbort(std::vector<RankCtx*>& locals, const Options& o);
void testArgumentChecks(std::vector<RankCtx*>& locals);
// Grouped ncclCommFinalize, then ncclCommDestroy of each (the order NCCL documents for one thread
// owning several communicators). Nonblocking communicators are polled. Returns the first error.
ncclResult_t finalizeAndDestroy(std::vector<RankCtx*>& locals, std::vector<ncclComm_t>& comms, std::string* why);

// --- sweep_extras.cc
// The groups of extras, in the order they run (--extras picks some).
extern const char* const kExtraGroups[];
extern const int kNumExtraGroups;
void runExtras(std::vector<RankCtx*>& locals, const Options& o, IdChannel& ids, bool threadedRanks);
uint64_t roundUp(uint64_t v, uint64_t a);
// Waits for the rank's stream and copies its first `slots` results to hRes; false (and *why) on a CUDA error.
bool syncAndCopy(RankCtx& x, int slots, std::string* why);

// --- sweep_graphs.cc
// CUDA graphs: capture and replay, replays mixed with calls outside graphs, graphs made and
// destroyed beside a live one. Threaded ranks (one thread per GPU) skip global-mode capture.
void testGraphs(std::vector<RankCtx*>& locals, const Options& o, bool threadedRanks);
// ncclCommFinalize (grouped) then ncclCommDestroy of every local main communicator; records an extra.
void finalizeAndDestroyMain(std::vector<RankCtx*>& locals);

// --- sweep_watch.cc: a watchdog so that a hang becomes a message and a non-zero exit.
void watchStart(int timeoutSec);
void watchNote(int rank, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
double nowSec();

// --- sweep_modes.cc
// Each returns the merged tally of all ranks (ranksMerged == ngpus when everything ran).
Tally runOneThreadAllGpus(const Options& o, int ngpus, bool initAll);
Tally runThreadPerGpu(const Options& o, int ngpus);
Tally runProcessPerGpu(const Options& o, int ngpus);
// Facts about the machine and the library, probed in a child process so that the parent stays free of
// CUDA (and of the library's initialisation) before it forks the ranks.
struct Probe {
  int deviceCount = 0;
  std::vector<int> majors;  // compute capability major per device
  int ncclVersion = 0;
  std::string libraryPath;  // the file that ncclGetVersion came from
};
bool probeMachine(Probe* out);
// Runs rank bodies on communicators that exist: setup, self-test, sweep, extras, finalize/destroy.
void runRanks(std::vector<RankCtx*>& locals, const Options& o, IdChannel& ids, bool threadedRanks);

}  // namespace sweep
