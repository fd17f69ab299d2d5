// Fuzz target netProxyLines: a live NetProxy on a connection with LL, fed by a peer over loopback
// (the harness: fuzz_net_harness.h), on either side.
//
// Receive side: the stream mixes Simple steps with LL lines frames, a step's lines in one or two
// frames, in any order. What the proxy must do, predicted with the wire checks: land every accepted
// frame's lines, whole, at their offset in their step's LL slot (and Simple steps in theirs, with
// the tail), never a line of a frame that was cut or refused, nothing anywhere else; then take a
// bye quietly or fail once, as the peer's error. The GPU consumes a step once it is whole, as the
// kernel does: a Simple step once the tail passed it, an LL step once its slot holds the lines the
// well-behaved sender writes for it, each with the step's flag. When the consumed count moves, the
// harness lets the proxy finish every frame before first (its counters say when), so that each
// frame meets the window the prediction assumed.
//
// Send side: the GPU writes Simple steps and LL steps, the lines in a shuffled order and a few at a
// time; the input is rank 1's credits. The proxy must send each Simple step once, in order, and
// every line the GPU wrote once, in runs from line 0 of its step, and keep to the credits as
// netProxyStream's send side does; an orderly destroy sends every line written before its bye.
//
// Input: a flags byte (fuzz_net_harness.h's kSendSide, kXorFrames, kStallGpu, kDestroyOpen,
// kAbortHalfway, kUngated and piece sizes), a sizes byte, a third byte, then the stream's bytes.
// Receive side: each frame XORed onto the next one of a well-behaved sender (its lines XORed onto
// the lines that sender writes), or taken as they are after `third` valid steps. Send side: the
// credits as netProxyStream takes them; `third` says how the GPU writes its lines.
#include <sys/socket.h>

#include <algorithm>
#include <random>

#include "fuzz_net_harness.h"

