// Tests beyond the case sweep, CUDA graphs: capture and 100 replays; replays mixed with launches
// outside graphs on another stream (NCCL_GRAPH_MIXING_SUPPORT); calls captured on forked streams;
// graphs made and destroyed over and over beside one kept alive (the graph work pool reuses memory).
#include <cstdlib>
#include <string>
#include <vector>

#include "sweep_graph_util.h"

namespace sweep {

CaseSet layOut(std::vector<RankCtx*>& L, std::vector<Case> cases) {
  CaseSet s;
  const int n = L[0]->nranks;
  uint64_t offset = 0;
  for (Case& c : cases) {
    s.offsets.push_back(offset);
    offset += roundUp(areaBytesFor(c, n), 256);
  }
  s.cases = std::move(cases);
  s.places.assign(L.size(), std::vector<Placement>(s.cases.size()));
  for (size_t l = 0; l < L.size(); ++l)
    for (size_t k = 0; k < s.cases.size(); ++k)
      s.places[l][k] = place(s.cases[k], L[l]->rank, n, L[l]->sendBase + s.offsets[k], L[l]->recvBase + s.offsets[k]);
  return s;
}

Case allReduce(uint64_t count) {
  Case c;
  c.coll = kAllReduce;
  c.op = kSum;
  c.type = ncclFloat;
  c.count = count;
  return c;
}

std::string capture(std::vector<RankCtx*>& L, cudaStreamCaptureMode mode, const CaseSet& s,
                    const std::vector<size_t>& which, std::vector<cudaGraph_t>* graphs,
                    std::vector<cudaGraphExec_t>* execs) {
  std::string why;
  const int n = L[0]->nranks;
  graphs->assign(L.size(), nullptr);
  execs->assign(L.size(), nullptr);
  for (RankCtx* x : L) {
    cudaSetDevice(x->dev);
    const cudaError_t e = cudaStreamBeginCapture(x->stream, mode);
    if (e != cudaSuccess) why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(e);
  }
  if (why.empty()) {
    size_t l = 0;
    const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
      ncclResult_t first = ncclSuccess;
      for (size_t k : which) {
        const ncclResult_t rk = issueCase(s.cases[k], s.places[l][k], ncclSum, x.rank, n, x.comm, x.stream);
        if (first == ncclSuccess) first = rk;
      }
      ++l;
      return first;
    });
    if (r != ncclSuccess) why = std::string("NCCL call during capture returned ") + ncclGetErrorString(r);
  }
  // End every capture before instantiating any graph: cudaGraphInstantiate is not allowed while
  // this thread (or, in global mode, any thread) still captures another GPU's stream.
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    const cudaError_t e = cudaStreamEndCapture(L[l]->stream, &(*graphs)[l]);
    if (e != cudaSuccess && why.empty()) why = std::string("end capture: ") + cudaGetErrorString(e);
  }
  if (why.empty()) why = instantiateAll(L, *graphs, *execs, "instantiate");
  return why;
}

std::string instantiateAll(std::vector<RankCtx*>& L, std::vector<cudaGraph_t>& graphs,
                           std::vector<cudaGraphExec_t>& execs, const char* what) {
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    const cudaError_t e = cudaGraphInstantiate(&execs[l], graphs[l], 0);
    if (e != cudaSuccess) return std::string(what) + ": " + cudaGetErrorString(e);
  }
  return "";
}

void destroyGraphs(std::vector<RankCtx*>& L, std::vector<cudaGraph_t>& graphs, std::vector<cudaGraphExec_t>& execs) {
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    if (execs[l]) cudaGraphExecDestroy(execs[l]);
    if (graphs[l]) cudaGraphDestroy(graphs[l]);
    execs[l] = nullptr;
    graphs[l] = nullptr;
  }
}

Case fresh(const CaseSet& s, size_t k, uint64_t seed) {
  Case c = s.cases[k];
  c.seed = seed;
  return c;
}

std::string graphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  const cudaError_t e = cudaGraphLaunch(exec, stream);
  return e == cudaSuccess ? "" : std::string("cudaGraphLaunch: ") + cudaGetErrorString(e);
}

