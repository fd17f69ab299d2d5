// The runtime facade (gpu.h) over the CUDA runtime; the HIP build compiles this same file over the
// HIP runtime through the name mapping of gpu_api.h (differences beyond names: #if WEFT_GPU_HIP).
#include "runtime/gpu.h"

#include <cctype>
#include <cstdio>
#include <cstring>

#include "core/log.h"
#include "runtime/cuda_check.h"

namespace weft::runtime {
namespace detail {

const char* cudaErrorHint(cudaError_t error) {
  switch (error) {
    case cudaErrorInsufficientDriver:
      return "The NVIDIA driver (libcuda.so.1) is missing or older than this CUDA runtime needs: "
             "check that `nvidia-smi` works and that the driver supports this CUDA version.";
#if !defined(WEFT_GPU_HIP)
    case cudaErrorStubLibrary:
      return "The libcuda.so found is the toolkit's stub, not the driver: remove the CUDA stubs "
             "directory from LD_LIBRARY_PATH.";
#endif
    case cudaErrorNoDevice:
      return "No GPU is visible to this process: check CUDA_VISIBLE_DEVICES and `nvidia-smi`.";
    case cudaErrorInvalidDevice:
      return "The device ordinal is out of range: check CUDA_VISIBLE_DEVICES and the device passed to NCCL.";
#if !defined(WEFT_GPU_HIP)
    case cudaErrorDevicesUnavailable:
      return "The GPU is busy or in exclusive-process compute mode and owned by another process.";
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return "The user-mode driver does not match the kernel module: reinstall the driver or the "
             "CUDA compatibility package.";
    case cudaErrorSystemNotReady:
      return "The GPU system is not ready (e.g. nvidia-fabricmanager not running on NVSwitch systems).";
#endif
    case cudaErrorMemoryAllocation:
      return "The GPU is out of memory: free memory in the application or lower NCCL_BUFFSIZE / channel counts.";
    case cudaErrorPeerAccessUnsupported:
      return "These two GPUs cannot access each other's memory directly (no P2P path); "
             "NCCL_P2P_DISABLE=1 uses host memory instead.";
#if defined(WEFT_GPU_HIP)
    case hipErrorNoBinaryForGpu:
      return "This library was not built for this GPU architecture: rebuild with WEFT_HIP_ARCHS including it.";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "A kernel faulted; the GPU context is unusable and the process must restart.";
#else
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "This library was not built for this GPU architecture: rebuild with WEFT_CUDA_ARCHS including it.";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
      return "A kernel faulted; the GPU context is unusable and the process must restart. "
             "Run with compute-sanitizer to find the faulting kernel.";
#endif
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
      return "An operation not allowed during CUDA graph capture was issued on a capturing stream.";
#if !defined(WEFT_GPU_HIP)
    case cudaErrorCudartUnloading:
      return "The CUDA runtime is shutting down (call during process exit): destroy communicators before exit.";
#endif
    default:
      return "";
  }
}

Status reportCudaError(cudaError_t error, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear it; a sticky error stays sticky, but no later check trips on this one
  char versions[96] = "";
#if defined(WEFT_GPU_HIP)
  if (error == cudaErrorInsufficientDriver) {
    int drv = 0, rt = 0;
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    snprintf(versions, sizeof(versions), " [HIP driver version %d, runtime version %d]", drv, rt);
  }
#else
  if (error == cudaErrorInsufficientDriver || error == cudaErrorStubLibrary) {
    int drv = 0, rt = 0;
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    if (drv == 0) {
      snprintf(versions, sizeof(versions), " [no NVIDIA driver found; this runtime is CUDA %d.%d]", rt / 1000,
               (rt % 1000) / 10);
    } else {
      snprintf(versions, sizeof(versions), " [the driver supports CUDA %d.%d; this runtime is CUDA %d.%d]",
               drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
    }
  }
#endif
  const char* hint = cudaErrorHint(error);
  log::write(log::Level::Warn, log::kAll, file, line, WEFT_GPU_API_NAME " call %s failed: %s (%s)%s%s%s", call,
             cudaGetErrorName(error), cudaGetErrorString(error), versions, hint[0] ? ". " : "", hint);
  return ncclUnhandledCudaError;
}

}  // namespace detail

// ---- Devices ---------------------------------------------------------------------------------

Status deviceCount(int* count) {
  WEFT_CHECK_ARG(count != nullptr, "deviceCount: count is NULL");
  int n = 0;
  WEFT_CUDA_TRY(cudaGetDeviceCount(&n));
  *count = n;
  return ncclSuccess;
}

Status getDevice(int* device) {
  WEFT_CHECK_ARG(device != nullptr, "getDevice: device is NULL");
  int d = -1;
  WEFT_CUDA_TRY(cudaGetDevice(&d));
  log::setThreadDevice(d);
  *device = d;
  return ncclSuccess;
}

Status setDevice(int device) {
  WEFT_CUDA_TRY(cudaSetDevice(device));
  log::setThreadDevice(device);
  return ncclSuccess;
}

Status deviceProps(int device, DeviceProps* out) {
  WEFT_CHECK_ARG(out != nullptr, "deviceProps: out is NULL");
  DeviceProps p;
  cudaDeviceProp prop;
  WEFT_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  snprintf(p.name, sizeof(p.name), "%s", prop.name);
  p.smCount = prop.multiProcessorCount;
  p.ccMajor = prop.major;
  p.ccMinor = prop.minor;
  p.totalMemBytes = prop.totalGlobalMem;
#if defined(WEFT_GPU_HIP)
  p.maxSmemPerBlockOptin = prop.maxSharedMemoryPerMultiProcessor;  // HIP 5.2 has no opt-in limit: LDS per CU
#else
  p.maxSmemPerBlockOptin = prop.sharedMemPerBlockOptin;
#endif
  WEFT_CUDA_TRY(cudaDeviceGetPCIBusId(p.busId, sizeof(p.busId), device));
  // CUDA prints hex digits in upper case; NCCL, sysfs and topology files use lower case.
  for (char* c = p.busId; *c; ++c) *c = (char)tolower((unsigned char)*c);
  *out = p;
  return ncclSuccess;
}

Status canAccessPeer(int device, int peer, bool* can) {
  WEFT_CHECK_ARG(can != nullptr, "canAccessPeer: can is NULL");
  int v = 0;
  WEFT_CUDA_TRY(cudaDeviceCanAccessPeer(&v, device, peer));
  *can = v != 0;
  return ncclSuccess;
}

Status enablePeerAccess(int peer) {
  int current = -1;
  WEFT_CUDA_TRY(cudaGetDevice(&current));
  if (current == peer) return ncclSuccess;  // ranks sharing a GPU: nothing to enable (CUDA refuses it)
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // an expected answer, not an error to leave behind
    return ncclSuccess;
  }
  WEFT_CUDA_TRY(e);
  return ncclSuccess;
}

Status deviceSynchronize() {
  WEFT_CUDA_TRY(cudaDeviceSynchronize());
  return ncclSuccess;
}

Status memGetInfo(size_t* freeBytes, size_t* totalBytes) {
  WEFT_CUDA_TRY(cudaMemGetInfo(freeBytes, totalBytes));
  return ncclSuccess;
}

Status driverVersion(int* version) {
  WEFT_CUDA_TRY(cudaDriverGetVersion(version));
  return ncclSuccess;
}

Status runtimeVersion(int* version) {
  WEFT_CUDA_TRY(cudaRuntimeGetVersion(version));
  return ncclSuccess;
}

// ---- Memory ----------------------------------------------------------------------------------

Status deviceMalloc(void** ptr, size_t bytes) {
  WEFT_CHECK_ARG(ptr != nullptr, "deviceMalloc: ptr is NULL");
  WEFT_CUDA_TRY(cudaMalloc(ptr, bytes));
  WEFT_INFO(log::kAlloc, "cudaMalloc %zu bytes at %p", bytes, *ptr);
  return ncclSuccess;
}

Status deviceFree(void* ptr) {
  WEFT_CUDA_TRY(cudaFree(ptr));
  return ncclSuccess;
}

namespace {

// Runs `op` on a non-blocking stream of its own and waits for it. Not on the legacy default
// stream, which waits for (and holds up) the work of every blocking stream of the device (a stuck
// kernel of another communicator, or the user's); and done when the call returns: cudaMemset on
// device memory may return before it lands, and an abort that freed the memory right after faulted
// it (the abort storm, session 25).
template <typename Op>
Status onPrivateStream(Op op) {
  Stream stream = nullptr;
  WEFT_TRY(streamCreate(&stream, 0));
  cudaError_t e = op(stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  WEFT_CUDA_TRY(e);
  return ncclSuccess;
}

}  // namespace

Status deviceMemset(void* ptr, int value, size_t bytes) {
  return onPrivateStream([&](Stream s) { return cudaMemsetAsync(ptr, value, bytes, s); });
}

Status deviceMemsetAsync(void* ptr, int value, size_t bytes, Stream stream) {
  WEFT_CUDA_TRY(cudaMemsetAsync(ptr, value, bytes, stream));
  return ncclSuccess;
}

Status deviceMemcpy(void* dst, const void* src, size_t bytes) {
  return onPrivateStream([&](Stream s) { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s); });
}

Status deviceMemcpyAsync(void* dst, const void* src, size_t bytes, Stream stream) {
  WEFT_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  return ncclSuccess;
}

Status hostAllocMapped(void** ptr, size_t bytes) {
  WEFT_CHECK_ARG(ptr != nullptr, "hostAllocMapped: ptr is NULL");
#if defined(WEFT_GPU_HIP)
  // Coherent explicitly: kernels poll this memory (work FIFO, flags) while the host writes it, and
  // the default depends on HIP_HOST_COHERENT.
  WEFT_CUDA_TRY(hipHostMalloc(ptr, bytes, hipHostMallocMapped | hipHostMallocPortable | hipHostMallocCoherent));
#else
  WEFT_CUDA_TRY(cudaHostAlloc(ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
#endif
  WEFT_INFO(log::kAllocHost, "cudaHostAlloc %zu bytes at %p", bytes, *ptr);
  return ncclSuccess;
}

Status hostFree(void* ptr) {
  WEFT_CUDA_TRY(cudaFreeHost(ptr));
  return ncclSuccess;
}

Status hostDevicePointer(void* hostPtr, void** devicePtr) {
  WEFT_CHECK_ARG(devicePtr != nullptr, "hostDevicePointer: devicePtr is NULL");
  WEFT_CUDA_TRY(cudaHostGetDevicePointer(devicePtr, hostPtr, 0));
  return ncclSuccess;
}

Status hostRegisterMapped(void* ptr, size_t bytes, void** devicePtr) {
  WEFT_CHECK_ARG(ptr != nullptr && devicePtr != nullptr, "hostRegisterMapped: ptr or devicePtr is NULL");
  WEFT_CUDA_TRY(cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  if (cudaHostGetDevicePointer(devicePtr, ptr, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaHostUnregister(ptr);
    WEFT_WARN("cudaHostGetDevicePointer failed for %zu registered bytes at %p", bytes, ptr);
    return ncclUnhandledCudaError;
  }
  WEFT_INFO(log::kAllocHost, "cudaHostRegister %zu bytes at %p (device address %p)", bytes, ptr, *devicePtr);
  return ncclSuccess;
}

Status hostUnregister(void* ptr) {
  WEFT_CUDA_TRY(cudaHostUnregister(ptr));
  return ncclSuccess;
}

Status pointerDevice(const void* ptr, int* device) {
  WEFT_CHECK_ARG(device != nullptr, "pointerDevice: device is NULL");
#if defined(WEFT_GPU_HIP)
  hipPointerAttribute_t attr;
  WEFT_CUDA_TRY(hipPointerGetAttributes(&attr, ptr));
  if (attr.memoryType != hipMemoryTypeDevice && !attr.isManaged) {
    WEFT_WARN("pointer %p is not GPU memory (memory type %d); expected memory from hipMalloc or ncclMemAlloc",
              ptr, (int)attr.memoryType);
    return ncclInvalidArgument;
  }
#else
  cudaPointerAttributes attr;
  WEFT_CUDA_TRY(cudaPointerGetAttributes(&attr, ptr));
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    WEFT_WARN("pointer %p is not GPU memory (memory type %d); expected memory from cudaMalloc or ncclMemAlloc",
              ptr, (int)attr.type);
    return ncclInvalidArgument;
  }
#endif
  *device = attr.device;
  return ncclSuccess;
}

// ---- Streams and events ----------------------------------------------------------------------

Status streamPriorityRange(int* least, int* greatest) {
  WEFT_CUDA_TRY(cudaDeviceGetStreamPriorityRange(least, greatest));
  return ncclSuccess;
}

Status streamCreate(Stream* out, int priority) {
  WEFT_CHECK_ARG(out != nullptr, "streamCreate: out is NULL");
  WEFT_CUDA_TRY(cudaStreamCreateWithPriority(out, cudaStreamNonBlocking, priority));
  return ncclSuccess;
}

Status streamDestroy(Stream stream) {
  WEFT_CUDA_TRY(cudaStreamDestroy(stream));
  return ncclSuccess;
}

Status streamQuery(Stream stream, bool* done) {
  cudaError_t e = cudaStreamQuery(stream);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    *done = false;
    return ncclSuccess;
  }
  WEFT_CUDA_TRY(e);
  *done = true;
  return ncclSuccess;
}

Status streamSynchronize(Stream stream) {
  WEFT_CUDA_TRY(cudaStreamSynchronize(stream));
  return ncclSuccess;
}

Status streamWaitEvent(Stream stream, Event event) {
  WEFT_CUDA_TRY(cudaStreamWaitEvent(stream, event, 0));
  return ncclSuccess;
}

Status eventCreate(Event* out) {
  WEFT_CHECK_ARG(out != nullptr, "eventCreate: out is NULL");
  WEFT_CUDA_TRY(cudaEventCreateWithFlags(out, cudaEventDisableTiming));
  return ncclSuccess;
}

Status eventDestroy(Event event) {
  WEFT_CUDA_TRY(cudaEventDestroy(event));
  return ncclSuccess;
}

Status eventRecord(Event event, Stream stream) {
  WEFT_CUDA_TRY(cudaEventRecord(event, stream));
  return ncclSuccess;
}

Status eventQuery(Event event, bool* done) {
  cudaError_t e = cudaEventQuery(event);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    *done = false;
    return ncclSuccess;
  }
  WEFT_CUDA_TRY(e);
  *done = true;
  return ncclSuccess;
}

Status eventSynchronize(Event event) {
  WEFT_CUDA_TRY(cudaEventSynchronize(event));
  return ncclSuccess;
}

// ---- Kernels and host functions --------------------------------------------------------------

Status launchKernel(const void* func, Dim3 grid, Dim3 block, void** args, size_t smemBytes, Stream stream,
                    bool overlapPrevious) {
#if !defined(WEFT_GPU_HIP)
  if (overlapPrevious) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smemBytes;
    config.stream = stream;
    cudaLaunchAttribute attribute = {};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    WEFT_CUDA_TRY(cudaLaunchKernelExC(&config, func, args));
    return ncclSuccess;
  }
#else
  (void)overlapPrevious;
#endif
  WEFT_CUDA_TRY(cudaLaunchKernel(func, grid, block, args, smemBytes, stream));
  return ncclSuccess;
}

Status loadKernel(const void* func, size_t* localBytesPerThread) {
  cudaFuncAttributes attributes{};
  WEFT_CUDA_TRY(cudaFuncGetAttributes(&attributes, func));
  *localBytesPerThread = attributes.localSizeBytes;
  return ncclSuccess;
}

Status reserveStack(size_t bytes) {
#if defined(WEFT_GPU_HIP)
  (void)bytes;  // not on ROCm: HIP is compile-only here, so whether its scratch growth waits is unknown
#else
  size_t current = 0;
  WEFT_CUDA_TRY(cudaDeviceGetLimit(&current, cudaLimitStackSize));
  if (bytes <= current) {
    WEFT_INFO(log::kInit, "weft's kernels need at most %zu bytes of stack per thread, within the limit of %zu", bytes,
              current);
    return ncclSuccess;
  }
  WEFT_CUDA_TRY(cudaDeviceSetLimit(cudaLimitStackSize, bytes));
  WEFT_INFO(log::kInit, "per-thread stack limit raised from %zu to %zu bytes for weft's kernels", current, bytes);
#endif
  return ncclSuccess;
}

Status funcSetMaxDynamicSmem(const void* func, int bytes) {
  WEFT_CUDA_TRY(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  return ncclSuccess;
}

#if defined(WEFT_GPU_HIP)
namespace {
// ROCm 5.2's libamdhip64 declares hipLaunchHostFunc but does not export it; stream callbacks do the
// same job outside graph capture (they cannot be captured: a captured launch gets an error).
struct HostCall {
  HostFn fn;
  void* arg;
};
void runHostCall(hipStream_t, hipError_t, void* data) {
  HostCall* call = static_cast<HostCall*>(data);
  call->fn(call->arg);
  delete call;
}
}  // namespace

Status launchHostFunc(Stream stream, HostFn fn, void* arg) {
  HostCall* call = new HostCall{fn, arg};
  hipError_t e = hipStreamAddCallback(stream, runHostCall, call, 0);
  if (e != hipSuccess) delete call;
  WEFT_CUDA_TRY(e);
  return ncclSuccess;
}
#else
Status launchHostFunc(Stream stream, HostFn fn, void* arg) {
  WEFT_CUDA_TRY(cudaLaunchHostFunc(stream, fn, arg));
  return ncclSuccess;
}
#endif

// ---- RAII ------------------------------------------------------------------------------------

Status ScopedDevice::set(int device) {
  if (saved_ < 0) {
    WEFT_TRY(getDevice(&saved_));
    current_ = saved_;
  }
  if (device == current_) return ncclSuccess;
  WEFT_TRY(setDevice(device));
  current_ = device;
  return ncclSuccess;
}

ScopedDevice::~ScopedDevice() {
  if (current_ != saved_) (void)setDevice(saved_);  // a failure was logged; a destructor cannot do more
}

void freeDeviceQuiet(void* ptr) { (void)deviceFree(ptr); }
void freeHostQuiet(void* ptr) { (void)hostFree(ptr); }
void destroyStreamQuiet(Stream stream) { (void)streamDestroy(stream); }
void destroyEventQuiet(Event event) { (void)eventDestroy(event); }

}  // namespace weft::runtime