namespace weft::fuzz {
namespace net {
namespace {

constexpr uint64_t kLine = dev::kLLLineBytes;
// The sizes byte: bits 0-1 the LL step size (256 << 2n bytes), bit 2 the Simple one (64 or 1024
// bytes); receive side: bits 3-5 how many whole steps the GPU lags behind before it consumes; send
// side: bit 3 a small socket buffer on rank 1 that it reads lazily, bits 4-7 a third of the steps
// the GPU sends. The third byte on the send side: bits 0-2 lines written per tick - 1, bit 3 whole
// steps at once, bits 4-7 the seed of the lines' order.
uint64_t llStepSize(uint8_t sizes) { return (uint64_t)dev::kLLMinStepBytes << 2 * (sizes & 3); }
uint64_t simpleStepSize(uint8_t sizes) { return sizes & 4 ? 1024 : 64; }
uint64_t lagOf(uint8_t sizes) { return sizes >> 3 & 7; }

// The well-behaved sender: every fourth step Simple, the others LL, with some lines (cut in two
// frames, the second half first, every fifth step).
bool isSimpleStep(uint64_t s) { return s % 4 == 3; }
uint64_t simpleBytes(uint64_t s, uint64_t stepBytes) { return s * 977 % (stepBytes + 1); }
uint64_t llLines(uint64_t s, uint64_t llStepBytes) { return 1 + s * 13 % std::min<uint64_t>(llStepBytes / kLine, 48); }
char patternByte(uint64_t s, uint64_t i) { return (char)(s * 131 + i * 7 + 1); }
void goodLine(uint64_t step, uint64_t line, char* out) {
  const uint32_t flag = dev::llFlag(step);
  const uint32_t w[4] = {(uint32_t)(step * 0x9e3779b9u + line * 2654435761u), flag, (uint32_t)(line * 40503u ^ step),
                         flag};
  memcpy(out, w, sizeof(w));
}
std::vector<DataHeader> goodFrames(uint64_t s, uint64_t stepBytes, uint64_t llStepBytes) {
  if (isSimpleStep(s)) return {makeDataHeader(0, s, simpleBytes(s, stepBytes))};
  const uint64_t n = llLines(s, llStepBytes);
  if (s % 5 != 1 || n < 2) return {makeLinesHeader(0, s, 0, n * kLine)};
  return {makeLinesHeader(0, s, n / 2 * kLine, (n - n / 2) * kLine), makeLinesHeader(0, s, 0, n / 2 * kLine)};
}

// A frame's payload as that sender writes it, XORed with the input's bytes (zeros keep it valid).
void appendPayload(std::vector<char>* s, const DataHeader& h, Cursor* in) {
  char line[kLine];
  for (uint64_t b = 0; b < h.bytes; ++b) {
    if (isLines(h) && b % kLine == 0) goodLine(h.step, h.offset / kLine + b / kLine, line);
    const char good = isLines(h) ? line[b % kLine] : patternByte(h.step, b);
    s->push_back(good ^ (char)in->take<uint8_t>());
  }
}

std::vector<char> linesStream(Cursor in, bool xorFrames, int prefix, uint64_t stepBytes, uint64_t llStepBytes) {
  std::vector<char> s;
  auto append = [&](const void* p, size_t n) { s.insert(s.end(), (const char*)p, (const char*)p + n); };
  if (!xorFrames) {
    static const uint8_t zero = 0;
    Cursor none{&zero, 0};
    for (int step = 0; step < prefix; ++step) {
      for (const DataHeader& h : goodFrames((uint64_t)step, stepBytes, llStepBytes)) {
        append(&h, sizeof(h));
        appendPayload(&s, h, &none);
      }
    }
    append(in.at, in.left);
    return s;
  }
  for (uint64_t step = 0; in.left > 0; ++step) {
    for (const DataHeader& good : goodFrames(step, stepBytes, llStepBytes)) {
      const DataHeader h = in.over(good, true);
      const size_t n = std::min(in.left, sizeof(h));
      append(&h, n);
      in.at += n;
      in.left -= n;
      // Past a frame no check could take, its length means nothing: the rest goes as it is.
      const bool framed = h.magic == kDataMagic || h.magic == kLinesMagic;
      if (n < sizeof(h) || !framed || h.bytes > (isLines(h) ? llStepBytes : stepBytes)) {
        append(in.at, in.left);
        return s;
      }
      appendPayload(&s, h, &in);
      if (in.left == 0) return s;
    }
  }
  return s;
}

// One frame the proxy reads, as predicted.
struct Frame {
  size_t header;  // where its header starts in the stream
  DataHeader h;
  uint64_t headBefore;                // the GPU's consumed count when the proxy reads the header
  uint64_t linesBefore, stepsBefore;  // the proxy's counters once every frame before is done
  bool accepted;                      // header, payload (whole) and lines all pass: it lands
};

struct LinesPlan {
  std::vector<Frame> frames;  // the last may be refused or cut
  size_t stop = 0;            // the proxy's last byte read
  bool bye = false;
  bool cutSimple = false;  // the last frame is a Simple step cut in its payload (lands in part)
  uint64_t tail = 0;       // what the proxy publishes in the end
  uint64_t lines = 0, steps = 0;  // lines and Simple steps landed in the end
};

// Which step's lines a slot's lines hold, as the GPU would judge them (0: none since consumed).
struct LineBook {
  explicit LineBook(uint64_t llStepBytes) : perSlot(llStepBytes / kLine), holder(kSteps * perSlot, 0) {}
  uint64_t& of(uint64_t step, uint64_t line) { return holder[step % kSteps * perSlot + line]; }
  bool whole(uint64_t step, uint64_t lines) {
    for (uint64_t l = 0; l < lines; ++l) {
      if (of(step, l) != step + 1) return false;
    }
    return true;
  }
  void release(uint64_t step) { std::fill_n(holder.begin() + step % kSteps * perSlot, perSlot, 0); }
  uint64_t perSlot;
  std::vector<uint64_t> holder;
};

LinesPlan planLines(const std::vector<char>& s, bool stall, uint64_t lag, uint64_t stepBytes, uint64_t llStepBytes) {
  LinesPlan p;
  LineBook book(llStepBytes);
  uint64_t head = 0, ready = 0;  // consumed; whole steps in order
  for (size_t at = 0;;) {
    p.stop = s.size();
    if (s.size() - at < sizeof(DataHeader)) return p;  // the end: mid-header or between frames
    while (!isSimpleStep(ready) ? book.whole(ready, llLines(ready, llStepBytes)) : p.tail > ready) {
      book.release(ready);
      ++ready;
    }
    if (!stall && ready > head + lag) head = ready - lag;
    Frame f{at, {}, head, p.lines, p.steps, false};
    memcpy(&f.h, s.data() + at, sizeof(f.h));
    const DataHeader& h = f.h;
    std::string why;
    const RecvWindow window{p.tail, head, stepBytes, llStepBytes};
    if (checkDataHeader(h, 0, window, "fuzz", &why) != ncclSuccess || isBye(h) || isFail(h)) {
      p.stop = at + sizeof(h);
      p.bye = isBye(h) && checkDataHeader(h, 0, window, "fuzz", &why) == ncclSuccess;
      p.frames.push_back(f);
      return p;
    }
    const size_t payload = at + sizeof(h);
    if (s.size() - payload < h.bytes) {  // cut in the payload: lines never land, a Simple step may in part
      p.cutSimple = !isLines(h);
      p.frames.push_back(f);
      return p;
    }
    if (isLines(h) && checkLines(s.data() + payload, h.bytes, h.step, "fuzz", &why) != ncclSuccess) {
      p.stop = payload + h.bytes;
      p.frames.push_back(f);
      return p;
    }
    f.accepted = true;
    p.frames.push_back(f);
    if (isLines(h)) {
      for (uint64_t l = 0; l < h.bytes / kLine; ++l) book.of(h.step, h.offset / kLine + l) = h.step + 1;
      p.lines += h.bytes / kLine;
    } else {
      p.tail = h.step + 1;
      p.steps++;
    }
    at = payload + h.bytes;
  }
}

// The receiving GPU's memory: Simple slots, then LL slots, guard zones either side, all canary
// until the proxy writes; and the same layout as the harness expects it to be.
struct LinesMem {
  static constexpr size_t kGuard = 256;
  LinesMem(uint64_t simple, uint64_t ll)
      : stepBytes(simple), llStepBytes(ll), buf(2 * kGuard + kSteps * (simple + ll), kCanary), model(buf) {}
  size_t slotAt(uint64_t step) const { return kGuard + step % kSteps * stepBytes; }
  size_t llSlotAt(uint64_t step) const { return kGuard + kSteps * stepBytes + step % kSteps * llStepBytes; }
  size_t frameAt(const DataHeader& h) const { return isLines(h) ? llSlotAt(h.step) + h.offset : slotAt(h.step); }
  void land(const std::vector<char>& s, const Frame& f) {
    memcpy(model.data() + frameAt(f.h), s.data() + f.header + sizeof(DataHeader), f.h.bytes);
  }
  // The GPU consumed `step`: both of its slots as expected, then canary again (in both).
  void consume(uint64_t step) {
    for (size_t at : {slotAt(step), llSlotAt(step)}) {
      const size_t n = at == slotAt(step) ? stepBytes : llStepBytes;
      require(memcmp(buf.data() + at, model.data() + at, n) == 0, "a consumed step's slots hold what landed");
      memset(buf.data() + at, kCanary, n);
      memset(model.data() + at, kCanary, n);
    }
  }
  uint64_t stepBytes, llStepBytes;
  std::vector<char> buf, model;
  uint64_t tail = 0, head = 0;
};

void recvLines(uint8_t flags, uint8_t sizes, int prefix, Cursor body) {
  const bool stall = flags & kStallGpu, loose = flags & (kDestroyOpen | kAbortHalfway);
  const uint64_t stepBytes = simpleStepSize(sizes), llStepBytes = llStepSize(sizes);
  const std::vector<char> stream = linesStream(body, flags & kXorFrames, prefix, stepBytes, llStepBytes);
  const LinesPlan plan = planLines(stream, stall, lagOf(sizes), stepBytes, llStepBytes);
  LinesMem mem(stepBytes, llStepBytes);  // before the rank: outlives the proxy
  Rank rank;
  NetRecvSide side;
  side.channel = 0;
  side.peer = 1;
  side.slots = mem.buf.data() + mem.slotAt(0);
  side.tail = &mem.tail;
  side.gpuHead = &mem.head;
  side.stepBytes = stepBytes;
  side.llSlots = mem.buf.data() + mem.llSlotAt(0);
  side.llStepBytes = llStepBytes;
  bootstrap::Fd fd = connectAsSender(rank, side);

  size_t landed = 0;  // frames applied to the model
  size_t gate = 0;    // the next frame before which the GPU consumes more
  size_t written = 0;
  uint64_t tailSeen = 0;
  CreditReader credits;
  auto nextGate = [&] {
    while (gate < plan.frames.size() && plan.frames[gate].headBefore <= mem.head) ++gate;
  };
  // The GPU: once the proxy has done every frame before the next gate, consume up to its count.
  auto tick = [&](bool) {
    const uint64_t tail = loadAcq(&mem.tail);
    require(tail >= tailSeen && tail <= plan.tail, "the tail only grows, and only over accepted steps");
    tailSeen = tail;
    bool moved = credits.pump(fd.get(), mem.head, false);
    nextGate();
    if (gate == plan.frames.size()) return moved;
    const Frame& g = plan.frames[gate];
    if (written < g.header || rank.proxy->linesReceived() != g.linesBefore ||
        rank.proxy->stepsReceived() != g.stepsBefore) {
      return moved;
    }
    for (; landed < gate; ++landed) {
      if (plan.frames[landed].accepted) mem.land(stream, plan.frames[landed]);
    }
    for (uint64_t s = mem.head; s < g.headBefore; ++s) mem.consume(s);
    storeRel(&mem.head, g.headBefore);
    return true;
  };
  writeStream(fd.get(), stream, kPieces[flags >> 5 & 3], plan.stop, rank, flags & kAbortHalfway, tick,
              [&](size_t at) {  // a gate's frame waits for the GPU
                written = at;
                nextGate();
                return gate < plan.frames.size() ? std::max(at, plan.frames[gate].header) : stream.size();
              });
  if (!(flags & kDestroyOpen) && !rank.abort) {
    ::shutdown(fd.get(), SHUT_WR);
    require(within(kHang, [&] {
              return rank.failures.load() > 0 || (plan.bye && rank.proxy->linesReceived() == plan.lines &&
                                                  rank.proxy->stepsReceived() == plan.steps);
            }), "the proxy takes a bye after the frames before it, or fails a cut or bad stream promptly");
  }
  rank.proxy.reset();
  const auto end = Clock::now() + kHang;
  while (!credits.eof) {  // the proxy closed its end: the rest of the credits, then the end of the stream
    if (!credits.pump(fd.get(), mem.head, rank.failures.load() == 0)) nap(fd.get(), false);
    require(Clock::now() < end, "a destroyed proxy closes its connections");
  }
  rank.requireFailures(loose || plan.bye ? 0 : 1);
  if (plan.bye && !loose) require(rank.failures.load() == 0, "a bye is taken quietly");
  require(mem.tail <= plan.tail, "the tail counts only accepted steps");
  if (!loose) require(mem.tail == plan.tail, "every valid Simple step before the end is published");

  // The frames after the model's last update. Strictly, the proxy did every accepted one (and may
  // have written a prefix of a cut Simple step); loosely, any of them, so that each of their lines
  // (and each byte of a Simple step) is as it landed or as before.
  const bool cut = plan.cutSimple;
  std::vector<char> explained(mem.buf.size(), 0);
  for (size_t i = landed; i < plan.frames.size(); ++i) {
    const Frame& f = plan.frames[i];
    const bool partial = cut && i + 1 == plan.frames.size();
    if (!f.accepted && !partial) continue;
    const size_t at = mem.frameAt(f.h), from = f.header + sizeof(DataHeader);
    const uint64_t n = std::min<uint64_t>(f.h.bytes, stream.size() - from), unit = isLines(f.h) ? kLine : 1;
    if (!loose && !partial) {
      mem.land(stream, f);
      continue;
    }
    for (uint64_t b = 0; b + unit <= n; b += unit) {
      if (memcmp(mem.buf.data() + at + b, stream.data() + from + b, unit) == 0) {
        memset(explained.data() + at + b, 1, unit);
      }
    }
  }
  for (size_t i = 0; i < mem.buf.size(); ++i) {
    require(explained[i] || mem.buf[i] == mem.model[i],
            "accepted frames land whole at their place (a cut Simple step in part), and nothing else lands");
  }
}

// ---- Send side: the input is the credit stream from rank 1 (fuzz_net_harness.h's SendPlan).

// Rank 0's sending GPU: Simple steps (payload, tagged size word, tail) and LL steps (each line of
// the step, in a shuffled order, as two 8-byte {data, flag} stores, `perTick` lines at a time, so
// that the proxy finds a step's lines in part and out of order).
struct LinesSendMem {
  LinesSendMem(uint64_t simple, uint64_t ll, uint64_t lines, uint32_t seed)
      : stepBytes(simple), llStepBytes(ll), perTick(lines), rng(seed), slots(kSteps * simple), llSlots(kSteps * ll, 0) {}