std::string evaluateSlots(std::vector<RankCtx*>& L, const CaseSet& s, const std::vector<size_t>& caseOfSlot,
                          const char* context) {
  std::string why;
  int bad = 0;
  for (RankCtx* x : L) {
    if (!syncAndCopy(*x, (int)caseOfSlot.size(), &why)) return why;
    for (size_t slot = 0; slot < caseOfSlot.size(); ++slot)
      if (!evaluate(*x, s.cases[caseOfSlot[slot]], x->hRes[slot], context)) ++bad;
  }
  return bad ? std::to_string(bad) + " checks failed" : "";
}

namespace {

void testCaptureAndReplay(std::vector<RankCtx*>& L, const Options& o, cudaStreamCaptureMode mode) {
  constexpr int kReplays = 100;
  const char* modeName = mode == cudaStreamCaptureModeGlobal ? "global" : "thread-local";
  // An all-reduce, a ring of sends and an all-to-all. Run before anything else on a new
  // communicator (coll_sweep --no-selftest --no-sweep), the capture is where the all-to-all's
  // point-to-point connections are made (first use).
  std::vector<Case> cases(3, allReduce(65537));
  cases[1].coll = kSendRecvRing;
  cases[2].coll = kAlltoAll;
  const CaseSet s = layOut(L, cases);
  const std::vector<size_t> all = {0, 1, 2};
  const size_t nc = all.size();
  std::vector<cudaGraph_t> graphs;
  std::vector<cudaGraphExec_t> execs;
  std::string why = capture(L, mode, s, all, &graphs, &execs);
  if (why.empty()) {
    for (RankCtx* x : L) {
      cudaSetDevice(x->dev);
      cudaMemsetAsync(x->dRes, 0, sizeof(CheckResult) * nc * kReplays, x->stream);
    }
    std::vector<size_t> caseOfSlot;
    for (int it = 0; it < kReplays && why.empty(); ++it) {
      for (size_t l = 0; l < L.size() && why.empty(); ++l) {
        RankCtx& x = *L[l];
        why = runChecked(x, l, s, all, o.seed * 31337 + nc * it, (int)(nc * it), x.stream,
                         [&] { return graphLaunch(execs[l], x.stream); });
      }
      caseOfSlot.insert(caseOfSlot.end(), all.begin(), all.end());
    }
    if (why.empty()) why = evaluateSlots(L, s, caseOfSlot, "graph replay: ");
  }
  destroyGraphs(L, graphs, execs);
  addExtraAll(L,
              std::string("CUDA graph (") + modeName +
                  " capture): allreduce + send/recv ring + all-to-all, 100 replays",
              why.empty() ? 1 : 0, why.empty() ? "every replay checked with fresh inputs" : why);
  watchNote(L[0]->rank, "extras: graph %s done", modeName);
}

// Two graphs and a call outside graphs, each round on the rank's stream and a second one with
// nothing ordering the two streams but the library (NCCL_GRAPH_MIXING_SUPPORT, on by default):
// graph A on one stream, graph B on the other, then the call on A's stream; the next round swaps
// the streams, so every step (A to B, B to the call, the call to the next A) crosses streams.
// Unordered, launches of one communicator could run at once over the same connections, or in
// different orders on different ranks: wrong data or a hang.
// Ranks sharing a GPU in one process wait for both streams at the end of each round (see
// testGraphWorkReuse: CUDA's few hardware queues; a rank running rounds ahead hung this extra once
// in session 49). Within a round every step still crosses streams with nothing but the library
// ordering them; between rounds, in that mode only, the wait does.
void testGraphAndStreamMixed(std::vector<RankCtx*>& L, const Options& o, bool threadedRanks) {
  const bool inStep = threadedRanks && o.devices < L[0]->nranks;
  const char* name = "CUDA graphs and calls outside graphs on two unsynchronized streams";
  // SWEEP_MIXED_UNORDERED=1 runs it with the ordering off too: the check that it catches the fault.
  const char* env = std::getenv("NCCL_GRAPH_MIXING_SUPPORT");
  const char* anyway = std::getenv("SWEEP_MIXED_UNORDERED");
  if (env && std::atoi(env) == 0 && !(anyway && std::atoi(anyway) == 1)) {
    watchNote(L[0]->rank, "extras: mixed graphs skipped (NCCL_GRAPH_MIXING_SUPPORT=0)");
    return;
  }
  constexpr int kRounds = 40;
  const CaseSet s = layOut(L, {allReduce(65537), allReduce(300007), allReduce(4099)});  // A, the call, B
  std::vector<cudaStream_t> side(L.size(), nullptr);
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaStreamCreateWithFlags(&side[l], cudaStreamNonBlocking);
  }
  std::vector<cudaGraph_t> graphsA, graphsB(L.size(), nullptr);
  std::vector<cudaGraphExec_t> execsA, execsB(L.size(), nullptr);
  std::string why = capture(L, cudaStreamCaptureModeThreadLocal, s, {0}, &graphsA, &execsA);
  if (why.empty()) why = capture(L, cudaStreamCaptureModeThreadLocal, s, {2}, &graphsB, &execsB);
  std::vector<size_t> caseOfSlot;
  for (int it = 0; it < kRounds && why.empty(); ++it) {
    const uint64_t seed = o.seed * 7919 + 3 * it;
    auto first = [&](size_t l) { return it % 2 == 0 ? L[l]->stream : side[l]; };
    auto second = [&](size_t l) { return it % 2 == 0 ? side[l] : L[l]->stream; };
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      why = runChecked(*L[l], l, s, {0}, seed, 3 * it, first(l), [&] { return graphLaunch(execsA[l], first(l)); });
    }
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      why = runChecked(*L[l], l, s, {2}, seed, 3 * it + 2, second(l),
                       [&] { return graphLaunch(execsB[l], second(l)); });
    }
    // The call outside graphs: every local rank's inputs first, then one grouped call, then the checks.
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      RankCtx& x = *L[l];
      const Case c = fresh(s, 1, seed + 1);
      prepareCase(c, s.places[l][1], paramsFor(c, x.rank, x.nranks), first(l), x.recvBase + s.offsets[1]);
    }
    size_t l = 0;
    const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
      const size_t me = l++;
      return issueCase(fresh(s, 1, seed + 1), s.places[me][1], ncclSum, x.rank, x.nranks, x.comm, first(me));
    });
    if (r != ncclSuccess && why.empty()) why = std::string("call outside the graphs: ") + ncclGetErrorString(r);
    for (size_t m = 0; m < L.size() && why.empty(); ++m) {
      RankCtx& x = *L[m];
      const Case c = fresh(s, 1, seed + 1);
      checkCase(c, s.places[m][1], paramsFor(c, x.rank, x.nranks), x.dRes + 3 * it + 1, first(m),
                x.recvBase + s.offsets[1]);
    }
    caseOfSlot.insert(caseOfSlot.end(), {0, 1, 2});
    for (size_t m = 0; m < L.size() && inStep; ++m) {
      cudaSetDevice(L[m]->dev);
      for (cudaStream_t stream : {L[m]->stream, side[m]}) {
        const cudaError_t e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess && why.empty()) why = std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e);
      }
    }
  }
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    const cudaError_t e = cudaStreamSynchronize(side[l]);
    if (e != cudaSuccess && why.empty()) why = std::string("second stream: ") + cudaGetErrorString(e);
  }
  if (why.empty()) why = evaluateSlots(L, s, caseOfSlot, "mixed graphs/stream: ");
  destroyGraphs(L, graphsA, execsA);
  destroyGraphs(L, graphsB, execsB);
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaStreamDestroy(side[l]);
  }
  addExtraAll(L, name, why.empty() ? 1 : 0,
              why.empty() ? std::to_string(kRounds) + " rounds of replay A + replay B + call, all checked" : why);
  watchNote(L[0]->rank, "extras: mixed graphs done");
}

