// CUDA graph extras of reliability matrix row 14: every kind of collective in one graph replayed
// 1000 times with its checks inside the graph; captures that CUDA invalidates before or after a
// call was captured (the call fails or the graph never comes, and the communicator must go on
// unharmed); calls captured into the bodies of conditional nodes: a WHILE loop built by hand as
// cudaStreamBeginCaptureToGraph users do (XLA, NCCL issue #1986), and an IF node made inside an
// ongoing capture with its body captured on a second stream, as PyTorch's torch.cond does (pytorch
// issue #180960). CUDA allows no event nodes in such bodies.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sweep_graph_util.h"

namespace sweep {
namespace {

std::string cudaWhy(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }

// Every local rank: is its communicator still healthy (no asynchronous error)?
std::string commsHealthy(std::vector<RankCtx*>& L) {
  for (RankCtx* x : L) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(x->comm, &state);
    if (r != ncclSuccess || state != ncclSuccess)
      return "rank " + std::to_string(x->rank) + ": communicator reports " + ncclGetErrorString(state);
  }
  return "";
}

// A checked all-reduce outside graphs, then one captured and replayed 10 times with fresh inputs.
std::string stillWorks(std::vector<RankCtx*>& L, const Options& o, const CaseSet& s, uint64_t salt) {
  std::string why = commsHealthy(L);
  std::vector<Member> members = membersOf(L);
  if (why.empty()) runCaseOn(members, fresh(s, 0, o.seed * 17 + salt), false, &why);
  std::vector<cudaGraph_t> graphs;
  std::vector<cudaGraphExec_t> execs;
  if (why.empty()) why = capture(L, cudaStreamCaptureModeThreadLocal, s, {0}, &graphs, &execs);
  for (RankCtx* x : L) {
    cudaSetDevice(x->dev);
    cudaMemsetAsync(x->dRes, 0, sizeof(CheckResult) * 10, x->stream);
  }
  std::vector<size_t> caseOfSlot;
  for (int it = 0; it < 10 && why.empty(); ++it) {
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      RankCtx& x = *L[l];
      why = runChecked(x, l, s, {0}, o.seed * 29 + salt + it, it, x.stream,
                       [&] { return graphLaunch(execs[l], x.stream); });
    }
    caseOfSlot.push_back(0);
  }
  if (why.empty()) why = evaluateSlots(L, s, caseOfSlot, "after an invalidated capture: ");
  destroyGraphs(L, graphs, execs);
  return why;
}

// Begins a thread-local capture on every local rank's stream.
std::string beginCaptures(std::vector<RankCtx*>& L) {
  for (RankCtx* x : L) {
    cudaSetDevice(x->dev);
    cudaError_t e = cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return cudaWhy("cudaStreamBeginCapture", e);
  }
  return "";
}

// Breaks every local rank's capture with a call CUDA does not allow while capturing (synchronizing
// the captured stream). Empty when CUDA invalidated them.
std::string breakCaptures(std::vector<RankCtx*>& L) {
  for (RankCtx* x : L) {
    cudaSetDevice(x->dev);
    (void)cudaStreamSynchronize(x->stream);  // not allowed while capturing: invalidates the capture
    (void)cudaGetLastError();
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(x->stream, &status);
    if (status != cudaStreamCaptureStatusInvalidated) return "the capture was not invalidated (CUDA changed?)";
  }
  return "";
}

// Ends every local rank's (invalidated) capture; it must give no graph.
std::string endBroken(std::vector<RankCtx*>& L) {
  std::string why;
  for (RankCtx* x : L) {
    cudaSetDevice(x->dev);
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(x->stream, &g);
    (void)cudaGetLastError();
    if (e == cudaSuccess && why.empty()) why = "an invalidated capture ended with a graph";
    if (g) cudaGraphDestroy(g);
  }
  return why;
}