  // Writes more of step `published` if the credits allow it; whether it wrote anything.
  bool write(uint64_t total) {
    const uint64_t s = published;
    if (s >= total || s >= loadAcq(&head) + kSteps) return false;
    if (isSimpleStep(s)) {
      const uint64_t n = simpleBytes(s, stepBytes);
      for (uint64_t i = 0; i < n; ++i) slots[s % kSteps * stepBytes + i] = patternByte(s, i);
      __atomic_store_n(&sizes[s % kSteps], dev::stepSizeWord(s, n), __ATOMIC_RELAXED);
      storeRel(&tail, ++published);
      return true;
    }
    if (order.empty()) {
      order.resize(llLines(s, llStepBytes));
      for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      written.assign(order.size(), false);
      next = 0;
    }
    for (uint64_t k = 0; k < perTick && next < order.size(); ++k, ++next) {
      uint64_t words[2];
      char line[kLine];
      goodLine(s, order[next], line);
      memcpy(words, line, sizeof(words));
      uint64_t* at = reinterpret_cast<uint64_t*>(llSlots.data() + s % kSteps * llStepBytes + order[next] * kLine);
      const int first = (int)(rng() & 1);  // either half first
      __atomic_store_n(at + first, words[first], __ATOMIC_RELEASE);
      __atomic_store_n(at + 1 - first, words[1 - first], __ATOMIC_RELEASE);
      written[order[next]] = true;
    }
    if (next == order.size()) {
      order.clear();
      ++published;
    }
    return true;
  }
  // Lines of step `published` (being written) from line 0 up to the first not yet written.
  uint64_t writtenPrefix() const {
    uint64_t n = 0;
    while (!order.empty() && n < written.size() && written[n]) ++n;
    return n;
  }

