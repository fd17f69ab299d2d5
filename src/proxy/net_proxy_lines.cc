// The LL part of the network proxy (net_proxy.h): the sender GPU publishes no tail for LL steps,
// so the send proxy finds their lines by their flags, and the receive proxy hands them to the
// receiving GPU in the form the GPU checks, whole 8-byte words of {data, flag}.
#include <cstring>

#include "core/log.h"
#include "device/work_math.h"
#include "proxy/net_proxy_internal.h"

namespace weft::proxy {

using detail::kSteps;
using ull = detail::ull;
using detail::flaggedRunEnd;
using detail::kLine;

// The GPU may write steps [head, head + kSteps) (head: the credit it sees), each into its slot from
// line 0 on (a step of n payload bytes fills lines [0, ceil(n / 8)), every step at least one line),
// its threads in any order. So the lines of a step that have arrived and follow the ones queued
// before are the run of flagged lines from there: a line not yet written ends the run for now, and
// lines past the step's end never carry its flag.
struct NetProxy::NewLines {
  const char* slot;  // where step s's lines are in the sender's image
  uint64_t from;     // lines of it queued before
  uint64_t end;      // end of the run of its lines that have arrived since: from when none
};

// Slot s % kSteps tracks one step at a time: a step it does not track yet has no lines queued.
NetProxy::NewLines NetProxy::newLines(const SendConn& c, uint64_t s) const {
  const size_t i = s % kSteps;
  const char* slot = c.side.llSlots + i * c.side.llStepBytes;
  const uint64_t from = c.lineStep[i] == s ? c.linesTaken[i] : 0;
  return {slot, from, flaggedRunEnd(slot, from, c.side.llStepBytes / kLine, dev::llFlag(s))};
}

bool NetProxy::scanLines(SendConn& c) {
  for (uint64_t s = c.head; s < c.head + kSteps; ++s) {
    const NewLines got = newLines(c, s);
    if (got.end == got.from) continue;
    if (c.peerGone) {
      return fail(ncclRemoteError, c.side.peer,
                  "%s: the peer closed its proxy (destroyed its communicator), but this rank still "
                  "sends LL step %llu to it (do the ranks run the same operations?)", c.what.c_str(), (ull)s);
    }
    const DataHeader hdr = makeLinesHeader(c.side.channel, s, got.from * kLine, (got.end - got.from) * kLine);
    if (!queueFrame(c, hdr, got.slot + got.from * kLine)) return false;
    c.lineStep[s % kSteps] = s;
    c.linesTaken[s % kSteps] = got.end;
  }
  return true;
}

bool NetProxy::linesPending(const SendConn& c) const {
  if (c.side.llStepBytes == 0) return false;
  for (uint64_t s = c.head; s < c.head + kSteps; ++s) {
    const NewLines got = newLines(c, s);
    if (got.end != got.from) return true;
  }
  return false;
}

void NetProxy::wipeLines(SendConn& c, uint64_t step) {
  detail::wipeLLSlot(c.side.llSlots + (step % kSteps) * c.side.llStepBytes, c.side.llStepBytes, step);
}

// The lines' flags are checked first (a wrong one would leave the GPU waiting, or pass a wrong
// step's data), then they land.
bool NetProxy::landLines(RecvConn& c) {
  std::string why;
  if (checkLines(c.lines.data(), c.hdr.bytes, c.hdr.step, c.what.c_str(), &why) != ncclSuccess) {
    return fail(ncclRemoteError, c.side.peer, "%s", why.c_str());
  }
  detail::storeLines(c.side.llSlots + (c.hdr.step % kSteps) * c.side.llStepBytes + c.hdr.offset, c.lines.data(),
                     c.hdr.bytes);
  linesReceived_.fetch_add(c.hdr.bytes / kLine, std::memory_order_release);
  return true;
}

namespace detail {

void storeLines(char* dst, const char* lines, uint64_t bytes) {
  for (uint64_t at = 0; at < bytes; at += 8) {
    uint64_t word;
    memcpy(&word, lines + at, sizeof(word));
    __atomic_store_n(reinterpret_cast<uint64_t*>(dst + at), word, __ATOMIC_RELAXED);
  }
}

void wipeLLSlot(char* slot, uint64_t bytes, uint64_t step) {
  const uint64_t word = (uint64_t)dev::llWipeFlag(step) << 32;
  for (uint64_t at = 0; at < bytes; at += 8) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(slot + at), word, __ATOMIC_RELAXED);
  }
}

}  // namespace detail
}  // namespace weft::proxy
