// One virtual address range holding the buffers of several ranks side by side, `stride` bytes
// apart: what NCCL's device API expects of a window (its device code finds rank i's part at
// base + i * stride, stride a multiple of 4 GiB). Each rank's cuMem allocation is mapped into its
// slot: peers' through the fd they sent, this rank's own through its allocation handle.
// CUDA only (cuMem); a HIP build answers ncclInvalidUsage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace weft::runtime {

class FlatMapping {
 public:
  FlatMapping() = default;
  FlatMapping(const FlatMapping&) = delete;
  FlatMapping& operator=(const FlatMapping&) = delete;
  ~FlatMapping();  // unmaps every slot and frees the range

  // Reserves slots * stride bytes on the current device (stride: a multiple of the granularity).
  [[nodiscard]] Status reserve(int slots, size_t stride);
  // Maps the allocation an owner exported as `fd` (allocBytes long) at slot * stride + at.
  [[nodiscard]] Status mapFd(int slot, size_t at, int fd, size_t allocBytes, const char* from);
  // Maps this process's own cuMem allocation starting at `allocBase` the same way.
  [[nodiscard]] Status mapOwn(int slot, size_t at, const void* allocBase, size_t allocBytes);
  char* base() const { return reinterpret_cast<char*>((uintptr_t)va_); }
  // The allocation granularity of the current device (what `at` and the stride must be multiples of).
  [[nodiscard]] static Status granularity(size_t* out);

 private:
  [[nodiscard]] Status mapHandle(int slot, size_t at, unsigned long long handle, size_t allocBytes);
  struct Piece {
    unsigned long long va = 0;
    size_t bytes = 0;
    unsigned long long handle = 0;
  };
  unsigned long long va_ = 0;
  size_t reserved_ = 0;
  size_t stride_ = 0;
  int slots_ = 0;
  int device_ = -1;
  std::vector<Piece> pieces_;
};

}  // namespace weft::runtime
