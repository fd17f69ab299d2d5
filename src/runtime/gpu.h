// The GPU runtime facade: the only door from weft to the CUDA runtime and driver (the HIP build
// provides this same header over hip*: gpu_api.h). Every call returns a Status; a failed GPU call is logged once
// with the call text, the CUDA error name and text and, where one is known, a remedy, and answers
// ncclUnhandledCudaError. Callers use the aliases below, never cuda* names.
//
// The driver API (cuMem*, ...) is reached through entry points that the runtime hands out
// (driver_api.h), so the library does not link libcuda and loads on machines without a driver.
#pragma once

#if defined(WEFT_GPU_HIP)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>  // only for the handle types aliased below and dim3
#else
#include <cuda_runtime_api.h>  // only for the handle types aliased below and dim3
#endif

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"

namespace weft::runtime {

#if defined(WEFT_GPU_HIP)
using Stream = hipStream_t;
using Event = hipEvent_t;
#else
using Stream = cudaStream_t;
using Event = cudaEvent_t;
#endif
using Dim3 = dim3;
using HostFn = void (*)(void* arg);

// ---------------------------------------------------------------------------------------------
// Devices

// Number of visible devices. Without a usable driver this is an error (with the reason), not 0.
[[nodiscard]] Status deviceCount(int* count);
// The calling thread's current device; both also tell the logger ("[dev]" in log lines).
[[nodiscard]] Status getDevice(int* device);
[[nodiscard]] Status setDevice(int device);

struct DeviceProps {
  char name[256] = "";
  char busId[32] = "";  // lowercase "0000:xx:yy.0", as NCCL prints and as sysfs names it
  int smCount = 0;
  int ccMajor = 0, ccMinor = 0;
  size_t totalMemBytes = 0;
  size_t maxSmemPerBlockOptin = 0;  // the most dynamic shared memory a kernel can opt into
};
[[nodiscard]] Status deviceProps(int device, DeviceProps* out);

// Can `device` map memory that lives on `peer`?
[[nodiscard]] Status canAccessPeer(int device, int peer, bool* can);
// Lets the current device access `peer`'s memory; "already enabled" and `peer` being the current
// device count as success.
[[nodiscard]] Status enablePeerAccess(int peer);
[[nodiscard]] Status deviceSynchronize();
[[nodiscard]] Status memGetInfo(size_t* freeBytes, size_t* totalBytes);
// Driver version as CUDA encodes it (13000 = 13.0); 0 when no driver is installed.
[[nodiscard]] Status driverVersion(int* version);
[[nodiscard]] Status runtimeVersion(int* version);

// ---------------------------------------------------------------------------------------------
// Memory (on the current device). deviceMemcpy* use the unified address space (any direction).
// deviceMemset and deviceMemcpy are done when they return, and never use the legacy default stream.

[[nodiscard]] Status deviceMalloc(void** ptr, size_t bytes);
[[nodiscard]] Status deviceFree(void* ptr);
[[nodiscard]] Status deviceMemset(void* ptr, int value, size_t bytes);
[[nodiscard]] Status deviceMemsetAsync(void* ptr, int value, size_t bytes, Stream stream);
[[nodiscard]] Status deviceMemcpy(void* dst, const void* src, size_t bytes);
[[nodiscard]] Status deviceMemcpyAsync(void* dst, const void* src, size_t bytes, Stream stream);
// Pinned host memory, mapped into every device's address space and usable from every context.
[[nodiscard]] Status hostAllocMapped(void** ptr, size_t bytes);
[[nodiscard]] Status hostFree(void* ptr);
[[nodiscard]] Status hostDevicePointer(void* hostPtr, void** devicePtr);
// Pins existing host memory (e.g. a shared-memory mapping) and maps it into every device's address
// space; *devicePtr is where kernels of the current device reach it. hostUnregister undoes it.
[[nodiscard]] Status hostRegisterMapped(void* ptr, size_t bytes, void** devicePtr);
[[nodiscard]] Status hostUnregister(void* ptr);
// The device a device (or managed) pointer belongs to.
[[nodiscard]] Status pointerDevice(const void* ptr, int* device);

// ---------------------------------------------------------------------------------------------
// Streams and events

[[nodiscard]] Status streamPriorityRange(int* least, int* greatest);
// A non-blocking stream (no implicit sync with the legacy default stream). Lower = higher priority.
[[nodiscard]] Status streamCreate(Stream* out, int priority = 0);
[[nodiscard]] Status streamDestroy(Stream stream);
// *done = all work queued so far has finished.
[[nodiscard]] Status streamQuery(Stream stream, bool* done);
[[nodiscard]] Status streamSynchronize(Stream stream);
[[nodiscard]] Status streamWaitEvent(Stream stream, Event event);

// Events without timing (cheaper to record and wait on).
[[nodiscard]] Status eventCreate(Event* out);
[[nodiscard]] Status eventDestroy(Event event);
[[nodiscard]] Status eventRecord(Event event, Stream stream);
[[nodiscard]] Status eventQuery(Event event, bool* done);
[[nodiscard]] Status eventSynchronize(Event event);

enum class CaptureStatus { kNone, kActive, kInvalidated };
struct CaptureInfo {
  CaptureStatus status = CaptureStatus::kNone;
  unsigned long long graphId = 0;  // unique per capture sequence while status is kActive
};
// Whether work enqueued on `stream` now would be captured into a CUDA graph.
[[nodiscard]] Status streamCaptureInfo(Stream stream, CaptureInfo* out);

// The calls below work on the graph being captured on `stream` (graph_capture.cc).
using GraphNode = void*;  // a node of the graph being captured (opaque)
// The nodes that work captured next on `stream` would depend on.
[[nodiscard]] Status captureFrontier(Stream stream, std::vector<GraphNode>* nodes);
// Work captured next on `stream` also depends on `nodes` (of the same graph).
[[nodiscard]] Status captureAddDependencies(Stream stream, const std::vector<GraphNode>& nodes);
// Where the runtime lacks external event nodes and graph user objects (HIP 5.2) the calls from
// here on answer ncclInvalidUsage; captureNodesSupported() says which.
bool captureNodesSupported();
// Whether the graph being captured on `stream` may hold event record and wait nodes. CUDA refuses
// them inside the body of a conditional node (cudaGraphInstantiate then fails with "invalid
// argument"), and no call says that a graph is such a body; *allowed is false when it is one, or
// may be (graph_capture.cc says how it is told).
[[nodiscard]] Status captureAllowsEventNodes(Stream stream, bool* allowed);
// Work captured after this on `stream` waits, each time the graph runs, for what `event`'s latest
// record covers when the graph is launched (an external event wait node).
[[nodiscard]] Status captureWaitEvent(Stream stream, Event event);
// A node recording `event` that depends on exactly `after`, on a side branch: nothing captured
// later waits for it. *node == nullptr: a new node, returned in *node; otherwise that node's
// dependencies are replaced by `after`.
[[nodiscard]] Status captureRecordEventAfter(Stream stream, Event event, const std::vector<GraphNode>& after,
                                             GraphNode* node);
// release(arg) is called (on a CUDA thread; it must not call CUDA) once the graph and every
// executable graph made from it are destroyed and their launches done. On failure it is never called.
[[nodiscard]] Status captureOnGraphGone(Stream stream, HostFn release, void* arg);

// ---------------------------------------------------------------------------------------------
// Kernels and host functions

// overlapPrevious: programmatic dependent launch where the GPU has it (the kernel must call
// griddepcontrol.wait before it reads what earlier work of the stream wrote).
[[nodiscard]] Status launchKernel(const void* func, Dim3 grid, Dim3 block, void** args, size_t smemBytes,
                                  Stream stream, bool overlapPrevious = false);
// Allows `func` to be launched with up to `bytes` of dynamic shared memory (beyond the 48 KiB default).
[[nodiscard]] Status funcSetMaxDynamicSmem(const void* func, int bytes);
// Loads `func` into the current device's context now and returns the local memory (stack) each
// of its threads needs. Both are what a first launch would otherwise do, and either may wait for
// every kernel running in the context to finish (lazy module loading; CUDA growing the per-thread
// stack for a kernel that needs more than the current limit): a deadlock when a kernel already
// running there waits for the one being launched (ranks of one process sharing a GPU).
[[nodiscard]] Status loadKernel(const void* func, size_t* localBytesPerThread);
// Raises the current device's per-thread stack limit to at least `bytes` (never lowers it).
[[nodiscard]] Status reserveStack(size_t bytes);
// Runs fn(arg) on a runtime thread once the stream's earlier work is done; fn must not call CUDA.
[[nodiscard]] Status launchHostFunc(Stream stream, HostFn fn, void* arg);

// ---------------------------------------------------------------------------------------------
// RAII

// While alive, lets the calling thread make allocation calls (which CUDA forbids while a stream
// capture in global or thread-local mode is active); the previous capture mode comes back after.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  int saved_;
};

