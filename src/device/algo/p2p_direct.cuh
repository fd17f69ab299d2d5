// Zero-copy point-to-point on the Simple protocol: a sender whose peer mapped a registered receive
// buffer for it (DevPeer::sendRegs) writes its part straight into that buffer instead of through
// the connection's staging slots, and the receiver copies nothing.
//
// The receiver decides per part, the sender may decline, and neither can be wrong about the other:
//  - The receiver of every qualifying part (p2pDirectQualifies: both ends judge the same bytes and
//    step size) posts an offer into the sender's counter line, after head: the registration token
//    of its buffer (0: none), the byte offset of its part in it, the part's bytes, and last, after a
//    fence, seq = its step + 1. It then waits for tail >= seq, and the marker word after tail
//    tells it how the data came: marker == seq: directly (it publishes head = seq and is done),
//    anything else: through the slots (the ordinary loop follows, its first wait already met).
//  - A sender with kWorkFlagDirectSend waits for the offer of its step, looks the token up in its
//    slots of the peer's registrations, and when found (and the part fits, and the bytes agree)
//    copies, fences, writes marker = seq and then tail = seq. A direct part counts as one step at
//    both ends. A sender without the flag never reads offers and sends through the slots.
// Only a sender whose own buffer is registered waits for the receiver (as NCCL's registered
// transfers do), so unregistered programs keep the buffering they had.
#pragma once

#include "device/abi.h"
#include "device/proto/simple.cuh"

