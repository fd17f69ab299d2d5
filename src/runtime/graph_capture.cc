// The runtime facade's stream-capture calls (gpu.h): what a launch needs to know and to add when
// its stream is being captured into a CUDA graph. The HIP build compiles this file too (gpu_api.h
// names); ROCm 5.2 has neither external event waits nor graph user objects, so there the graph
// node calls report themselves unsupported (its capture-dependency calls would allow the
// forked-stream ordering; not done).
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

#if defined(WEFT_GPU_HIP)

bool captureNodesSupported() { return false; }

namespace {
Status unsupported(const char* call) {
  WEFT_WARN("%s: graph nodes of this kind are not supported by this HIP runtime", call);
  return ncclInvalidUsage;
}
}  // namespace

Status captureWaitEvent(Stream, Event) { return unsupported("captureWaitEvent"); }
Status captureFrontier(Stream, std::vector<GraphNode>*) { return unsupported("captureFrontier"); }
Status captureAddDependencies(Stream, const std::vector<GraphNode>&) { return unsupported("captureAddDependencies"); }
Status captureRecordEventAfter(Stream, Event, const std::vector<GraphNode>&, GraphNode*) {
  return unsupported("captureRecordEventAfter");
}
Status captureOnGraphGone(Stream, HostFn, void*) { return unsupported("captureOnGraphGone"); }

#else

namespace {

// The graph being captured on `stream` and the nodes the next captured work would depend on.
Status captureState(Stream stream, cudaGraph_t* graph, const cudaGraphNode_t** nodes, size_t* count) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphEdgeData* edges = nullptr;  // asked for so that annotated edges are no lossy-query error
  WEFT_CUDA_TRY(cudaStreamGetCaptureInfo(stream, &status, nullptr, graph, nodes, &edges, count));
  if (status != cudaStreamCaptureStatusActive) {
    WEFT_WARN("stream %p: its capture %s while graph nodes were being added", (void*)stream,
              status == cudaStreamCaptureStatusInvalidated ? "was invalidated" : "has ended");
    return ncclInternalError;
  }
  return ncclSuccess;
}

}  // namespace

bool captureNodesSupported() { return true; }

Status captureWaitEvent(Stream stream, Event event) {
  WEFT_CUDA_TRY(cudaStreamWaitEvent(stream, event, cudaEventWaitExternal));
  return ncclSuccess;
}

Status captureFrontier(Stream stream, std::vector<GraphNode>* nodes) {
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* frontier = nullptr;
  size_t count = 0;
  WEFT_TRY(captureState(stream, &graph, &frontier, &count));
  nodes->clear();
  for (size_t i = 0; i < count; ++i) nodes->push_back((GraphNode)frontier[i]);
  return ncclSuccess;
}

Status captureAddDependencies(Stream stream, const std::vector<GraphNode>& nodes) {
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* frontier = nullptr;
  size_t count = 0;
  WEFT_TRY(captureState(stream, &graph, &frontier, &count));
  std::vector<cudaGraphNode_t> deps;  // only new ones: a node must not depend twice on another
  for (GraphNode n : nodes) {
    const cudaGraphNode_t node = (cudaGraphNode_t)n;
    if (std::find(frontier, frontier + count, node) == frontier + count) deps.push_back(node);
  }
  if (deps.empty()) return ncclSuccess;
  WEFT_CUDA_TRY(cudaStreamUpdateCaptureDependencies(stream, deps.data(), nullptr, deps.size(),
                                                    cudaStreamAddCaptureDependencies));
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