  uint64_t stepBytes, llStepBytes, perTick;
  std::mt19937 rng;
  std::vector<char> slots, llSlots;
  uint64_t tail = 0, sizes[kSteps] = {}, head = 0;
  uint64_t published = 0;  // steps wholly written
  std::vector<uint64_t> order;
  std::vector<bool> written;
  uint64_t next = 0;
};

// Rank 1's receive proxy reading rank 0's frames: Simple steps in order, each the next the GPU
// published, with its bytes; LL lines of a step the GPU wrote or is writing, each run starting
// where the last one of its step ended (a step's lines are a prefix of its slot, sent once each),
// every line the one the GPU wrote.
struct LinesReader : DataFrameReader {
  explicit LinesReader(const LinesSendMem& m) : mem(m) {}
  void header() override {
    require(h.channel == 0 && (h.magic == kDataMagic || h.magic == kLinesMagic), "a frame is well formed");
    if (isLines(h)) {
      const uint64_t taken = h.step < linesRead.size() ? linesRead[h.step] : 0;
      require(!isSimpleStep(h.step) && h.step <= mem.published, "lines come from an LL step the GPU wrote");
      require(h.offset == taken * kLine && h.bytes > 0 && h.bytes % kLine == 0 &&
                  taken + h.bytes / kLine <= llLines(h.step, mem.llStepBytes),
              "a step's lines come in runs, each where the last ended, none past the step's end");
      return;
    }
    require(h.step == nextSimple && h.step < mem.published && h.offset == 0 &&
                h.bytes == simpleBytes(h.step, mem.stepBytes),
            "each Simple frame is the next Simple step the GPU published, with its size");
  }
  void payloadByte(char b) override {
    if (!isLines(h)) return require(b == patternByte(h.step, payloadGot), "a Simple frame carries its step's bytes");
    if (payloadGot % kLine == 0) goodLine(h.step, h.offset / kLine + payloadGot / kLine, line);
    require(b == line[payloadGot % kLine] || !linesChecked, "an LL frame carries the lines the GPU wrote");
  }
  void frameDone() override {
    if (isLines(h)) {
      if (linesRead.size() <= h.step) linesRead.resize(h.step + 1, 0);
      linesRead[h.step] += h.bytes / kLine;
    } else {
      do ++nextSimple; while (!isSimpleStep(nextSimple));
    }
    auto whole = [&](uint64_t s) {
      if (isSimpleStep(s)) return s < nextSimple;
      return s < linesRead.size() && linesRead[s] == llLines(s, mem.llStepBytes);
    };
    while (whole(done)) ++done;
  }