// One graph stays alive while 40 others are captured, replayed and destroyed; then it is replayed
// again. The pool of captured work items hands memory of destroyed graphs out again: the live
// graph's items must not be among it. (NCCL_WEFT_INLINE_WORKS=0 NCCL_WEFT_GRAPH_WORK_ITEMS=8 send
// every launch's items through the pool with a buffer of 8 items.)
// Ranks sharing a GPU in one process (threads mode with more ranks than GPUs) wait for each
// replay after destroying its graph: unsynchronized, one rank's thread queued dozens of replays
// ahead of another's, and CUDA feeds the streams of one GPU through a few hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS, default 8) in launch order, so a rank's later kernel could wait
// there, behind its own earlier one, in front of the other rank's earlier kernel that both need:
// 4 ranks hung every run (session 37; 2 ranks with CUDA_DEVICE_MAX_CONNECTIONS=1 or 2 too).
// Ranks on GPUs of their own never share a queue.
void testGraphWorkReuse(std::vector<RankCtx*>& L, const Options& o, bool threadedRanks) {
  constexpr int kChurn = 40;
  const bool inStep = threadedRanks && o.devices < L[0]->nranks;
  const CaseSet s = layOut(L, {allReduce(131071), allReduce(65537), allReduce(4099)});
  std::vector<cudaGraph_t> kept, churned;
  std::vector<cudaGraphExec_t> keptExecs, churnedExecs;
  std::string why = capture(L, cudaStreamCaptureModeThreadLocal, s, {0}, &kept, &keptExecs);
  std::vector<size_t> caseOfSlot;
  auto replayKept = [&](uint64_t seed) {
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      RankCtx& x = *L[l];
      why = runChecked(x, l, s, {0}, seed, (int)caseOfSlot.size(), x.stream,
                       [&] { return graphLaunch(keptExecs[l], x.stream); });
    }
    caseOfSlot.push_back(0);
  };
  if (why.empty()) replayKept(o.seed * 104729);
  for (int it = 0; it < kChurn && why.empty(); ++it) {
    why = capture(L, cudaStreamCaptureModeThreadLocal, s, {1, 2}, &churned, &churnedExecs);
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      RankCtx& x = *L[l];
      why = runChecked(x, l, s, {1, 2}, o.seed * 131 + 2 * it, (int)caseOfSlot.size(), x.stream,
                       [&] { return graphLaunch(churnedExecs[l], x.stream); });
    }
    caseOfSlot.push_back(1);
    caseOfSlot.push_back(2);
    // Destroyed while its replay may still run: CUDA hands the items back only after it is done.
    destroyGraphs(L, churned, churnedExecs);
    for (size_t l = 0; l < L.size() && inStep; ++l) {
      const cudaError_t e = cudaStreamSynchronize(L[l]->stream);
      if (e != cudaSuccess && why.empty()) why = std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e);
    }
    watchNote(L[0]->rank, "extras: graph work reuse: churned graph %d launched%s", it, inStep ? " and done" : "");
    if (caseOfSlot.size() + 3 > (size_t)L[0]->resSlots || it == kChurn - 1) {
      if (why.empty()) replayKept(o.seed * 104729 + it);
      watchNote(L[0]->rank, "extras: graph work reuse: kept graph replayed after %d, checking", it);
      if (why.empty()) why = evaluateSlots(L, s, caseOfSlot, "graph work reuse: ");
      caseOfSlot.clear();
    }
  }
  destroyGraphs(L, kept, keptExecs);
  addExtraAll(L, "CUDA graph kept alive while 40 others are captured, replayed and destroyed", why.empty() ? 1 : 0,
              why.empty() ? "every replay of both checked" : why);
  watchNote(L[0]->rank, "extras: graph work reuse done");
}

