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

// How the proxy must read a credit stream: the frames rank 1 must have read before credit i goes
// out (then the proxy has sent them, so the credit's fate is fixed), the last credit it accepts,
// its last byte read. Before the last credit (a bye, or one to refuse) rank 1 reads every frame
// the window allows, so that nothing is on its way and "past the steps sent" is tested at its edge.
struct SendPlan {
  std::vector<uint64_t> need;
  uint64_t head = 0;
  size_t stop = 0;
  bool bye = false;
};

// The proxy cannot have sent more than `total` steps, nor more than the credits' window allows.
bool creditAccepted(const Credit& c, uint64_t head, uint64_t total) {
  std::string why;
  return checkCredit(c, 0, head, std::min(total, head + kSteps), "fuzz", &why) == ncclSuccess;
}

SendPlan planSend(const std::vector<char>& s, uint64_t total) {
  SendPlan p;
  for (size_t at = 0;; at += sizeof(Credit)) {
    p.stop = s.size();
    if (s.size() - at < sizeof(Credit)) return p;  // the end: mid-credit or between credits
    Credit c;
    memcpy(&c, s.data() + at, sizeof(c));
    if (!creditAccepted(c, p.head, total) || isBye(c) || isFail(c)) {  // a fail frame fails it
      p.stop = at + sizeof(c);
      p.bye = isBye(c) && creditAccepted(c, p.head, total);
      p.need.push_back(std::min(total, p.head + kSteps));
      return p;
    }
    p.need.push_back(c.head);
    p.head = c.head;
  }
}

// The input as it is, or each 16 bytes XORed onto the next credit of a receiver that consumes one
// step at a time: zeros take all `total` steps, then claim one more (refused at the edge).
std::vector<char> sendStream(Cursor in, bool xorFrames, uint64_t total) {
  if (!xorFrames) return std::vector<char>(in.at, in.at + in.left);
  std::vector<char> s;
  uint64_t head = 0;
  while (in.left > 0) {
    const Credit c = in.over(makeCredit(0, head + 1), true);
    const size_t n = std::min(in.left, sizeof(c));
    s.insert(s.end(), reinterpret_cast<const char*>(&c), reinterpret_cast<const char*>(&c) + n);
    in.at += n;
    in.left -= n;
    if (n == sizeof(c) && creditAccepted(c, head, total) && !isBye(c) && !isFail(c)) head = c.head;
  }
  return s;
}

// Rank 1's receive proxy reading rank 0's data frames: each must be the next step the GPU
// published, header and bytes; a bye only from an orderly destroy, and last.
struct FrameReader {
  bool pump(int fd, const SendMem& mem, bool byeAllowed) {
    bool got = false;
    char buf[4096];
    while (!eof) {
      const ssize_t n = bootstrap::recvSome(fd, buf, sizeof(buf));
      if (n == -EAGAIN) break;
      if (n <= 0) {
        eof = true;
        break;
      }
      got = true;
      for (size_t i = 0; i < (size_t)n;) {
        require(!bye, "nothing follows a bye");
        if (!inPayload) {
          const size_t k = std::min(sizeof(h) - hdrGot, (size_t)n - i);
          memcpy(reinterpret_cast<char*>(&h) + hdrGot, buf + i, k);
          i += k;
          hdrGot += k;
          if (hdrGot < sizeof(h)) continue;
          hdrGot = 0;
          if (isBye(h)) {
            require(byeAllowed && h.channel == 0, "a bye only from an orderly destroy");
            bye = true;
            continue;
          }
          if (isFail(h)) {  // the proxy failed (its onFailure may come just after)
            require(h.channel == 0 && h.step <= 1, "a fail frame names a rank of this pair");
            bye = true;  // nothing follows it either
            continue;
          }
          const DataHeader want = makeDataHeader(0, frames, stepSize(frames, mem.stepBytes));
          require(frames < mem.published && memcmp(&h, &want, sizeof(h)) == 0,
                  "each frame is the next step the GPU published, with its size");
          inPayload = true;
          payloadGot = 0;
        }
        for (; i < (size_t)n && payloadGot < h.bytes; ++i, ++payloadGot) {
          require(buf[i] == patternByte(frames, payloadGot), "a frame carries its step's bytes");
        }
        if (payloadGot == h.bytes) {
          inPayload = false;
          ++frames;
        }
      }
    }
    return got;
  }
  DataHeader h{};
  size_t hdrGot = 0;
  uint64_t payloadGot = 0;
  bool inPayload = false, bye = false, eof = false;
  uint64_t frames = 0;
};

