// Pieces shared by cuMem allocation (shareable_alloc.cc) and import (ipc_mem.cc). Internal to
// src/runtime/.
#pragma once

#include <cuda.h>

#include <vector>

#include "core/status.h"
#include "runtime/driver_api.h"

namespace weft::runtime::cumem {

// Properties of a pinned allocation on runtime device `device`, exportable as a POSIX fd, marked
// GPUDirect-RDMA capable when the device supports that for cuMem memory.
[[nodiscard]] Status allocationProp(const DriverApi& api, int device, CUmemAllocationProp* out);

[[nodiscard]] Status granularity(const DriverApi& api, const CUmemAllocationProp& prop, bool recommended,
                                 size_t* out);

// Grants read/write access to [va, va+bytes) to each runtime device in `devices`.
[[nodiscard]] Status setAccess(const DriverApi& api, CUdeviceptr va, size_t bytes, const std::vector<int>& devices);

// Undoes a mapping in reverse order of acquisition (mapping, address range, physical memory); parts
// never acquired are 0/false and skipped. Failures warn: this runs in destructors.
void releaseMapping(const DriverApi& api, CUdeviceptr va, size_t bytes, bool mapped,
                    CUmemGenericAllocationHandle handle);

constexpr size_t roundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace weft::runtime::cumem
