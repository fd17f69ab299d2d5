// Pieces the CUDA graph extras share (sweep_graphs.cc, sweep_graph_edges.cu): cases laid out in the
// ranks' areas, capture of a group of them into one graph per local rank, checked replays.
#pragma once

#include <string>
#include <vector>

#include "sweep_host.h"

namespace sweep {

// Cases laid out one after the other in the ranks' areas.
struct CaseSet {
  std::vector<Case> cases;
  std::vector<uint64_t> offsets;
  std::vector<std::vector<Placement>> places;  // [local rank][case]
};

CaseSet layOut(std::vector<RankCtx*>& L, std::vector<Case> cases);
// A float sum all-reduce of `count` elements.
Case allReduce(uint64_t count);
// Captures, on every local rank's stream, the cases `which` of `s` (issued by one groupCall) and
// instantiates the graphs. Empty on success, else what failed (the captures are ended either way).
std::string capture(std::vector<RankCtx*>& L, cudaStreamCaptureMode mode, const CaseSet& s,
                    const std::vector<size_t>& which, std::vector<cudaGraph_t>* graphs,
                    std::vector<cudaGraphExec_t>* execs);
// Instantiates every local rank's graph (its captures all ended). Empty on success, else
// "<what>: <CUDA error>".
std::string instantiateAll(std::vector<RankCtx*>& L, std::vector<cudaGraph_t>& graphs,
                           std::vector<cudaGraphExec_t>& execs, const char* what);
void destroyGraphs(std::vector<RankCtx*>& L, std::vector<cudaGraph_t>& graphs, std::vector<cudaGraphExec_t>& execs);
// Fresh inputs for case k (a run that did nothing, or ran on stale items, fails its check).
Case fresh(const CaseSet& s, size_t k, uint64_t seed);
std::string graphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
// Copies `slots` results of every rank (after its streams are done) and evaluates them against
// `caseOfSlot`. Empty when all passed.
std::string evaluateSlots(std::vector<RankCtx*>& L, const CaseSet& s, const std::vector<size_t>& caseOfSlot,
                          const char* context);

// sweep_graph_edges.cu: every collective replayed 1000 times, invalidated captures, calls inside
// conditional nodes' bodies.
void testGraphEdges(std::vector<RankCtx*>& L, const Options& o, bool threadedRanks);

// Rank l: poisons the outputs and writes the inputs of cases `which` on `stream`, runs `launch`
// there, then queues their checks into result slots firstSlot... Returns a CUDA error text or "".
template <typename Launch>
std::string runChecked(RankCtx& x, size_t l, const CaseSet& s, const std::vector<size_t>& which, uint64_t seed,
                       int firstSlot, cudaStream_t stream, Launch&& launch) {
  const int n = x.nranks;
  cudaSetDevice(x.dev);
  for (size_t k : which) {
    const Case c = fresh(s, k, seed + k);
    prepareCase(c, s.places[l][k], paramsFor(c, x.rank, n), stream, x.recvBase + s.offsets[k]);
  }
  const std::string failed = launch();
  int slot = firstSlot;
  for (size_t k : which) {
    const Case c = fresh(s, k, seed + k);
    checkCase(c, s.places[l][k], paramsFor(c, x.rank, n), x.dRes + slot++, stream, x.recvBase + s.offsets[k]);
  }
  return failed;
}

}  // namespace sweep