// An all-reduce issued on a stream whose capture CUDA already invalidated must fail (not queue work
// that never runs); one captured before the invalidation is lost with the graph. Either way the
// communicator goes on: calls outside graphs and new captures work, with every value checked.
void testInvalidatedCaptures(std::vector<RankCtx*>& L, const Options& o) {
  const CaseSet s = layOut(L, {allReduce(65537)});
  for (int after = 0; after < 2; ++after) {
    std::string why = beginCaptures(L);
    if (why.empty() && !after) why = breakCaptures(L);
    if (why.empty()) {
      size_t l = 0;
      const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
        const size_t me = l++;
        return issueCase(fresh(s, 0, 1), s.places[me][0], ncclSum, x.rank, x.nranks, x.comm, x.stream);
      });
      if (!after && r == ncclSuccess) why = "a call on an invalidated capture returned ncclSuccess";
      if (after && r != ncclSuccess) why = std::string("the captured call returned ") + ncclGetErrorString(r);
      if (!after) (void)ncclGetLastError(nullptr);
    }
    if (why.empty() && after) why = breakCaptures(L);
    const std::string ended = endBroken(L);
    if (why.empty()) why = ended;
    if (why.empty()) why = stillWorks(L, o, s, 1000 * (after + 1));
    const char* name = after ? "CUDA graph capture invalidated after a captured all-reduce: the graph is lost, "
                               "the communicator goes on"
                             : "CUDA graph capture invalidated before an all-reduce: the call fails, the "
                               "communicator goes on";
    addExtraAll(L, name, why.empty() ? 1 : 0,
                why.empty() ? "then a checked call and 10 checked replays of a new capture" : why);
    watchNote(L[0]->rank, "extras: invalidated capture (%s the call) done", after ? "after" : "before");
  }
}

#if CUDART_VERSION >= 12040

// Ends a WHILE loop's iteration: one fewer left; the loop goes on while any are.
__global__ void loopStepKernel(cudaGraphConditionalHandle handle, int* left, int* done) {
  const int now = --*left;
  ++*done;
  cudaGraphSetConditional(handle, now > 0 ? 1u : 0u);
}

// Sets an IF node's condition from device memory (as torch.cond does from a tensor).
__global__ void setConditionKernel(cudaGraphConditionalHandle handle, const int* flag) {
  cudaGraphSetConditional(handle, *flag != 0 ? 1u : 0u);
}

// Per local rank: int32 buffers for the loop test, and the counters the kernels use.
struct CondBuffers {
  int32_t* a = nullptr;
  int32_t* b = nullptr;
  int* counters = nullptr;  // [0] iterations left, [1] iterations done, [2] IF flag
};

constexpr uint64_t kCondCount = 4099;  // odd: the last chunk is partial

int32_t initialValue(int rank, uint64_t i, int salt) { return (int32_t)((rank + 1) * (int)(i % 5 + 1) + salt); }

