// What ncclUniqueId holds for weft (128 bytes, copied by value between processes by the user):
//
//   offset  0  u64  magic "weftUID1"
//           8  u16  layout version
//          10  u16  flags (bit 0: no root runs yet; the group's first rank starts it - NCCL_COMM_ID)
//          12  u32  checksum (FNV-1a over the 128 bytes with this field zeroed)
//          16  u64  job key: random, or derived from NCCL_COMM_ID's text so that every rank agrees
//          24  24B  root listen address (wire::WireAddress)
//          48  ...  zero
//
// Every rank decodes and validates it before use; a zeroed or foreign id is reported as such.
//
// NCCL_COMM_ID: every process that calls ncclGetUniqueId gets the same id, and the group's first
// rank starts the root at that address during init. The job key then depends on the address
// only, so two communicators created at the same time from the same NCCL_COMM_ID cannot be told
// apart (as in NCCL): use it for one communicator at a time.
#pragma once

#include <cstdint>
#include <string>

#include "bootstrap/socket.h"
#include "core/status.h"
#include "nccl.h"

namespace weft::bootstrap {

struct UniqueIdInfo {
  uint64_t jobKey = 0;
  SocketAddress root;
  bool rootStartedByRank = false;  // NCCL_COMM_ID: the first rank of the group starts the root
};

void encodeUniqueId(const UniqueIdInfo& info, ncclUniqueId* out);
// False with a reason when the id is not a valid weft id.
bool decodeUniqueId(const ncclUniqueId& id, UniqueIdInfo* info, std::string* why);

// A 64-bit key from text (the canonical NCCL_COMM_ID address), never zero.
uint64_t jobKeyFromText(const std::string& text);
// A random 64-bit key from the kernel's entropy, never zero.
uint64_t randomJobKey();

// ncclGetUniqueId: with NCCL_COMM_ID set, an id naming that address (no root is started here);
// otherwise a root listening on the chosen interface, served by a detached thread.
[[nodiscard]] Status createUniqueId(ncclUniqueId* out);
// A root of its own whatever NCCL_COMM_ID says: the id of a communicator that one rank creates
// for others while another may be forming from the same NCCL_COMM_ID (ncclCommSplit's children
// of several colors, ncclCommShrink). `near` (may be null): an address of the parent's bootstrap,
// so that the new root listens where the parent's ranks already reach this one.
[[nodiscard]] Status createRootId(ncclUniqueId* out, const SocketAddress* near = nullptr);

}  // namespace weft::bootstrap
