// A POSIX shared-memory segment (a file of /dev/shm mapped into each process that opens it): the
// host memory of the SHM transport, for GPU pairs without peer-to-peer access (NCCL_P2P_DISABLE=1,
// GPUs that cannot reach each other, such as PCIe cards under different root complexes).
//
// The creator reserves the whole size at once (posix_fallocate), so a /dev/shm too small for it
// (Docker's default is 64 MiB) is an error at creation that says how to fix it, instead of a
// SIGBUS when a kernel or thread first touches a page past the end of what tmpfs could give.
// Peers open the segment by the name in its descriptor (ShmDesc), which they received from the
// network and so check first (magic, a name weft could have made, the size they expect). The
// creator removes the name once every peer has opened it (or on destruction): the memory lives as
// long as a mapping of it, and no name is left behind in /dev/shm by a process that dies later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace weft::transport::shm {

constexpr uint32_t kShmDescMagic = 0x4d485357u;  // "WSHM"
constexpr size_t kShmNameBytes = 48;              // with its terminating NUL

// What a peer needs to open a segment (sent through the bootstrap).
struct ShmDesc {
  uint32_t magic;
  uint32_t pad;
  uint64_t bytes;
  char name[kShmNameBytes];  // "/weft-...", NUL-terminated
};
static_assert(sizeof(ShmDesc) == 64, "ShmDesc is a wire format");

// A descriptor from a peer is usable: magic, a NUL-terminated name of the form create() makes
// ("/weft-", then only letters, digits, '-' and '.'), a size above zero. The error names `from`.
[[nodiscard]] Status checkShmDesc(const ShmDesc& d, const char* from);

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment() { reset(); }

  // Makes a segment of `bytes` bytes (zero-filled, all of it reserved), named after `tag` (e.g.
  // the communicator's hash and the rank) and a random suffix. Errors say which segment, how much
  // /dev/shm has free and what to do.
  [[nodiscard]] static Status create(const std::string& tag, size_t bytes, ShmSegment* out);
  // Maps the segment a peer made; it must be exactly d.bytes long. checkShmDesc first.
  [[nodiscard]] static Status open(const ShmDesc& d, const char* from, ShmSegment* out);

  void* ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  bool valid() const { return ptr_ != nullptr; }
  ShmDesc desc() const;
  // Removes the name (creator only; later opens fail). The mapping stays. Idempotent.
  void unlinkName();
  // A segment made for this process alone: the opener removes the name as soon as it has mapped
  // it, so a name outlives no more than the setup (the creator's own unlink then finds none).
  void unlinkAsOnlyOpener();
  // Unmaps, and removes the name if this process made it and has not yet.
  void reset();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool ownsName_ = false;
};

// Free bytes of the file system behind /dev/shm (0 when it cannot be read).
uint64_t shmFreeBytes();

}  // namespace weft::transport::shm
