// Zero-copy point-to-point, host side: the registered receive buffers a rank shares with the peers
// that send to it, and the peers' shared buffers it maps to send into. The kernels run the
// transfers (device/algo/p2p_direct.cuh); this side only makes sure that the sender can reach what
// the receiver will offer.
//
// Receiver: when a launch receives from peer P into a buffer inside a registration
// (ncclCommRegister), the registration is shared with P once: a small message through the fd
// endpoints with the memory's descriptor (and, for cuMem memory, its fd). The work item then names
// the registration (token, offset) and the kernel offers it to the sender part by part.
// ncclCommDeregister withdraws it from the peers it went to.
// Sender: each launch first takes the messages that came: a shared registration is mapped and
// written into this rank's device slots for P (DevPeer::sendRegs), a withdrawn one is cleared and
// unmapped. A send part whose own buffer is registered, to a peer with live slots, asks for an
// offer (kWorkFlagDirectSend), as NCCL's registered transfers need both buffers registered.
//
// Nobody waits for a peer here: a registration not mapped yet only means that this transfer takes
// the connection buffers. Every message is checked (size, magic, kind, descriptor, sender) before
// use; a bad one is dropped with a warning.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "core/registrations.h"
#include "core/status.h"
#include "device/abi.h"
#include "runtime/gpu.h"
#include "runtime/ipc_mem.h"
#include "transport/p2p/fd_passing.h"

struct ncclComm;

namespace weft::transport::p2p {

// Tag of the sharing messages on the fd endpoint (top byte), and their wire format.
constexpr uint64_t kRegShareTag = 0x52ull << 56;  // 'R'
constexpr uint64_t kRegShareTagMask = 0xffull << 56;
constexpr uint32_t kRegShareMagic = 0x52474657u;  // "WFGR"
enum class RegShareKind : uint32_t { kShare = 1, kWithdraw = 2 };
struct RegShareMsg {
  uint32_t magic;
  uint32_t kind;   // RegShareKind
  uint64_t token;  // the owner's registration handle
  uint64_t begin;  // the shared range in the owner's address space (same process: used as is)
  uint64_t bytes;
  runtime::IpcMemDesc desc;  // kShare: what to map
};
static_assert(sizeof(RegShareMsg) == 32 + sizeof(runtime::IpcMemDesc), "RegShareMsg is a wire format");

// Validates a message's bytes (from the peer `fromRank` of a communicator of nRanks ranks);
// `why` gets the reason for a refusal. Pure.
bool checkRegShareMsg(const void* data, size_t bytes, bool withFd, RegShareMsg* out, const char** why);

class RegSharing {
 public:
  // peers[p]: p is connected with this rank (gets slots). Allocates the device slots.
  [[nodiscard]] static Status create(ncclComm* comm, FdEndpoint* endpoint, const std::vector<bool>& peers,
                                     std::unique_ptr<RegSharing>* out);
  ~RegSharing();
  RegSharing(const RegSharing&) = delete;
  RegSharing& operator=(const RegSharing&) = delete;

  // The device slots of peer p's registrations (DevPeer::sendRegs); null when p is no peer.
  const dev::DevRegSlot* deviceSlots(int peer) const;

  // Receiver: the buffer at `ptr` receives from `peer` and lies in `reg`. Shares reg with the peer
  // the first time; *token and *offset are what the work item carries (token 0: not shareable).
  void shareForReceive(ncclComm* comm, int peer, const core::Registration& reg, const void* ptr, uint64_t* token,
                       uint64_t* offset);
  // Window registration (core/comm_window.h): shares reg with every peer at once. True when every
  // peer got it.
  bool shareWithPeers(ncclComm* comm, const core::Registration& reg, const void* ptr);
  // The registration `token` was released: withdraws it from the peers it was shared with.
  void withdraw(ncclComm* comm, uint64_t token);

  // Sender: takes the peers' messages that came since the last call (cheap when none did); slot
  // writes go on `stream`, ahead of the kernels launched after. `settled` (if not null) gets the
  // (peer, token) of every share taken, mapped or not.
  [[nodiscard]] Status absorb(ncclComm* comm, runtime::Stream stream,
                              std::vector<std::pair<int, uint64_t>>* settled = nullptr);
  // Window registration, after the exchange: takes the shares `expected` ((peer, token), sent
  // before the peers entered the exchange) and maps them before returning, waiting for the
  // endpoint to read them until `deadline`. A share still missing then is taken at a later launch.
  [[nodiscard]] Status awaitShares(ncclComm* comm, std::vector<std::pair<int, uint64_t>> expected,
                                   std::chrono::steady_clock::time_point deadline);
  // Whether p is a peer this rank shares with (has slots for).
  bool isPeer(int p) const { return p >= 0 && p < (int)peerIndex_.size() && peerIndex_[p] >= 0; }
  // Whether peer p has a live slot (a send to it may ask for offers).
  bool hasSlots(int peer) const { return peer >= 0 && peer < (int)liveSlots_.size() && liveSlots_[peer] > 0; }
  // Whether any registration was shared with a peer (the receive side has something to report).
  bool sharedAny() const { return sharedAny_; }

 private:
  RegSharing() = default;
  struct Shared {  // one of our registrations
    bool shareable = false;
    uintptr_t begin = 0;
    size_t bytes = 0;
    std::vector<uint8_t> sentTo;  // per peer: 0 not yet, 1 shared, 2 sending failed
    RegShareMsg msg{};
    runtime::MemKind kind = runtime::MemKind::kNone;
    util::UniqueFd fd;  // cuMem: duplicated for each peer
  };
  struct Mapped {  // one of a peer's registrations, mapped here
    int slot = -1;
    runtime::ImportedMem mem;  // invalid for a same-process pointer
  };
  // Shares s (reg's entry) with peer unless done; caller holds mutex_. False when s cannot be shared.
  bool shareLocked(ncclComm* comm, int peer, const core::Registration& reg, const void* ptr, Shared* s);
  [[nodiscard]] Status map(ncclComm* comm, int peer, const RegShareMsg& msg, int fd, runtime::Stream stream);
  [[nodiscard]] Status unmap(int peer, uint64_t token, runtime::Stream stream);
  [[nodiscard]] Status writeSlot(int peer, int slot, const dev::DevRegSlot& value, runtime::Stream stream);

  FdEndpoint* endpoint_ = nullptr;
  int rank_ = -1;
  std::vector<int> peerIndex_;              // per rank: index into the slots, -1: no peer
  std::vector<int> liveSlots_;              // per rank
  dev::DevRegSlot* deviceSlots_ = nullptr;  // [peers][kMaxPeerRegs], device memory
  std::vector<dev::DevRegSlot> hostSlots_;  // the same, as written
  uint64_t messagesSeen_ = 0;
  bool sharedAny_ = false;

  std::mutex mutex_;                                   // ncclCommDeregister may withdraw from any thread
  std::map<uint64_t, Shared> shared_;                  // by our token
  std::map<std::pair<int, uint64_t>, Mapped> mapped_;  // by (peer, its token)
  std::set<std::pair<int, uint64_t>> withdrawnEarly_;  // withdrawals that overtook their share
  std::set<std::pair<int, uint64_t>> unmappable_;      // shares that could not be mapped
};

}  // namespace weft::transport::p2p