// Writes every rank's starting values and counters (on its stream).
std::string resetCond(RankCtx& x, CondBuffers& c, int salt, const int counters[3]) {
  std::vector<int32_t> a(kCondCount), b(kCondCount);
  for (uint64_t i = 0; i < kCondCount; ++i) {
    a[i] = initialValue(x.rank, i, salt);
    b[i] = initialValue(x.rank, i, salt + 3);
  }
  cudaSetDevice(x.dev);
  cudaError_t e = cudaMemcpyAsync(c.a, a.data(), kCondCount * 4, cudaMemcpyHostToDevice, x.stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(c.b, b.data(), kCondCount * 4, cudaMemcpyHostToDevice, x.stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(c.counters, counters, 3 * sizeof(int), cudaMemcpyHostToDevice, x.stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(x.stream);  // the host vectors go away
  return e == cudaSuccess ? "" : cudaWhy("reset", e);
}

// Every local rank: new starting values and counters, then one launch of its graph, waited for.
std::string resetAndLaunch(std::vector<RankCtx*>& L, std::vector<CondBuffers>& B,
                           std::vector<cudaGraphExec_t>& execs, int salt, const int counters[3]) {
  std::string why;
  for (size_t l = 0; l < L.size() && why.empty(); ++l) why = resetCond(*L[l], B[l], salt, counters);
  for (size_t l = 0; l < L.size() && why.empty(); ++l) why = graphLaunch(execs[l], L[l]->stream);
  for (size_t l = 0; l < L.size() && why.empty(); ++l) {
    cudaSetDevice(L[l]->dev);
    const cudaError_t e = cudaStreamSynchronize(L[l]->stream);
    if (e != cudaSuccess) why = cudaWhy("graph launch", e);
  }
  return why;
}

// Sum over ranks of initialValue(r, i, salt) times nranks^(sums - 1): the value after `sums`
// in-place all-reduces (sums >= 1), with int32 wrap-around as the GPU adds.
int32_t expectedAfter(int nranks, uint64_t i, int salt, int sums) {
  uint32_t v = 0;
  for (int r = 0; r < nranks; ++r) v += (uint32_t)initialValue(r, i, salt);
  for (int k = 1; k < sums; ++k) v *= (uint32_t)nranks;
  return (int32_t)v;
}

// Compares buffer `dev` of rank x (its stream done) with `want(i)`.
template <typename Want>
std::string compareBuffer(RankCtx& x, const int32_t* dev, const char* what, Want&& want) {
  std::vector<int32_t> got(kCondCount);
  cudaSetDevice(x.dev);
  const cudaError_t e = cudaMemcpy(got.data(), dev, kCondCount * 4, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cudaWhy("copy back", e);
  uint64_t bad = 0, first = 0;
  for (uint64_t i = 0; i < kCondCount; ++i) {
    if (got[i] == want(i)) continue;
    if (bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  char text[200];
  snprintf(text, sizeof text, "rank %d: %s: %llu of %llu elements wrong, first [%llu] = %d, expected %d", x.rank, what,
           (unsigned long long)bad, (unsigned long long)kCondCount, (unsigned long long)first, got[first],
           want(first));
  return text;
}

ncclResult_t allReduceInPlace(std::vector<RankCtx*>& L, std::vector<CondBuffers>& B, bool bufferB,
                              const std::vector<cudaStream_t>& streams) {
  size_t l = 0;
  return groupCall(L, [&](RankCtx& x) {
    const size_t me = l++;
    int32_t* buf = bufferB ? B[me].b : B[me].a;
    return ncclAllReduce(buf, buf, kCondCount, ncclInt32, ncclSum, x.comm, streams[me]);
  });
}

std::vector<cudaStream_t> mainStreams(std::vector<RankCtx*>& L) {
  std::vector<cudaStream_t> s;
  for (RankCtx* x : L) s.push_back(x->stream);
  return s;
}

// Per local rank: the graph, the conditional node's handle and body, the executable graph.
struct CondGraphs {
  std::vector<cudaGraph_t> graphs, bodies;
  std::vector<cudaGraphConditionalHandle> handles;
  std::vector<cudaGraphExec_t> execs;
  explicit CondGraphs(size_t n) : graphs(n, nullptr), bodies(n, nullptr), handles(n), execs(n, nullptr) {}
};

cudaGraphNodeParams conditionalNode(cudaGraphConditionalHandle handle, cudaGraphConditionalNodeType type) {
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = handle;
  p.conditional.type = type;
  p.conditional.size = 1;
  return p;
}

// A graph of one WHILE node whose body (captured into it) is an in-place all-reduce and the loop
// step: kIterations all-reduces per launch, the values growing by nranks each time.
std::string testWhileLoop(std::vector<RankCtx*>& L, std::vector<CondBuffers>& B) {
  constexpr int kIterations = 6;
  constexpr int kLaunches = 3;
  std::string why;
  CondGraphs G(L.size());
  for (size_t l = 0; l < L.size() && why.empty(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaError_t e = cudaGraphCreate(&G.graphs[l], 0);
    if (e == cudaSuccess) e = cudaGraphConditionalHandleCreate(&G.handles[l], G.graphs[l], 1, cudaGraphCondAssignDefault);
    cudaGraphNodeParams p = conditionalNode(G.handles[l], cudaGraphCondTypeWhile);
    cudaGraphNode_t node = nullptr;
    if (e == cudaSuccess) e = cudaGraphAddNode(&node, G.graphs[l], nullptr, nullptr, 0, &p);
    if (e == cudaSuccess) G.bodies[l] = p.conditional.phGraph_out[0];
    if (e == cudaSuccess)
      e = cudaStreamBeginCaptureToGraph(L[l]->stream, G.bodies[l], nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) why = cudaWhy("WHILE node and its body's capture", e);
  }
  if (why.empty()) {
    const ncclResult_t r = allReduceInPlace(L, B, false, mainStreams(L));
    if (r != ncclSuccess) why = std::string("all-reduce captured into a WHILE body: ") + ncclGetErrorString(r);
  }
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    loopStepKernel<<<1, 1, 0, L[l]->stream>>>(G.handles[l], B[l].counters, B[l].counters + 1);
    cudaGraph_t body = nullptr;
    const cudaError_t e = cudaStreamEndCapture(L[l]->stream, &body);
    if (e != cudaSuccess && why.empty()) why = cudaWhy("end of the WHILE body's capture", e);
  }
  if (why.empty()) why = instantiateAll(L, G.graphs, G.execs, "instantiate the graph with the WHILE node");
  const int n = L[0]->nranks;
  for (int launch = 0; launch < kLaunches && why.empty(); ++launch) {
    const int counters[3] = {kIterations, 0, 0};
    why = resetAndLaunch(L, B, G.execs, launch * 7, counters);
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      RankCtx& x = *L[l];
      cudaSetDevice(x.dev);
      int done[3] = {};
      const cudaError_t e = cudaMemcpy(done, B[l].counters, sizeof done, cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) why = cudaWhy("copy the loop's counters", e);
      else if (done[1] != kIterations) why = "the loop ran " + std::to_string(done[1]) + " times";
      if (why.empty())
        why = compareBuffer(x, B[l].a, "WHILE body all-reduce", [&](uint64_t i) {
          return expectedAfter(n, i, launch * 7, kIterations);
        });
    }
  }
  destroyGraphs(L, G.graphs, G.execs);
  return why;
}

// torch.cond's shape: inside an ongoing capture on the rank's stream, an all-reduce of A, a kernel
// setting an IF node's condition from a device flag, the IF node (added to the capture by hand)
// whose body, captured on a second stream while the first capture goes on, all-reduces B, and a
// second all-reduce of A after it. Launched with the flag on and off: B is summed or left alone.
std::string testIfNode(std::vector<RankCtx*>& L, std::vector<CondBuffers>& B) {
  std::string why;
  std::vector<cudaStream_t> side(L.size(), nullptr);
  CondGraphs G(L.size());
  for (size_t l = 0; l < L.size() && why.empty(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaError_t e = cudaStreamCreateWithFlags(&side[l], cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamBeginCapture(L[l]->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) why = cudaWhy("begin the outer capture", e);
  }
  if (why.empty()) {
    const ncclResult_t r = allReduceInPlace(L, B, false, mainStreams(L));
    if (r != ncclSuccess) why = std::string("all-reduce before the IF node: ") + ncclGetErrorString(r);
  }
  for (size_t l = 0; l < L.size() && why.empty(); ++l) {
    RankCtx& x = *L[l];
    cudaSetDevice(x.dev);
    cudaStreamCaptureStatus status;
    cudaGraph_t outer = nullptr;
    const cudaGraphNode_t* deps = nullptr;
    size_t count = 0;
    const char* step = "cudaStreamGetCaptureInfo";
    auto next = [&](const char* name, cudaError_t e) {
      if (why.empty() && e != cudaSuccess) why = std::string("IF node inside the capture: ") + step + ": " + cudaGetErrorString(e);
      step = name;
      return why.empty();
    };
    if (next("cudaGraphConditionalHandleCreate",
             cudaStreamGetCaptureInfo(x.stream, &status, nullptr, &outer, &deps, nullptr, &count)) &&
        next("setConditionKernel", cudaGraphConditionalHandleCreate(&G.handles[l], outer, 0, 0))) {
      (void)cudaGetLastError();  // an earlier failure's error must not be taken for the launch's
      setConditionKernel<<<1, 1, 0, x.stream>>>(G.handles[l], B[l].counters + 2);
      next("cudaStreamGetCaptureInfo", cudaGetLastError());
    }
    cudaGraphNodeParams p = conditionalNode(G.handles[l], cudaGraphCondTypeIf);
    cudaGraphNode_t node = nullptr;
    if (why.empty() &&
        next("cudaGraphAddNode", cudaStreamGetCaptureInfo(x.stream, &status, nullptr, &outer, &deps, nullptr, &count)) &&
        next("cudaStreamUpdateCaptureDependencies", cudaGraphAddNode(&node, outer, deps, nullptr, count, &p)) &&
        next("cudaStreamBeginCaptureToGraph",
             cudaStreamUpdateCaptureDependencies(x.stream, &node, nullptr, 1, cudaStreamSetCaptureDependencies))) {
      G.bodies[l] = p.conditional.phGraph_out[0];
      next("", cudaStreamBeginCaptureToGraph(side[l], G.bodies[l], nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal));
    }
  }
  if (why.empty()) {
    const ncclResult_t r = allReduceInPlace(L, B, true, side);
    if (r != ncclSuccess) why = std::string("all-reduce captured into an IF body: ") + ncclGetErrorString(r);
  }
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaGraph_t body = nullptr;
    const cudaError_t e = cudaStreamEndCapture(side[l], &body);
    if (e != cudaSuccess && why.empty()) why = cudaWhy("end of the IF body's capture", e);
  }
  if (why.empty()) {
    const ncclResult_t r = allReduceInPlace(L, B, false, mainStreams(L));
    if (r != ncclSuccess) why = std::string("all-reduce after the IF node: ") + ncclGetErrorString(r);
  }
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    const cudaError_t e = cudaStreamEndCapture(L[l]->stream, &G.graphs[l]);
    if (e != cudaSuccess && why.empty()) why = cudaWhy("end of the outer capture", e);
  }
  if (why.empty()) why = instantiateAll(L, G.graphs, G.execs, "instantiate the graph with the IF node");
  const int n = L[0]->nranks;
  for (int launch = 0; launch < 4 && why.empty(); ++launch) {
    const int on = launch % 2 == 0 ? 1 : 0;
    const int counters[3] = {0, 0, on};
    why = resetAndLaunch(L, B, G.execs, launch * 11, counters);
    for (size_t l = 0; l < L.size() && why.empty(); ++l) {
      RankCtx& x = *L[l];
      why = compareBuffer(x, B[l].a, "all-reduces around the IF node",
                            [&](uint64_t i) { return expectedAfter(n, i, launch * 11, 2); });
      if (why.empty())
        why = compareBuffer(x, B[l].b, on ? "IF body all-reduce (condition on)" : "IF body skipped (condition off)",
                            [&](uint64_t i) {
                              return on ? expectedAfter(n, i, launch * 11 + 3, 1)
                                        : initialValue(x.rank, i, launch * 11 + 3);
                            });
    }
  }
  destroyGraphs(L, G.graphs, G.execs);
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    if (side[l]) cudaStreamDestroy(side[l]);
  }
  return why;
}

void testConditionalNodes(std::vector<RankCtx*>& L) {
  std::vector<CondBuffers> B(L.size());
  std::string why;
  for (size_t l = 0; l < L.size() && why.empty(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaError_t e = cudaMalloc(&B[l].a, kCondCount * 4);
    if (e == cudaSuccess) e = cudaMalloc(&B[l].b, kCondCount * 4);
    if (e == cudaSuccess) e = cudaMalloc(&B[l].counters, 4 * sizeof(int));
    if (e != cudaSuccess) why = cudaWhy("cudaMalloc", e);
  }
  const std::string setup = why;
  if (why.empty()) why = testWhileLoop(L, B);
  addExtraAll(L, "CUDA graph WHILE node: in-place all-reduce in the body, 6 iterations, 3 launches",
              why.empty() ? 1 : 0, why.empty() ? "every element exact after each launch" : why);
  watchNote(L[0]->rank, "extras: WHILE node done");
  why = setup;
  if (why.empty()) why = testIfNode(L, B);
  addExtraAll(L,
              "CUDA graph IF node made inside a capture (torch.cond's way), all-reduces before, inside and after",
              why.empty() ? 1 : 0, why.empty() ? "condition on and off twice each, every element exact" : why);
  watchNote(L[0]->rank, "extras: IF node done");
  for (size_t l = 0; l < L.size(); ++l) {
    cudaSetDevice(L[l]->dev);
    cudaFree(B[l].a);
    cudaFree(B[l].b);
    cudaFree(B[l].counters);
  }
}

#else

void testConditionalNodes(std::vector<RankCtx*>& L) {
  addExtraAll(L, "CUDA graph conditional nodes", -1, "built with a CUDA runtime older than 12.4");
}

#endif

// Every kind of collective captured into one graph together with its inputs, the poisoning of its
// outputs and its checks, replayed 1000 times: each replay must rewrite every output (a replay
// that skipped a call leaves poison there), and the checks add up over all replays. Ranks of one
// process that share a GPU wait for each replay (see testGraphWorkReuse in sweep_graphs.cc).
void testEveryCollectiveReplayed(std::vector<RankCtx*>& L, const Options& o, bool threadedRanks) {
  constexpr int kReplays = 1000;
  const int n = L[0]->nranks;
  const bool inStep = threadedRanks && o.devices < n;
  std::vector<Case> cases;
  for (int coll = 0; coll < kNumColls; ++coll) {
    Case c;
    c.coll = coll;
    c.type = coll == kAllReduce ? ncclFloat : ncclInt32;
    c.op = (coll == kAllReduce || coll == kReduce || coll == kReduceScatter) ? kSum : kNoOp;
    c.count = coll == kAllReduce ? (1u << 20) + 1 : 65537;
    c.root = n - 1;
    c.inplace = coll == kBcast ? 1 : 0;  // ncclBcast has one buffer
    c.seed = o.seed * 4241 + coll;
    cases.push_back(c);
  }
  cases.push_back(allReduce(1023));  // a small one as well (another protocol)
  const CaseSet s = layOut(L, cases);
  std::string why;
  std::vector<cudaGraph_t> graphs(L.size(), nullptr);
  std::vector<cudaGraphExec_t> execs(L.size(), nullptr);
  for (size_t l = 0; l < L.size() && why.empty(); ++l) {
    RankCtx& x = *L[l];
    cudaSetDevice(x.dev);
    cudaError_t e = cudaMemsetAsync(x.dRes, 0, sizeof(CheckResult) * cases.size(), x.stream);
    if (e == cudaSuccess) e = cudaStreamBeginCapture(x.stream, cudaStreamCaptureModeThreadLocal);
    for (size_t k = 0; k < cases.size() && e == cudaSuccess; ++k)
      e = prepareCase(cases[k], s.places[l][k], paramsFor(cases[k], x.rank, n), x.stream, x.recvBase + s.offsets[k]);
    if (e != cudaSuccess) why = cudaWhy("capture of the inputs", e);
  }
  if (why.empty()) {
    size_t l = 0;
    const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
      const size_t me = l++;
      ncclResult_t first = ncclSuccess;
      for (size_t k = 0; k < cases.size(); ++k) {
        const ncclResult_t rk = issueCase(cases[k], s.places[me][k], ncclSum, x.rank, n, x.comm, x.stream);
        if (first == ncclSuccess) first = rk;
      }
      return first;
    });
    if (r != ncclSuccess) why = std::string("calls during capture: ") + ncclGetErrorString(r);
  }
  for (size_t l = 0; l < L.size(); ++l) {
    RankCtx& x = *L[l];
    cudaSetDevice(x.dev);
    cudaError_t e = cudaSuccess;
    for (size_t k = 0; k < cases.size() && e == cudaSuccess && why.empty(); ++k)
      e = checkCase(cases[k], s.places[l][k], paramsFor(cases[k], x.rank, n), x.dRes + k, x.stream,
                    x.recvBase + s.offsets[k]);
    const cudaError_t end = cudaStreamEndCapture(x.stream, &graphs[l]);
    if (e == cudaSuccess) e = end;
    if (e != cudaSuccess && why.empty()) why = cudaWhy("capture of the checks", e);
  }
  if (why.empty()) why = instantiateAll(L, graphs, execs, "instantiate");
  for (int it = 0; it < kReplays && why.empty(); ++it) {
    for (size_t l = 0; l < L.size() && why.empty(); ++l) why = graphLaunch(execs[l], L[l]->stream);
    for (size_t l = 0; l < L.size() && inStep && why.empty(); ++l) {
      const cudaError_t e = cudaStreamSynchronize(L[l]->stream);
      if (e != cudaSuccess) why = cudaWhy("replay", e);
    }
    if (it % 100 == 99) watchNote(L[0]->rank, "extras: every collective in one graph: %d replays launched", it + 1);
  }
  std::vector<size_t> caseOfSlot;
  for (size_t k = 0; k < cases.size(); ++k) caseOfSlot.push_back(k);
  if (why.empty()) why = evaluateSlots(L, s, caseOfSlot, "every collective, 1000 replays: ");
  destroyGraphs(L, graphs, execs);
  addExtraAll(L,
              "CUDA graph of every collective kind (with its input writes, output poisoning and checks), 1000 replays",
              why.empty() ? 1 : 0, why.empty() ? "every output of every replay checked" : why);
  watchNote(L[0]->rank, "extras: every collective replayed done");
}

}  // namespace

void testGraphEdges(std::vector<RankCtx*>& L, const Options& o, bool threadedRanks) {
  testEveryCollectiveReplayed(L, o, threadedRanks);
  testInvalidatedCaptures(L, o);
  testConditionalNodes(L);
}

}  // namespace sweep