// Captures of one call each into kInterleaved other graphs, begun and ended while the graph of
// the forked-capture extra is still being captured: the library's per-graph records of the
// communicator's launches must keep that graph's (the old first-in-first-out eight lost it).
constexpr int kInterleaved = 12;
std::string captureInterleaved(std::vector<RankCtx*>& L, const CaseSet& s, size_t k) {
  std::string why;
  for (int g = 0; g < kInterleaved && why.empty(); ++g) {
    std::vector<cudaStream_t> streams(L.size(), nullptr);
    for (size_t l = 0; l < L.size(); ++l) {
      cudaSetDevice(L[l]->dev);
      cudaError_t e = cudaStreamCreateWithFlags(&streams[l], cudaStreamNonBlocking);
      if (e == cudaSuccess) e = cudaStreamBeginCapture(streams[l], cudaStreamCaptureModeThreadLocal);
      if (e != cudaSuccess && why.empty()) why = std::string("interleaved capture: ") + cudaGetErrorString(e);
    }
    if (why.empty()) {
      size_t l = 0;
      const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
        const size_t me = l++;
        return issueCase(s.cases[k], s.places[me][k], ncclSum, x.rank, x.nranks, x.comm, streams[me]);
      });
      if (r != ncclSuccess) why = std::string("NCCL call in an interleaved capture returned ") + ncclGetErrorString(r);
    }
    for (size_t l = 0; l < L.size(); ++l) {
      if (streams[l] == nullptr) continue;
      cudaSetDevice(L[l]->dev);
      cudaGraph_t graph = nullptr;
      const cudaError_t e = cudaStreamEndCapture(streams[l], &graph);
      if (e != cudaSuccess && why.empty()) why = std::string("interleaved end capture: ") + cudaGetErrorString(e);
      if (graph) cudaGraphDestroy(graph);
      cudaStreamDestroy(streams[l]);
    }
  }
  return why;
}

