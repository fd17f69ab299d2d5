// The runtime facade's stream-capture calls (gpu.h): what a launch needs to know and to add when
// its stream is being captured into a CUDA graph. The HIP build compiles this file too (gpu_api.h
// names): ROCm 5.2 reads and extends a capture's dependencies (so launches captured on forked
// streams are ordered there too), but has neither external event waits nor graph user objects,
// so there the other graph node calls report themselves unsupported.
#include "runtime/gpu.h"

#include <algorithm>
#include <vector>

#include "core/log.h"
#include "runtime/cuda_check.h"

namespace weft::runtime {

Status streamCaptureInfo(Stream stream, CaptureInfo* out) {
  WEFT_CHECK_ARG(out != nullptr, "streamCaptureInfo: out is NULL");
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  WEFT_CUDA_TRY(cudaStreamGetCaptureInfo(stream, &status, &id));
  CaptureInfo info;
  switch (status) {
    case cudaStreamCaptureStatusActive: info.status = CaptureStatus::kActive; info.graphId = id; break;
    case cudaStreamCaptureStatusInvalidated: info.status = CaptureStatus::kInvalidated; break;
    default: info.status = CaptureStatus::kNone; break;
  }
  *out = info;
  return ncclSuccess;
}

namespace {

// The graph being captured on `stream` and the nodes the next captured work would depend on;
// adding nodes to that set. (The one difference between the runtimes: CUDA 12.3+ also returns
// and takes edge data, which weft leaves empty.)
#if defined(WEFT_GPU_HIP)
using CapturedGraph = hipGraph_t;
using CapturedNode = hipGraphNode_t;
Status captureInfoOf(Stream stream, cudaStreamCaptureStatus* status, CapturedGraph* graph, const CapturedNode** nodes,
                     size_t* count) {
  WEFT_CUDA_TRY(hipStreamGetCaptureInfo_v2(stream, status, nullptr, graph, nodes, count));
  return ncclSuccess;
}
Status addCaptureDependencies(Stream stream, std::vector<CapturedNode>& nodes) {
  WEFT_CUDA_TRY(
      hipStreamUpdateCaptureDependencies(stream, nodes.data(), nodes.size(), hipStreamAddCaptureDependencies));
  return ncclSuccess;
}
#else
using CapturedGraph = cudaGraph_t;
using CapturedNode = cudaGraphNode_t;
Status captureInfoOf(Stream stream, cudaStreamCaptureStatus* status, CapturedGraph* graph, const CapturedNode** nodes,
                     size_t* count) {
  const cudaGraphEdgeData* edges = nullptr;  // asked for so that annotated edges are no lossy-query error
  WEFT_CUDA_TRY(cudaStreamGetCaptureInfo(stream, status, nullptr, graph, nodes, &edges, count));
  return ncclSuccess;
}
Status addCaptureDependencies(Stream stream, std::vector<CapturedNode>& nodes) {
  WEFT_CUDA_TRY(cudaStreamUpdateCaptureDependencies(stream, nodes.data(), nullptr, nodes.size(),
                                                    cudaStreamAddCaptureDependencies));
  return ncclSuccess;
}
#endif

Status captureState(Stream stream, CapturedGraph* graph, const CapturedNode** nodes, size_t* count) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  WEFT_TRY(captureInfoOf(stream, &status, graph, nodes, count));
  if (status != cudaStreamCaptureStatusActive) {
    WEFT_WARN("stream %p: its capture %s while graph nodes were being added", (void*)stream,
              status == cudaStreamCaptureStatusInvalidated ? "was invalidated" : "has ended");
    return ncclInternalError;
  }
  return ncclSuccess;
}

}  // namespace

Status captureFrontier(Stream stream, std::vector<GraphNode>* nodes) {
  CapturedGraph graph = nullptr;
  const CapturedNode* frontier = nullptr;
  size_t count = 0;
  WEFT_TRY(captureState(stream, &graph, &frontier, &count));
  nodes->clear();
  for (size_t i = 0; i < count; ++i) nodes->push_back((GraphNode)frontier[i]);
  return ncclSuccess;
}

Status captureAddDependencies(Stream stream, const std::vector<GraphNode>& nodes) {
  CapturedGraph graph = nullptr;
  const CapturedNode* frontier = nullptr;
  size_t count = 0;
  WEFT_TRY(captureState(stream, &graph, &frontier, &count));
  std::vector<CapturedNode> deps;  // only new ones: a node must not depend twice on another
  for (GraphNode n : nodes) {
    const CapturedNode node = (CapturedNode)n;
    if (std::find(frontier, frontier + count, node) == frontier + count) deps.push_back(node);
  }
  return deps.empty() ? ncclSuccess : addCaptureDependencies(stream, deps);
}

#if defined(WEFT_GPU_HIP)

bool captureNodesSupported() { return false; }

namespace {
Status unsupported(const char* call) {
  WEFT_WARN("%s: graph nodes of this kind are not supported by this HIP runtime", call);
  return ncclInvalidUsage;
}
}  // namespace