void sendSide(uint8_t flags, uint64_t stepBytes, bool tight, uint64_t total, Cursor body) {
  const bool loose = flags & (kDestroyOpen | kAbortHalfway | kUngated);
  const std::vector<char> stream = sendStream(body, flags & kXorFrames, total);
  const SendPlan plan = planSend(stream, total);
  SendMem mem(stepBytes);  // before the rank: outlives the proxy
  Rank rank;
  bootstrap::Fd listener;  // rank 1's proxy listener
  bootstrap::SocketAddress bound;
  require(bootstrap::listenOn(bootstrap::SocketAddress::loopback(AF_INET), &listener, &bound) == ncclSuccess,
          "rank 1 listens");
  // Less than a window of 4 KiB steps, so that the proxy's frames back up behind a slow reader; any
  // smaller and loopback TCP crawls on zero-window probes. Accepted sockets inherit it.
  const int small = 4096;
  if (tight) (void)setsockopt(listener.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  NetSendSide side;
  side.channel = 0;
  side.peer = 1;
  side.gpuTail = &mem.tail;
  side.stepSizes = mem.sizes;
  side.slots = mem.slots.data();
  side.head = &mem.head;
  side.stepBytes = stepBytes;
  const std::vector<ListenerDesc> peers = {rank.proxy->desc(), makeListenerDesc(kJob, 1, bound)};
  Status started = ncclInternalError;
  std::thread starter([&] { started = rank.proxy->start({side}, {}, peers); });  // waits for the echo
  bootstrap::Fd fd;
  bootstrap::SocketAddress from;
  const auto end = Clock::now() + kHang;
  while (bootstrap::acceptOne(listener.get(), &fd, &from) != 0) {
    require(Clock::now() < end, "the proxy connects to its peer");
    nap(listener.get(), false);
  }
  Hello hello;
  const Hello want = makeHello(kJob, 0, 1, 0, stepBytes);
  int err = 0;
  const util::Deadline deadline = util::Deadline::afterSeconds(3);
  require(bootstrap::recvAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk &&
              memcmp(&hello, &want, sizeof(hello)) == 0, "the proxy says the expected hello");
  require(bootstrap::sendAll(fd.get(), &hello, sizeof(hello), deadline, nullptr, &err) == bootstrap::Io::kOk,
          "the echo goes out");
  starter.join();
  require(started == ncclSuccess, "start() takes the echo");

  FrameReader reader;
  uint64_t headSeen = 0;
  size_t ready = 0;  // credits whose frames rank 1 has read
  auto tick = [&](bool starving) {
    const uint64_t head = loadAcq(&mem.head);
    require(head >= headSeen && head <= plan.head, "the head only grows, and only to accepted credits");
    headSeen = head;
    bool moved = false;
    while (mem.published < total && mem.published < head + kSteps) {
      mem.publish();
      rank.proxy->wake();  // as a launch does
      moved = true;
    }
    // With a tight buffer rank 1 reads only when it must, so that the proxy's frames back up.
    return ((!tight || starving) && reader.pump(fd.get(), mem, false)) || moved;
  };
  writeStream(fd.get(), stream, kPieces[flags >> 5 & 3], flags & kUngated ? 0 : plan.stop, rank,
              flags & kAbortHalfway, tick,
              [&](size_t) {
                while (ready < plan.need.size() && plan.need[ready] <= reader.frames) ++ready;
                const bool open = (flags & kUngated) || ready == plan.need.size();
                return open ? stream.size() : ready * sizeof(Credit);
              });
  if (!(flags & kDestroyOpen) && !rank.abort) {
    ::shutdown(fd.get(), SHUT_WR);
    require(within(kHang, [&] { return rank.failures.load() > 0 || (plan.bye && loadAcq(&mem.head) == plan.head); }),
            "the proxy takes a bye after the credits before it, or fails a cut or bad stream promptly");
  }
  // Destroyed on another thread while rank 1 keeps reading: an orderly destroy first drains the
  // published steps, which may need rank 1 to make room.
  std::thread destroyer([&] { rank.proxy.reset(); });
  const auto closing = Clock::now() + kHang;
  while (!reader.eof) {  // the proxy drained or gave up, then closed its end
    if (!reader.pump(fd.get(), mem, rank.failures.load() == 0)) nap(fd.get(), false);
    require(Clock::now() < closing, "a destroyed proxy closes its connections");
  }
  destroyer.join();
  rank.requireFailures(loose || plan.bye ? 0 : 1);
  if (plan.bye && !loose) require(rank.failures.load() == 0, "a bye is taken quietly");
  if (!loose) require(mem.head == plan.head, "every accepted credit reaches the GPU");
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