namespace weft::dev {

// Named barrier of a group's direct decision: ids the Simple protocol leaves free.
constexpr int kDirectBarrierBase = 1 + kSimpleMaxGroups * kSimpleReadyDepth;
static_assert(kDirectBarrierBase + kSimpleMaxGroups <= arch::kNamedBarriers, "not enough named barriers");

// Parts of at least one connection step qualify: below that, the sender's wait for the offer
// would cost more than the receiver's copy it saves.
WEFT_HD bool p2pDirectQualifies(uint64_t bytes, uint64_t stepBytes) { return stepBytes > 0 && bytes >= stepBytes; }

// One thread (lane 0 here; the symmetric barriers' signalling threads too): spins until *p >= want;
// false when the communicator aborted first (then recorded in sh).
WEFT_DEV bool directWait(const volatile uint64_t* p, uint64_t want, SimpleShared* sh,
                         const volatile uint32_t* abortFlag) {
  int spins = 0;
  while (arch::ldRelaxedSys(p) < want) {
    if (++spins < kSpinsPerAbortCheck) continue;
    spins = 0;
    if (arch::ldVolatileShared(&sh->aborted) || (abortFlag && arch::ldRelaxedSys(abortFlag) != 0)) {
      arch::stVolatileShared(&sh->aborted, 1);
      return false;
    }
  }
  (void)arch::ldAcquireSys(p);  // what the writer stored before *p is visible from here on
  return true;
}

constexpr int kHalfBits = 8 * sizeof(uint32_t);
WEFT_DEV void directShare(SimpleShared* sh, int group, uint64_t v) {
  arch::stVolatileShared(&sh->direct[group][0], (uint32_t)v);
  arch::stVolatileShared(&sh->direct[group][1], (uint32_t)(v >> kHalfBits));
}
WEFT_DEV uint64_t directShared(SimpleShared* sh, int group) {
  const uint64_t high = arch::ldVolatileShared(&sh->direct[group][1]);
  return arch::ldVolatileShared(&sh->direct[group][0]) | high << kHalfBits;
}

// Sender lane 0: the address in this rank's space where the offer of `seq` says to write `bytes`,
// or 0 (no offer of that step, no registration, one this rank has not mapped, or no fit).
WEFT_DEV uint64_t directTarget(const ConnInfo* conn, const DevRegSlot* regs, uint64_t seq, uint64_t bytes,
                               SimpleShared* sh, const volatile uint32_t* abortFlag) {
  volatile uint64_t* offer = conn->head;
  if (!directWait(offer + kOfferSeqWord, seq, sh, abortFlag)) return 0;
  if (arch::ldRelaxedSys(offer + kOfferSeqWord) != seq) return 0;
  const uint64_t token = arch::ldRelaxedSys(offer + kOfferTokenWord);
  const uint64_t offset = arch::ldRelaxedSys(offer + kOfferOffsetWord);
  if (token == 0 || arch::ldRelaxedSys(offer + kOfferBytesWord) != bytes) return 0;
  for (int i = 0; i < kMaxPeerRegs; ++i) {
    if (arch::ldRelaxedSys(&regs[i].token) != token) continue;
    (void)arch::ldAcquireSys(&regs[i].token);  // base and bytes were written before the token
    const uint64_t base = arch::ldRelaxedSys(&regs[i].base);
    const uint64_t size = arch::ldRelaxedSys(&regs[i].bytes);
    return offset <= size && size - offset >= bytes ? base + offset : 0;
  }
  return 0;
}

// Every thread of the send group g. True when the part went straight into the receiver's buffer;
// false: send it through the slots.
WEFT_DEV bool p2pDirectSend(const SimpleGroup& g, SimpleShared* sh, const volatile uint32_t* abortFlag, ConnInfo* conn,
                            const DevRegSlot* regs, const uint8_t* src, uint64_t bytes) {
  const uint64_t seq = arch::ldN<8>(&conn->step) + 1;
  const int bar = kDirectBarrierBase + g.index;
  const bool sync = isSyncWarp(g);
  if (sync && arch::laneId() == 0) directShare(sh, g.index, directTarget(conn, regs, seq, bytes, sh, abortFlag));
  arch::barSync(bar, groupThreads(g));
  const uint64_t dst = directShared(sh, g.index);
  if (dst == 0) return false;
  if (!sync) {
    const int tid = arch::threadId() - g.firstWarp * arch::kWarpSize;
    reduceCopyOutlined<FnCopy, 1, 1, false, false>(FnCopy{}, tid, g.nDataWarps * arch::kWarpSize, src, nullptr,
                                                   reinterpret_cast<void*>(dst), nullptr, (int64_t)bytes);
  }
  arch::barSync(bar, groupThreads(g));  // every store of the copy is ordered before the fence below
  if (sync && arch::laneId() == 0) {
    if (!arch::ldVolatileShared(&sh->aborted)) {
      arch::fenceAcqRelSys();
      arch::stRelaxedSys(conn->tail + kMarkerWord, seq);
      arch::stReleaseSys(conn->tail, seq);
    }
    arch::stN<8>(&conn->step, seq);
    arch::stN<4>(&conn->sendFree, 0);  // head unknown: the next kernel reads it
  }
  return true;
}

// Every thread of the receive group g, for a qualifying part. token/offset: the registration of
// the receive buffer (token 0: none). True when the data arrived directly; false: receive it
// through the slots.
WEFT_DEV bool p2pDirectRecv(const SimpleGroup& g, SimpleShared* sh, const volatile uint32_t* abortFlag, ConnInfo* conn,
                            uint64_t token, uint64_t offset, uint64_t bytes) {
  const uint64_t seq = arch::ldN<8>(&conn->step) + 1;
  const int bar = kDirectBarrierBase + g.index;
  const bool sync = isSyncWarp(g);
  if (sync && arch::laneId() == 0) {
    volatile uint64_t* offer = conn->head;  // in the sender's memory
    arch::stRelaxedSys(offer + kOfferTokenWord, token);
    arch::stRelaxedSys(offer + kOfferOffsetWord, offset);
    arch::stRelaxedSys(offer + kOfferBytesWord, bytes);
    arch::stReleaseSys(offer + kOfferSeqWord, seq);
    bool direct = false;
    if (directWait(conn->tail, seq, sh, abortFlag)) direct = arch::ldRelaxedSys(conn->tail + kMarkerWord) == seq;
    if (direct) {
      arch::stRelaxedSys(conn->head, seq);
      arch::stN<8>(&conn->step, seq);
      volatile uint64_t* count = conn->tail + kDirectCountWord;
      arch::stRelaxedSys(count, arch::ldRelaxedSys(count) + 1);
    }
    directShare(sh, g.index, direct ? 1 : 0);
  }
  arch::barSync(bar, groupThreads(g));
  return directShared(sh, g.index) != 0;
}

}  // namespace weft::dev
