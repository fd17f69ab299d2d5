// The LL protocol through the network proxies (proxy/net_proxy_lines.cc): threads stand in for the
// GPUs and run one connection's steps as a sequence of kernels would, Simple and LL steps mixed on
// the same counters. The sending "GPU" writes each LL line as the two 8-byte halves another agent
// may see of a 16-byte store (flags high half first), its lines in a shuffled order; the receiving
// one waits for each line's flags, checks the data, and checks that no line past the step's end
// carries the step's flag.
#include <algorithm>
#include <random>

#include "device/work_math.h"
#include "net_proxy_test_util.h"

namespace weft::proxy::net_test {
namespace {

constexpr uint64_t kLLStepBytes = 4096;  // 256 lines, 2 KiB of payload
constexpr uint64_t kLine = dev::kLLLineBytes;

// Runs of LL steps with Simple ones between, as small and large calls alternate.
bool isLLStep(uint64_t s, uint32_t seed) { return ((s / 5) + seed) % 3 != 0; }
// Payload bytes of LL step s: 1 to the whole slot's payload.
uint64_t llBytes(uint64_t s, uint32_t seed) {
  const uint64_t payload = dev::llStepPayload(kLLStepBytes);
  if (s % 11 == 0) return payload;
  return 1 + ((s + 7) * 0x9e3779b97f4a7c15ull ^ seed) % payload;
}
uint32_t llWord(uint64_t s, uint64_t i, uint32_t seed) { return (uint32_t)(s * 2654435761u + i * 40503u + seed); }
uint64_t linesOf(uint64_t bytes) { return (bytes + dev::kLLLineDataBytes - 1) / dev::kLLLineDataBytes; }

uint64_t load8(const char* p) { return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE); }
void store8(char* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE); }
bool carries(const char* line, uint32_t flag) {
  return (uint32_t)(load8(line) >> 32) == flag && (uint32_t)(load8(line + 8) >> 32) == flag;
}

struct MixedLink {
  MixedLink(Ranks& ranks, int from, int to, int channel, uint64_t stepBytes)
      : send(stepBytes), recv(stepBytes), seed((uint32_t)(from * 1000 + to * 100 + channel)),
        sendLL(kSteps * kLLStepBytes, 0), recvLL(2 * RecvMem::kGuard + kSteps * kLLStepBytes, kCanary) {
    NetSendSide s = send.side(channel, to);
    s.llSlots = sendLL.data();
    s.llStepBytes = kLLStepBytes;
    NetRecvSide r = recv.side(channel, from);
    r.llSlots = recvLL.data() + RecvMem::kGuard;
    r.llStepBytes = kLLStepBytes;
    ranks[from]->sends.push_back(s);
    ranks[to]->recvs.push_back(r);
    // The receiver's LL slots start zeroed, as connection memory does (no step's flag is 0).
    std::fill(recvLL.begin() + RecvMem::kGuard, recvLL.end() - RecvMem::kGuard, 0);
  }
  char* recvSlot(uint64_t s) { return recvLL.data() + RecvMem::kGuard + (s % kSteps) * kLLStepBytes; }
  SendMem send;
  RecvMem recv;
  uint32_t seed;
  std::vector<char> sendLL, recvLL;
};