// Three calls of one communicator captured into one graph, on the captured stream, on a stream
// forked from it before the first call, and on the captured stream again, with no edge between them
// from the caller: the library puts each after the one before (their kernels share connections).
// Between the first two, kInterleaved other graphs capture a call each. Replayed 20 times, every
// result checked.
void testForkedCapture(std::vector<RankCtx*>& L, const Options& o) {
  constexpr int kReplays = 20;
  const CaseSet s = layOut(L, {allReduce(65537), allReduce(200003), allReduce(4099)});
  std::vector<cudaStream_t> side(L.size(), nullptr);
  std::vector<cudaEvent_t> fork(L.size(), nullptr), join(L.size(), nullptr);
  std::vector<cudaGraph_t> graphs(L.size(), nullptr);
  std::vector<cudaGraphExec_t> execs(L.size(), nullptr);
  std::string why;
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaStreamCreateWithFlags(&side[l], cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&fork[l], cudaEventDisableTiming);
    cudaEventCreateWithFlags(&join[l], cudaEventDisableTiming);
    cudaError_t e = cudaStreamBeginCapture(L[l]->stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) e = cudaEventRecord(fork[l], L[l]->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(side[l], fork[l], 0);  // side joins the capture
    if (e != cudaSuccess && why.empty()) why = std::string("fork: ") + cudaGetErrorString(e);
  }
  for (size_t k = 0; k < 3 && why.empty(); ++k) {
    size_t l = 0;
    const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
      const size_t me = l++;
      return issueCase(s.cases[k], s.places[me][k], ncclSum, x.rank, x.nranks, x.comm, k == 1 ? side[me] : x.stream);
    });
    if (r != ncclSuccess) why = std::string("NCCL call during capture returned ") + ncclGetErrorString(r);
    if (k == 0 && why.empty()) why = captureInterleaved(L, s, 2);
  }
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaError_t e = cudaEventRecord(join[l], side[l]);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(L[l]->stream, join[l], 0);
    const cudaError_t end = cudaStreamEndCapture(L[l]->stream, &graphs[l]);
    if (e == cudaSuccess) e = end;
    if (e != cudaSuccess && why.empty()) why = std::string("join/end capture: ") + cudaGetErrorString(e);
  }
  if (why.empty()) why = instantiateAll(L, graphs, execs, "instantiate");
  std::vector<size_t> caseOfSlot;
  for (int it = 0; it < kReplays && why.empty(); ++it) {
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      RankCtx& x = *L[l];
      why = runChecked(x, l, s, {0, 1, 2}, o.seed * 6007 + 3 * it, 3 * it, x.stream,
                       [&] { return graphLaunch(execs[l], x.stream); });
    }
    caseOfSlot.insert(caseOfSlot.end(), {0, 1, 2});
  }
  if (why.empty()) why = evaluateSlots(L, s, caseOfSlot, "forked capture: ");
  destroyGraphs(L, graphs, execs);
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaStreamDestroy(side[l]);
    cudaEventDestroy(fork[l]);
    cudaEventDestroy(join[l]);
  }
  addExtraAll(L,
              "CUDA graph: three allreduces captured on a stream, a forked one and the first again, no edges, "
              "12 other captures between, 20 replays",
              why.empty() ? 1 : 0, why.empty() ? "every replay checked" : why);
  watchNote(L[0]->rank, "extras: forked capture done");
}

}  // namespace

void testGraphs(std::vector<RankCtx*>& L, const Options& o, bool threadedRanks) {
  // Global capture forbids unsafe CUDA calls of *other* threads; with one thread per GPU in this
  // process the peers' own calls would break it, so that mode uses thread-local capture only.
  if (!threadedRanks) testCaptureAndReplay(L, o, cudaStreamCaptureModeGlobal);
  testCaptureAndReplay(L, o, cudaStreamCaptureModeThreadLocal);
  testGraphAndStreamMixed(L, o, threadedRanks);
  testForkedCapture(L, o);
  testGraphWorkReuse(L, o, threadedRanks);
  testGraphEdges(L, o, threadedRanks);
}

}  // namespace sweep
