// Fuzz target netProxyStream: a live NetProxy moving Simple steps, fed by a peer over loopback
// (the harness: fuzz_net_harness.h).
#include <sys/socket.h>

#include "fuzz_net_harness.h"

namespace weft::fuzz {
namespace net {
namespace {

// ---- Receive side: the input is the data stream from rank 1.

// Slots with guard zones either side, all canary until the proxy writes.
struct RecvMem {
  static constexpr size_t kGuard = 256;
  explicit RecvMem(uint64_t bytes) : stepBytes(bytes), buf(2 * kGuard + kSteps * bytes, kCanary) {}
  char* slot(uint64_t step) { return buf.data() + kGuard + (step % kSteps) * stepBytes; }
  uint64_t stepBytes;
  std::vector<char> buf;
  uint64_t tail = 0, head = 0;
};

// How the proxy must read a data stream: the headers it reads (the last may be refused, a bye, or
// cut short), the payload of each step it accepts, how many it publishes, and its last byte read.
struct RecvPlan {
  std::vector<size_t> header, payload;
  std::vector<uint64_t> bytes;
  uint64_t steps = 0;
  size_t stop = 0;
  bool bye = false;
};

// With a consuming GPU the harness writes step s's header only once the GPU freed slot s - kSteps,
// so the window never refuses; with a stalled one steps >= kSteps are always refused.
bool headerAccepted(const DataHeader& h, uint64_t step, bool stall, uint64_t stepBytes) {
  std::string why;
  const RecvWindow w{step, stall || step + 1 < kSteps ? 0 : step + 1 - kSteps, stepBytes, 0};
  return checkDataHeader(h, 0, w, "fuzz", &why) == ncclSuccess;
}

RecvPlan planRecv(const std::vector<char>& s, bool stall, uint64_t stepBytes) {
  RecvPlan p;
  for (size_t at = 0;;) {
    p.header.push_back(at);
    p.stop = s.size();
    if (s.size() - at < sizeof(DataHeader)) return p;  // the end: mid-header or between frames
    DataHeader h;
    memcpy(&h, s.data() + at, sizeof(h));
    if (!headerAccepted(h, p.steps, stall, stepBytes) || isBye(h) || isFail(h)) {  // a fail frame fails it
      p.stop = at + sizeof(h);
      p.bye = isBye(h) && headerAccepted(h, p.steps, stall, stepBytes);
      return p;
    }
    require(h.step == p.steps && h.bytes <= stepBytes, "an accepted step is the next one and fits its slot");
    p.payload.push_back(at + sizeof(h));
    p.bytes.push_back(h.bytes);
    if (s.size() - at - sizeof(h) < h.bytes) return p;  // cut in the payload
    ++p.steps;
    at += sizeof(h) + h.bytes;
  }
}

// Valid frames with pattern payloads (raw mode's prefix), or the input's frames XORed onto the
// headers a well-behaved sender would write next (empty steps), payload bytes taken as they are.
std::vector<char> recvStream(Cursor in, bool xorFrames, int prefix, bool stall, uint64_t stepBytes) {
  std::vector<char> s;
  auto append = [&](const void* p, size_t n) { s.insert(s.end(), (const char*)p, (const char*)p + n); };
  if (!xorFrames) {
    for (int i = 0; i < prefix; ++i) {
      const uint64_t bytes = (uint64_t)i * 977 % (stepBytes + 1);
      const DataHeader h = makeDataHeader(0, (uint64_t)i, bytes);
      append(&h, sizeof(h));
      for (uint64_t b = 0; b < bytes; ++b) s.push_back((char)(i * 31 + b));
    }
    append(in.at, in.left);
    return s;
  }
  for (uint64_t step = 0; in.left > 0; ++step) {
    const DataHeader h = in.over(makeDataHeader(0, step, 0), true);
    const size_t n = std::min(in.left, sizeof(h));
    append(&h, n);
    in.at += n;
    in.left -= n;
    if (n < sizeof(h) || !headerAccepted(h, step, stall, stepBytes) || isBye(h)) break;
    const size_t payload = (size_t)std::min<uint64_t>(h.bytes, in.left);
    append(in.at, payload);
    in.at += payload;
    in.left -= payload;
  }
  append(in.at, in.left);  // past the proxy's last byte: it must not read it
  return s;
}

// A slot holds exactly its step's payload, the canary after it.
bool slotHolds(const char* slot, const char* payload, uint64_t bytes, uint64_t stepBytes) {
  if (memcmp(slot, payload, bytes) != 0) return false;
  for (uint64_t i = bytes; i < stepBytes; ++i) {
    if (slot[i] != kCanary) return false;
  }
  return true;
}

void recvSide(uint8_t flags, uint64_t stepBytes, int prefix, Cursor body) {
  const bool stall = flags & kStallGpu, loose = flags & (kDestroyOpen | kAbortHalfway | kUngated);
  const std::vector<char> stream = recvStream(body, flags & kXorFrames, prefix, stall, stepBytes);
  const RecvPlan plan = planRecv(stream, stall, stepBytes);
  RecvMem mem(stepBytes);  // before the rank: outlives the proxy
  Rank rank;
  NetRecvSide side;
  side.channel = 0;
  side.peer = 1;
  side.slots = mem.slot(0);
  side.tail = &mem.tail;
  side.gpuHead = &mem.head;
  side.stepBytes = stepBytes;
  bootstrap::Fd fd = connectAsSender(rank, side);

  uint64_t tailSeen = 0;
  CreditReader credits;
  // The GPU: checks each published step's bytes, refills the slot with the canary, frees it.
  auto consume = [&] {
    const uint64_t tail = loadAcq(&mem.tail);
    require(tail >= tailSeen && tail <= plan.steps, "the tail only grows, and only over accepted steps");
    tailSeen = tail;
    if (stall) return false;
    const uint64_t head = mem.head;
    for (uint64_t s = head; s < tail; ++s) {
      require(slotHolds(mem.slot(s), stream.data() + plan.payload[s], plan.bytes[s], stepBytes),
              "a published step holds its payload, the rest of its slot untouched");
      memset(mem.slot(s), kCanary, stepBytes);
    }
    storeRel(&mem.head, tail);
    return tail > head;
  };
  // Rank 1's send proxy: the credits must count steps the GPU consumed, and grow.
  auto readCredits = [&] {
    return credits.pump(fd.get(), mem.head, rank.proxy == nullptr && rank.failures.load() == 0);
  };
  writeStream(fd.get(), stream, kPieces[flags >> 5 & 3], flags & kUngated ? 0 : plan.stop, rank,
              flags & kAbortHalfway,
              [&](bool) {
                const bool consumed = consume();
                return readCredits() || consumed;
              },
              [&](size_t) {  // step s's header waits until slot s - kSteps is free
                const uint64_t next = mem.head + kSteps;
                const bool open = stall || (flags & kUngated) || next >= plan.header.size();
                return open ? stream.size() : plan.header[next];
              });
  if (!(flags & kDestroyOpen) && !rank.abort) {
    ::shutdown(fd.get(), SHUT_WR);
    require(within(kHang, [&] { return rank.failures.load() > 0 || (plan.bye && loadAcq(&mem.tail) == plan.steps); }),
            "the proxy takes a bye after the steps before it, or fails a cut or bad stream promptly");
  }
  rank.proxy.reset();
  const auto end = Clock::now() + kHang;
  while (!credits.eof) {  // the proxy closed its end: the rest of the credits, then the end of the stream
    consume();
    if (!readCredits()) nap(fd.get(), false);
    require(Clock::now() < end, "a destroyed proxy closes its connections");
  }
  rank.requireFailures(loose || plan.bye ? 0 : 1);
  if (plan.bye && !loose) require(rank.failures.load() == 0, "a bye is taken quietly");
  if (!loose) require(mem.tail == plan.steps, "every valid step before the end is published");
  // Every slot: an unconsumed step's payload, a prefix of the step in progress, or the canary.
  for (uint64_t i = 0; i < kSteps; ++i) {
    const uint64_t step = mem.head + (i + kSteps - mem.head % kSteps) % kSteps;  // the step slot i holds next
    const char* slot = mem.slot(i);
    if (step < mem.tail) {
      require(slotHolds(slot, stream.data() + plan.payload[step], plan.bytes[step], stepBytes),
              "an unconsumed step still holds its payload");
      continue;
    }
    for (uint64_t b = 0; b < stepBytes; ++b) {
      const bool partial = step == mem.tail && step < plan.payload.size() && b < plan.bytes[step] &&
                           plan.payload[step] + b < stream.size() && slot[b] == stream[plan.payload[step] + b];
      require(slot[b] == kCanary || partial, "no slot is written but the one of the step in progress");
    }
  }
  for (size_t i = 0; i < RecvMem::kGuard; ++i) {
    require(mem.buf[i] == kCanary && mem.buf[mem.buf.size() - 1 - i] == kCanary, "nothing is written around slots");
  }
}

// ---- Send side: the input is the credit stream from rank 1.

// The GPU's step sizes: mostly full (so that a window's frames fill the socket buffers), one empty
// and one in between per window; its bytes follow a pattern.
uint64_t stepSize(uint64_t s, uint64_t stepBytes) {
  return s % kSteps == 0 ? 0 : s % kSteps == 1 ? s * 37 % stepBytes : stepBytes;
}
char patternByte(uint64_t s, uint64_t i) { return (char)(s * 131 + i * 7 + 1); }

struct SendMem {
  explicit SendMem(uint64_t bytes) : stepBytes(bytes), slots(kSteps * bytes) {}
  void publish() {  // the sending kernel writes its next step, then the tail
    const uint64_t s = published++;
    const uint64_t n = stepSize(s, stepBytes);
    for (uint64_t i = 0; i < n; ++i) slots[(s % kSteps) * stepBytes + i] = patternByte(s, i);
    sizes[s % kSteps] = dev::stepSizeWord(s, n);
    storeRel(&tail, published);
  }
  uint64_t stepBytes;
  std::vector<char> slots;
  uint64_t tail = 0, sizes[kSteps] = {}, head = 0;
  uint64_t published = 0;
};

// Rank 1's receive proxy reading rank 0's data frames: each must be the next step the GPU
// published, header and bytes.
struct FrameReader : DataFrameReader {
  explicit FrameReader(const SendMem& m) : mem(m) {}
  void header() override {
    const DataHeader want = makeDataHeader(0, frames, stepSize(frames, mem.stepBytes));
    require(frames < mem.published && memcmp(&h, &want, sizeof(h)) == 0,
            "each frame is the next step the GPU published, with its size");
  }
  void payloadByte(char b) override {
    require(b == patternByte(frames, payloadGot), "a frame carries its step's bytes");
  }
  void frameDone() override { ++frames; }
  const SendMem& mem;
  uint64_t frames = 0;
};

void sendSide(uint8_t flags, uint64_t stepBytes, bool tight, uint64_t total, Cursor body) {
  const std::vector<char> stream = sendStream(body, flags & kXorFrames, total);
  const SendPlan plan = planSend(stream, total);
  SendMem mem(stepBytes);  // before the rank: outlives the proxy
  Rank rank;
  bootstrap::Fd fd = acceptSender(rank, sendSideOver(mem), tight);

  FrameReader reader(mem);
  driveSendSide(flags, tight, stream, plan, rank, fd.get(), &mem.head, reader,
                [&](uint64_t head) {
                  bool moved = false;
                  while (mem.published < total && mem.published < head + kSteps) {
                    mem.publish();
                    moved = true;
                  }
                  return moved;
                },
                [&] { return reader.frames; });
  if ((flags & kDestroyOpen) && !rank.abort && rank.failures.load() == 0) {
    require(reader.frames == mem.published, "an orderly destroy first sends every published step");
  }
}

}  // namespace
}  // namespace net

void netProxyStream(const uint8_t* data, size_t size) {
  Cursor in{data, size};
  const uint8_t flags = in.take<uint8_t>(), sizes = in.take<uint8_t>();
  const uint64_t stepBytes = 64ull << 2 * (sizes & 3);
  if (flags & net::kSendSide) net::sendSide(flags, stepBytes, sizes & net::kTightBuffer, sizes >> 3, in);
  else net::recvSide(flags, stepBytes, (sizes >> 3) % (net::kSteps + 4), in);
  net::checkNoLeaks();
}

}  // namespace weft::fuzz