std::string runMixedSender(MixedLink& l, uint64_t steps) {
  SendMem& m = l.send;
  std::mt19937 rng(l.seed);
  auto end = Clock::now() + std::chrono::seconds(10);
  for (uint64_t s = 0; s < steps; ++s) {
    while (loadAcq(&m.head) + kSteps <= s) {
      if (Clock::now() > end) return "sender stuck at step " + std::to_string(s);
      sched_yield();
    }
    if (!isLLStep(s, l.seed)) {
      const uint64_t n = stepSize(s, m.stepBytes, l.seed);
      char* slot = m.slots.data() + (s % kSteps) * m.stepBytes;
      for (uint64_t i = 0; i < n; ++i) slot[i] = byteAt(s, i, l.seed);
      // The proxy may still be reading this word for an LL step kSteps before (net_proxy.cc).
      __atomic_store_n(&m.sizes[s % kSteps], dev::stepSizeWord(s, n), __ATOMIC_RELAXED);
      storeRel(&m.tail, s + 1);
      continue;
    }
    const uint64_t lines = linesOf(llBytes(s, l.seed));
    std::vector<uint64_t> order(lines);
    for (uint64_t i = 0; i < lines; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    const uint64_t flag = (uint64_t)dev::llFlag(s) << 32;
    char* slot = l.sendLL.data() + (s % kSteps) * kLLStepBytes;
    for (uint64_t i = 0; i < lines; ++i) {
      const uint64_t line = order[i];
      store8(slot + line * kLine + 8, flag | llWord(s, 2 * line + 1, l.seed));
      if (i % 64 == 17) sched_yield();  // let the proxy see a half-written line
      store8(slot + line * kLine, flag | llWord(s, 2 * line, l.seed));
    }
  }
  return "";
}

std::string runMixedReceiver(MixedLink& l, uint64_t steps) {
  RecvMem& m = l.recv;
  auto end = Clock::now() + std::chrono::seconds(10);
  auto stuck = [&](uint64_t s) { return Clock::now() > end ? "receiver stuck at step " + std::to_string(s) : ""; };
  uint64_t simpleEnd = 0;
  for (uint64_t s = 0; s < steps; ++s) {
    if (!isLLStep(s, l.seed)) {
      while (loadAcq(&m.tail) <= s) {
        if (!stuck(s).empty()) return stuck(s);
        sched_yield();
      }
      const uint64_t n = stepSize(s, m.stepBytes, l.seed);
      char* slot = m.slots() + (s % kSteps) * m.stepBytes;
      for (uint64_t i = 0; i < m.stepBytes; ++i) {
        if (slot[i] != (i < n ? byteAt(s, i, l.seed) : kCanary)) {
          return "Simple step " + std::to_string(s) + " is wrong";
        }
      }
      memset(slot, kCanary, m.stepBytes);
      simpleEnd = s + 1;
      storeRel(&m.head, s + 1);
      continue;
    }
    const uint64_t lines = linesOf(llBytes(s, l.seed));
    const uint32_t flag = dev::llFlag(s);
    const char* slot = l.recvSlot(s);
    for (uint64_t line = 0; line < lines; ++line) {
      while (!carries(slot + line * kLine, flag)) {
        if (!stuck(s).empty()) return stuck(s) + " (LL line " + std::to_string(line) + ")";
        sched_yield();
      }
      if ((uint32_t)load8(slot + line * kLine) != llWord(s, 2 * line, l.seed) ||
          (uint32_t)load8(slot + line * kLine + 8) != llWord(s, 2 * line + 1, l.seed)) {
        return "LL step " + std::to_string(s) + " line " + std::to_string(line) + " is wrong";
      }
    }
    if (lines * kLine < kLLStepBytes && (uint32_t)(load8(slot + lines * kLine) >> 32) == flag) {
      return "LL step " + std::to_string(s) + ": a line past its end carries its flag";
    }
    storeRel(&m.head, s + 1);
  }
  if (loadAcq(&m.tail) != simpleEnd) return "the tail is not the last Simple step's";
  for (size_t i = 0; i < RecvMem::kGuard; ++i) {
    if (l.recvLL[i] != kCanary || l.recvLL[l.recvLL.size() - 1 - i] != kCanary) return "LL guard bytes were written";
  }
  return m.untouchedOutside(kSteps) ? "" : "Simple guard bytes were written";
}

std::string runMixed(std::vector<std::unique_ptr<MixedLink>>& links, uint64_t steps) {
  std::vector<std::string> errors(links.size() * 2);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < links.size(); ++i) {
    threads.emplace_back([&, i] { errors[2 * i] = runMixedSender(*links[i], steps); });
    threads.emplace_back([&, i] { errors[2 * i + 1] = runMixedReceiver(*links[i], steps); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) return "link " + std::to_string(i / 2) + ": " + errors[i];
  }
  return "";
}

uint64_t simpleSteps(uint64_t steps, uint32_t seed) {
  uint64_t n = 0;
  for (uint64_t s = 0; s < steps; ++s) n += isLLStep(s, seed) ? 0 : 1;
  return n;
}

TEST(NetProxyLL, MixedSimpleAndLLStepsThroughEightSlots) {
  std::vector<std::unique_ptr<MixedLink>> links;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<MixedLink>(ranks, 0, 1, 0, 8192));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runMixed(links, 3000), "");
  EXPECT_EQ(ranks[1]->proxy->stepsReceived(), simpleSteps(3000, links[0]->seed));
  EXPECT_GT(ranks[1]->proxy->linesReceived(), 3000u);
  expectNoFailures(ranks);
}