Status captureAllowsEventNodes(Stream, bool* allowed) {
  *allowed = false;  // there are none to add here anyway
  return ncclSuccess;
}
Status captureWaitEvent(Stream, Event) { return unsupported("captureWaitEvent"); }
Status captureRecordEventAfter(Stream, Event, const std::vector<GraphNode>&, GraphNode*) {
  return unsupported("captureRecordEventAfter");
}
Status captureOnGraphGone(Stream, HostFn, void*) { return unsupported("captureOnGraphGone"); }

#else

bool captureNodesSupported() { return true; }

// A conditional node's body is told by its clone: cudaGraphClone refuses graphs that hold
// conditional, allocation or free nodes and, as found on CUDA 13.0, every conditional body, even
// an empty one. So a refused clone of a graph without such nodes is a body. One that holds
// allocation or free nodes is no body (bodies may not hold them); one that holds a conditional
// node (a body with a nested one, or a top-level graph) cannot be told and is taken for a body:
// the event nodes left out cost ordering against other streams, while a wrong guess the other way
// costs the whole graph. launch.cc asks once per capture (the clone copies every node).
Status captureAllowsEventNodes(Stream stream, bool* allowed) {
  WEFT_CHECK_ARG(allowed != nullptr, "captureAllowsEventNodes: allowed is NULL");
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* frontier = nullptr;
  size_t count = 0;
  WEFT_TRY(captureState(stream, &graph, &frontier, &count));
  cudaGraph_t clone = nullptr;
  const cudaError_t cloned = cudaGraphClone(&clone, graph);
  if (cloned == cudaSuccess) {
    (void)cudaGraphDestroy(clone);
    *allowed = true;
    return ncclSuccess;
  }
  (void)cudaGetLastError();
  if (cloned != cudaErrorNotSupported) {  // no answer: as before this check
    WEFT_INFO(log::kGraph, "stream %p: cudaGraphClone of the captured graph failed (%s); taken for a top-level graph",
              (void*)stream, cudaGetErrorString(cloned));
    *allowed = true;
    return ncclSuccess;
  }
  size_t n = 0;
  WEFT_CUDA_TRY(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) WEFT_CUDA_TRY(cudaGraphGetNodes(graph, nodes.data(), &n));
  bool allocations = false;
  for (size_t i = 0; i < n && !allocations; ++i) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    WEFT_CUDA_TRY(cudaGraphNodeGetType(nodes[i], &type));
    allocations = type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree;
  }
  *allowed = allocations;
  return ncclSuccess;
}

Status captureWaitEvent(Stream stream, Event event) {
  WEFT_CUDA_TRY(cudaStreamWaitEvent(stream, event, cudaEventWaitExternal));
  return ncclSuccess;
}

Status captureRecordEventAfter(Stream stream, Event event, const std::vector<GraphNode>& after, GraphNode* node) {
  WEFT_CHECK_ARG(node != nullptr, "captureRecordEventAfter: node is NULL");
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* frontier = nullptr;
  size_t count = 0;
  WEFT_TRY(captureState(stream, &graph, &frontier, &count));
  cudaGraphNode_t record = (cudaGraphNode_t)*node;
  if (record == nullptr) {
    // Added to the graph directly, not captured on the stream: the stream's frontier stays, so
    // later captured work does not wait for the record.
    WEFT_CUDA_TRY(cudaGraphAddEventRecordNode(&record, graph, nullptr, 0, event));
    *node = record;
  } else {
    size_t n = 0;
    WEFT_CUDA_TRY(cudaGraphNodeGetDependencies(record, nullptr, nullptr, &n));
    std::vector<cudaGraphNode_t> old(n);
    if (n > 0) WEFT_CUDA_TRY(cudaGraphNodeGetDependencies(record, old.data(), nullptr, &n));
    for (size_t i = 0; i < n; ++i) WEFT_CUDA_TRY(cudaGraphRemoveDependencies(graph, &old[i], &record, nullptr, 1));
  }
  for (GraphNode a : after) {
    const cudaGraphNode_t from = (cudaGraphNode_t)a;
    WEFT_CUDA_TRY(cudaGraphAddDependencies(graph, &from, &record, nullptr, 1));
  }
  return ncclSuccess;
}

Status captureOnGraphGone(Stream stream, HostFn release, void* arg) {
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* frontier = nullptr;
  size_t count = 0;
  WEFT_TRY(captureState(stream, &graph, &frontier, &count));
  cudaUserObject_t object = nullptr;
  WEFT_CUDA_TRY(cudaUserObjectCreate(&object, arg, release, 1, cudaUserObjectNoDestructorSync));
  // Should the graph not take it, the object is left alive rather than released: releasing would
  // call `release` although the graph may still use what it guards.
  WEFT_CUDA_TRY(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove));
  return ncclSuccess;
}

#endif

RelaxedCaptureMode::RelaxedCaptureMode() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
    (void)cudaGetLastError();
    mode = cudaStreamCaptureModeRelaxed;
  }
  saved_ = (int)mode;
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  cudaStreamCaptureMode mode = (cudaStreamCaptureMode)saved_;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace weft::runtime