// Switches the calling thread to another device and back on destruction. set() may be called
// again (one guard for a group's several GPUs): it calls the runtime only to change the device.
class ScopedDevice {
 public:
  ScopedDevice() = default;
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice();
  [[nodiscard]] Status set(int device);

 private:
  int saved_ = -1;    // the thread's device before the first set()
  int current_ = -1;  // the device the last set() left current
};

// Frees that cannot report: they warn on failure. Used by Owned<> below.
void freeDeviceQuiet(void* ptr);
void freeHostQuiet(void* ptr);
void destroyStreamQuiet(Stream stream);
void destroyEventQuiet(Event event);

// Owns one runtime handle; move-only. `out()` is for the create call: Status s = streamCreate(o.out()).
template <typename Handle, void (*Release)(Handle)>
class Owned {
 public:
  Owned() = default;
  explicit Owned(Handle h) : h_(h) {}
  Owned(Owned&& o) noexcept : h_(o.release()) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  Handle get() const { return h_; }
  explicit operator bool() const { return h_ != Handle{}; }
  Handle* out() {
    reset();
    return &h_;
  }
  Handle release() { return std::exchange(h_, Handle{}); }
  void reset(Handle h = Handle{}) {
    if (h_ != Handle{}) Release(h_);
    h_ = h;
  }

 private:
  Handle h_{};
};

using DeviceBuffer = Owned<void*, &freeDeviceQuiet>;
using PinnedBuffer = Owned<void*, &freeHostQuiet>;
using OwnedStream = Owned<Stream, &destroyStreamQuiet>;
using OwnedEvent = Owned<Event, &destroyEventQuiet>;

}  // namespace weft::runtime