  const LinesSendMem& mem;
  // Credits that pass a step before all its lines arrived (kUngated: a lying peer) free its slot
  // for the GPU's next step there while the proxy may still send lines from it: their bytes are
  // then the newer step's, which the real receiver refuses by their flags.
  bool linesChecked = true;
  char line[kLine] = {};
  uint64_t nextSimple = 3;          // the first Simple step (isSimpleStep)
  std::vector<uint64_t> linesRead;  // per LL step
  uint64_t done = 0;                // steps [0, done) read whole
};

void sendLines(uint8_t flags, uint8_t sizes, uint8_t writing, Cursor body) {
  const bool tight = sizes & 8;
  const uint64_t stepBytes = simpleStepSize(sizes), llStepBytes = llStepSize(sizes), total = (sizes >> 4) * 3;
  const std::vector<char> stream = sendStream(body, flags & kXorFrames, total);
  const SendPlan plan = planSend(stream, total);
  // Lines per tick: 1 to 8, or a whole step at once.
  LinesSendMem mem(stepBytes, llStepBytes, writing & 8 ? UINT64_MAX : 1 + (writing & 7), writing >> 4);
  Rank rank;
  bootstrap::Fd fd = acceptSender(rank, sendSideOver(mem, mem.llSlots.data(), llStepBytes), tight);

  LinesReader reader(mem);
  reader.linesChecked = !(flags & kUngated);
  driveSendSide(flags, tight, stream, plan, rank, fd.get(), &mem.head, reader,
                [&](uint64_t) { return mem.write(total); }, [&] { return reader.done; });
  if ((flags & kDestroyOpen) && !rank.abort && rank.failures.load() == 0) {
    const uint64_t partial = mem.published < reader.linesRead.size() ? reader.linesRead[mem.published] : 0;
    require(reader.done == mem.published && partial == mem.writtenPrefix(),
            "an orderly destroy first sends every step and every line the GPU wrote");
  }
}

}  // namespace
}  // namespace net

void netProxyLines(const uint8_t* data, size_t size) {
  Cursor in{data, size};
  const uint8_t flags = in.take<uint8_t>(), sizes = in.take<uint8_t>(), third = in.take<uint8_t>();
  if (flags & net::kSendSide) net::sendLines(flags, sizes, third, in);
  else net::recvLines(flags, sizes, third % (2 * net::kSteps + 4), in);
  net::checkNoLeaks();
}

}  // namespace weft::fuzz
