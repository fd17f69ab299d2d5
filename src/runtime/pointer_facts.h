// What the GPU driver knows about a user's pointer, for the argument checks of the collective
// calls (core/buffer_checks.h): which memory it is, and the allocation around it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "runtime/gpu.h"

namespace weft::runtime {

enum class MemoryKind {
  kUnknownToDriver,  // pageable host memory, a freed allocation, a stray address, or (inside a CUDA
                     // graph capture) an allocation the graph makes when it runs
  kDevice,           // cudaMalloc, cudaMallocAsync, cuMem mappings, ncclMemAlloc
  kManaged,          // cudaMallocManaged: reachable from every GPU
  kHostPinned,       // cudaHostAlloc / cudaHostRegister: mapped into the GPU's address space
};

struct PointerFacts {
  MemoryKind kind = MemoryKind::kUnknownToDriver;
  int device = -1;        // kDevice: the GPU that holds it
  uintptr_t rangeBegin = 0;  // the allocation (for cuMem memory: the address reservation) the
  size_t rangeBytes = 0;     // pointer lies in; 0 bytes when the driver does not say
};

// One driver query (~0.1 us on an H200). Fails only when the query itself fails (no driver).
[[nodiscard]] Status pointerFacts(const void* ptr, PointerFacts* out);

// Whether kernels on `device` may read pageable host memory (HMM or ATS systems).
[[nodiscard]] Status pageableMemoryAccess(int device, bool* out);

}  // namespace weft::runtime
