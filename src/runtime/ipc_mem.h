// Mapping another process's device memory: the descriptor the owner publishes, and the import.
//
// How the P2P transport shares a buffer from owner rank A with importer rank B on the same host
// (both have created their transport::p2p::FdEndpoint before the bootstrap exchange, so neither
// can send to an endpoint that does not exist yet):
//   A: allocShareable(bytes, &alloc)
//      exportMem(alloc, 0, alloc.bytes(), &desc)             → put desc in the connect blob for B
//      if desc.kind == kCuMemFd: alloc.exportFd(&fd);
//                                endpoint.sendFd(B, fd.get(), desc.localId, deadline, abort)
//   B: desc from the blob (checked by importMem; it came over the network)
//      if desc.kind == kCuMemFd: endpoint.recvFd(A, desc.localId, deadline, abort, &fd)
//      importMem(desc, fd.get(), &imported)  (fd may be closed afterwards; the mapping keeps the memory)
//      imported.ptr() is A's buffer in B's address space, on B's current device.
// The fd is pushed by the owner, matched by (sender rank, localId) at the importer; an fd that
// arrives before B asks for it waits in B's endpoint. Legacy descriptors carry the CUDA IPC handle
// themselves and need no fd (pass -1). A legacy handle cannot be opened by the process that
// created it: within one process, use the pointer itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/status.h"
#include "runtime/shareable_alloc.h"

namespace weft::runtime {

constexpr uint32_t kIpcMemDescMagic = 0x5746494du;  // "WFIM"

// Fixed-size, trivially copyable: it travels through the bootstrap as raw bytes.
struct IpcMemDesc {
  uint32_t magic;        // kIpcMemDescMagic
  uint32_t kind;         // MemKind
  uint64_t allocBytes;   // size of the whole allocation: what the importer maps
  uint64_t offset;       // start of the described region within the allocation
  uint64_t bytes;        // length of the described region
  int32_t ownerPid;
  int32_t ownerDevice;   // the owner's runtime device ordinal
  uint64_t localId;      // the owner's allocation id; the tag its fd is sent with
  LegacyIpcHandle legacy;  // kLegacyCudaIpc: the cudaIpcMemHandle_t of the allocation's base
};
static_assert(std::is_trivially_copyable_v<IpcMemDesc>, "IpcMemDesc is sent as raw bytes");
static_assert(sizeof(IpcMemDesc) == 112, "IpcMemDesc layout is part of the wire format");

// Describes [offset, offset + bytes) of `alloc` for another process. Unused bytes are zero.
[[nodiscard]] Status exportMem(const ShareableAlloc& alloc, size_t offset, size_t bytes, IpcMemDesc* out);

// User memory (a registered buffer) described for another process.
struct UserMemExport {
  bool shareable = false;
  const char* why = "";  // when not shareable: the reason, for the log
  uintptr_t begin = 0;   // the shared range: [begin, begin + bytes) in the owner's address space
  size_t bytes = 0;
  IpcMemDesc desc{};     // what the importer maps (the whole allocation around the range)
  util::UniqueFd fd;     // kCuMemFd: a new fd for the importer
};
// Shares the part of [begin, end) that lies in the allocation holding `anchor` (a pointer inside
// the range): cuMem memory made with POSIX fd handles (ncclMemAlloc) through an fd, cudaMalloc
// memory through a legacy IPC handle. Memory that cannot be shared (host memory, cuMem without fd
// handles, pool allocations) gives shareable = false and the reason: not an error.
[[nodiscard]] Status exportUserMem(const void* anchor, uintptr_t begin, uintptr_t end, UserMemExport* out);

// Validates a descriptor received from a peer (`from` names it in messages, e.g. "rank 3").
// Pure: no GPU calls.
[[nodiscard]] Status checkIpcMemDesc(const IpcMemDesc& desc, const char* from);

// Another process's memory mapped into this one. Move-only; unmaps on destruction.
class ImportedMem {
 public:
  ImportedMem() = default;
  ImportedMem(ImportedMem&& other) noexcept;
  ImportedMem& operator=(ImportedMem&& other) noexcept;
  ImportedMem(const ImportedMem&) = delete;
  ImportedMem& operator=(const ImportedMem&) = delete;
  ~ImportedMem() { reset(); }

  bool valid() const { return kind_ != MemKind::kNone; }
  void* ptr() const { return ptr_; }  // the described region (base + offset)
  size_t bytes() const { return bytes_; }
  MemKind kind() const { return kind_; }
  int device() const { return device_; }  // the importing device
  void reset();

 private:
  friend struct ImportedMemImpl;  // the import code in ipc_mem.cc

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemKind kind_ = MemKind::kNone;
  int device_ = -1;
  void* base_ = nullptr;           // legacy: what cudaIpcOpenMemHandle returned
  unsigned long long handle_ = 0;  // cuMem: imported CUmemGenericAllocationHandle
  unsigned long long va_ = 0;      // cuMem: reserved range
  size_t reserved_ = 0;            // cuMem: its length
  bool mapped_ = false;
};

// Maps the described memory on the current device. `fd`: the file descriptor received from the
// owner for kCuMemFd (not taken over: the caller still closes it); ignored for kLegacyCudaIpc.
[[nodiscard]] Status importMem(const IpcMemDesc& desc, int fd, ImportedMem* out, const char* from = "the owner");

}  // namespace weft::runtime