TEST(NetProxyLL, SeveralChannelsBothDirections) {
  std::vector<std::unique_ptr<MixedLink>> links;
  Ranks ranks = makeRanks(3);
  for (int c = 0; c < 2; ++c) {
    links.push_back(std::make_unique<MixedLink>(ranks, 0, 1, c, 4096));
    links.push_back(std::make_unique<MixedLink>(ranks, 1, 2, c, 4096));
    links.push_back(std::make_unique<MixedLink>(ranks, 2, 0, c, 4096));
  }
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runMixed(links, 600), "");
  expectNoFailures(ranks);
}

// A destroyed proxy still sends the LL lines its GPU wrote (the kernel finished believing them sent).
TEST(NetProxyLL, DestroyRightAfterTheLinesStillDeliversThem) {
  std::vector<std::unique_ptr<MixedLink>> links;
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<MixedLink>(ranks, 0, 1, 0, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  uint64_t steps = 0;
  while (steps < kSteps && isLLStep(steps, links[0]->seed)) ++steps;  // the first run of LL steps
  ASSERT_GT(steps, 0u);
  ASSERT_EQ(runMixedSender(*links[0], steps), "");
  ranks[0]->proxy.reset();
  EXPECT_EQ(runMixedReceiver(*links[0], steps), "");
  expectNoFailures(ranks);
}

// A raw sender with a hello for LL slots of kLLStepBytes; the receiving proxy's GPU never consumes.
struct RawLLSender {
  explicit RawLLSender(uint64_t llStepBytes) : recv(1024), ll(kSteps * kLLStepBytes, 0) {
    NetRecvSide r = recv.side(0, 1);
    if (llStepBytes != 0) {
      r.llSlots = ll.data();
      r.llStepBytes = llStepBytes;
    }
    ranks[0]->recvs.push_back(r);
    std::vector<ListenerDesc> d = {ranks[0]->proxy->desc(), ranks[1]->proxy->desc()};
    std::thread t([&] { started = ranks[0]->proxy->start({}, ranks[0]->recvs, d); });
    fd = connectRaw(ranks[0]->proxy->desc());
    const Hello h = makeHello(kJob, 1, 0, 0, 1024, llStepBytes);
    EXPECT_EQ(writeRaw(fd.get(), &h, sizeof(h)), Io::kOk);
    Hello echo;
    EXPECT_EQ(readRaw(fd.get(), &echo, sizeof(echo)), Io::kOk);
    t.join();
    EXPECT_EQ(started, ncclSuccess);
  }
  void sendLines(uint64_t step, uint32_t offset, uint32_t lines, uint32_t flag) {
    std::vector<uint32_t> payload(lines * 4);
    for (uint32_t i = 0; i < lines; ++i) {
      payload[4 * i] = 10 + i;
      payload[4 * i + 2] = 20 + i;
      payload[4 * i + 1] = payload[4 * i + 3] = flag;
    }
    const DataHeader h = makeLinesHeader(0, step, offset, lines * kLine);
    EXPECT_EQ(writeRaw(fd.get(), &h, sizeof(h)), Io::kOk);
    EXPECT_EQ(writeRaw(fd.get(), payload.data(), lines * kLine), Io::kOk);
  }
  RecvMem recv;  // first: outlive the proxy
  std::vector<char> ll;
  Ranks ranks = makeRanks(2);
  Status started = ncclInternalError;
  Fd fd;
};

TEST(NetProxyLL, LinesLandInTheirSlotAndAWrongFlagFailsTheReceiver) {
  RawLLSender raw(kLLStepBytes);
  raw.sendLines(2, 32, 3, dev::llFlag(2));
  ASSERT_TRUE(waitUntil([&] { return raw.ranks[0]->proxy->linesReceived() == 3; }, 2000));
  const char* slot = raw.ll.data() + 2 * kLLStepBytes;
  for (uint32_t i = 0; i < 3; ++i) {
    uint32_t w[4];
    memcpy(w, slot + 32 + i * kLine, sizeof(w));
    EXPECT_EQ(w[0], 10 + i);
    EXPECT_EQ(w[2], 20 + i);
    EXPECT_EQ(w[1], dev::llFlag(2));
  }
  for (uint64_t i = 0; i < raw.ll.size(); ++i) {
    if (i < 2 * kLLStepBytes + 32 || i >= 2 * kLLStepBytes + 32 + 3 * kLine) ASSERT_EQ(raw.ll[i], 0) << i;
  }
  raw.sendLines(3, 0, 2, dev::llFlag(4));  // step 4's flag on step 3's lines
  ASSERT_TRUE(waitUntil([&] { return raw.ranks[0]->failures.load() > 0; }, 2000));
  EXPECT_EQ(raw.ranks[0]->lastCode.load(), ncclRemoteError);
  EXPECT_NE(raw.ranks[0]->lastError.find("LL line 0 of step 3 carries flags"), std::string::npos)
      << raw.ranks[0]->lastError;
  for (uint64_t i = 3 * kLLStepBytes; i < 4 * kLLStepBytes; ++i) ASSERT_EQ(raw.ll[i], 0) << "step 3 was written";
}

TEST(NetProxyLL, LinesOnAConnectionWithoutLLAreRefused) {
  RawLLSender raw(0);
  raw.sendLines(0, 0, 1, dev::llFlag(0));
  ASSERT_TRUE(waitUntil([&] { return raw.ranks[0]->failures.load() > 0; }, 2000));
  EXPECT_NE(raw.ranks[0]->lastError.find("without LL slots"), std::string::npos) << raw.ranks[0]->lastError;
}

TEST(NetProxyLL, LinesBeyondTheCreditWindowAreRefused) {
  RawLLSender raw(kLLStepBytes);
  raw.sendLines(kSteps, 0, 1, dev::llFlag(kSteps));  // the GPU consumed nothing: slot 0 holds step 0
  ASSERT_TRUE(waitUntil([&] { return raw.ranks[0]->failures.load() > 0; }, 2000));
  EXPECT_NE(raw.ranks[0]->lastError.find("ignored the credits"), std::string::npos) << raw.ranks[0]->lastError;
}

TEST(NetProxyLL, AHelloForOtherLLSlotsIsRefused) {
  std::unique_ptr<MixedLink> link;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2, 1);
  link = std::make_unique<MixedLink>(ranks, 1, 0, 0, 1024);
  ranks[1]->sends[0].llStepBytes = kLLStepBytes / 2;  // the sender's slots are smaller than the receiver's
  std::vector<Status> started = startAll(ranks);
  EXPECT_NE(started[0], ncclSuccess);  // the receiver waited for a hello it could take, then timed out
  EXPECT_NE(started[1], ncclSuccess);
}

}  // namespace
}  // namespace weft::proxy::net_test
