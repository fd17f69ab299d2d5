// NetProxy instances as ranks in one process over loopback TCP (the wire checks: net_wire_test.cc),
// with threads and plain host memory standing in for the GPUs on both sides. Raw sockets play peers
// that misbehave: a foreign hello, garbage frames, a close in the middle of a run.
#include "net_proxy_test_util.h"

namespace weft::proxy {
namespace {

using namespace net_test;  // NOLINT(build/namespaces): this suite's helpers

TEST(NetProxy, ThousandsOfStepsThroughEightSlots) {
  std::vector<std::unique_ptr<Link>> links;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  const uint64_t steps = 5000;
  EXPECT_EQ(runLinks(links, steps), "");
  EXPECT_EQ(ranks[0]->proxy->stepsSent(), steps);
  EXPECT_EQ(ranks[1]->proxy->stepsReceived(), steps);
  EXPECT_EQ(ranks[0]->proxy->stepsReceived(), 0u);
  EXPECT_TRUE(waitUntil([&] { return loadAcq(&links[0]->send.head) == steps; }, 2000));
  expectNoFailures(ranks);
}

// An idle proxy stops spinning (it waits in poll() instead), and still moves the next steps: after
// a wake(), or on its own within its slow polling interval.
TEST(NetProxy, IdleProxiesSleepAndStillMoveTheNextSteps) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 100), "");
  ASSERT_TRUE(waitUntil([&] { return ranks[0]->proxy->idle() && ranks[1]->proxy->idle(); }, 2000))
      << "the proxies still spin long after the last step";
  ranks[0]->proxy->wake();
  ranks[1]->proxy->wake();
  EXPECT_EQ(runLinks(links, 100, 100), "") << "after a wake()";
  ASSERT_TRUE(waitUntil([&] { return ranks[0]->proxy->idle() && ranks[1]->proxy->idle(); }, 2000));
  const auto t0 = Clock::now();
  EXPECT_EQ(runLinks(links, 100, 200), "") << "without a wake()";
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  expectNoFailures(ranks);
}

TEST(NetProxy, LargeStepsArriveInPieces) {
  std::vector<std::unique_ptr<Link>> links;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 1, 0, 4, 1 << 20));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 48), "");
  EXPECT_EQ(ranks[1]->proxy->stepsSent(), 48u);
  expectNoFailures(ranks);
}

TEST(NetProxy, WorksOverIpv6) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(2, 5, AF_INET6);
  for (const auto& r : ranks) {
    if (r->listened != ncclSuccess) GTEST_SKIP() << "no IPv6 loopback here";
  }
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));
  links.push_back(std::make_unique<Link>(ranks, 1, 0, 0, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 300), "");
  expectNoFailures(ranks);
}

TEST(NetProxy, SeveralChannelsBothDirections) {
  std::vector<std::unique_ptr<Link>> links;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2);
  for (int channel : {0, 3, 5}) {
    links.push_back(std::make_unique<Link>(ranks, 0, 1, channel, 2048));
    links.push_back(std::make_unique<Link>(ranks, 1, 0, channel, 2048));
  }
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 1500), "");
  for (const auto& r : ranks) {
    EXPECT_EQ(r->proxy->stepsSent(), 3 * 1500u);
    EXPECT_EQ(r->proxy->stepsReceived(), 3 * 1500u);
  }
  expectNoFailures(ranks);
}

TEST(NetProxy, ThreeRanksAllPairs) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(3);
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      if (from != to) links.push_back(std::make_unique<Link>(ranks, from, to, 1, 1000));
    }
  }
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 700), "");
  for (const auto& r : ranks) EXPECT_EQ(r->proxy->stepsReceived(), 2 * 700u);
  expectNoFailures(ranks);
}

TEST(NetProxy, RefusesForeignHellosAndAcceptsTheRealOne) {
  std::vector<std::unique_ptr<Link>> links;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 512));
  const std::vector<ListenerDesc> d = descs(ranks);
  Status receiver = ncclInternalError;
  std::thread t([&] { receiver = ranks[1]->proxy->start(ranks[1]->sends, ranks[1]->recvs, d); });

  Hello foreignJob = makeHello(kJob ^ 1, 0, 1, 0, 512);
  Hello wrongChannel = makeHello(kJob, 0, 1, 2, 512);
  Hello wrongSize = makeHello(kJob, 0, 1, 0, 1024);
  for (const Hello* h : {&foreignJob, &wrongChannel, &wrongSize}) {
    Fd raw = connectRaw(d[1]);
    ASSERT_EQ(writeRaw(raw.get(), h, sizeof(*h)), Io::kOk);
    Hello echo;
    EXPECT_EQ(readRaw(raw.get(), &echo, sizeof(echo)), Io::kClosed);  // refused: closed without an answer
  }
  Fd silent = connectRaw(d[1]);  // connects and says nothing: must not block the real peer

  EXPECT_EQ(ranks[0]->proxy->start(ranks[0]->sends, ranks[0]->recvs, d), ncclSuccess);
  t.join();
  ASSERT_EQ(receiver, ncclSuccess);
  EXPECT_EQ(runLinks(links, 100), "");
  expectNoFailures(ranks);
}

TEST(NetProxy, RefusesASecondHelloForTheSameConnection) {
  RecvMem a(512), b(512);
  Ranks ranks = makeRanks(2);
  ranks[1]->recvs.push_back(a.side(0, 0));
  ranks[1]->recvs.push_back(b.side(1, 0));
  const std::vector<ListenerDesc> d = descs(ranks);
  Status receiver = ncclInternalError;
  std::thread t([&] { receiver = ranks[1]->proxy->start(ranks[1]->sends, ranks[1]->recvs, d); });
  Hello first = makeHello(kJob, 0, 1, 0, 512);
  Hello echo;
  Fd one = connectRaw(d[1]);
  ASSERT_EQ(writeRaw(one.get(), &first, sizeof(first)), Io::kOk);
  ASSERT_EQ(readRaw(one.get(), &echo, sizeof(echo)), Io::kOk);
  Fd two = connectRaw(d[1]);
  ASSERT_EQ(writeRaw(two.get(), &first, sizeof(first)), Io::kOk);
  EXPECT_EQ(readRaw(two.get(), &echo, sizeof(echo)), Io::kClosed);
  std::string last = log::lastErrorOfProcess();
  EXPECT_NE(last.find("already established"), std::string::npos) << last;
  Hello second = makeHello(kJob, 0, 1, 1, 512);
  Fd three = connectRaw(d[1]);
  ASSERT_EQ(writeRaw(three.get(), &second, sizeof(second)), Io::kOk);
  ASSERT_EQ(readRaw(three.get(), &echo, sizeof(echo)), Io::kOk);
  t.join();
  EXPECT_EQ(receiver, ncclSuccess);
}

TEST(NetProxy, UnexpectedChannelFailsTheSenderAndAbortEndsTheReceiver) {
  SendMem send(256);
  RecvMem recv(256);
  Ranks ranks = makeRanks(2, 30);
  ranks[0]->sends.push_back(send.side(1, 1));
  ranks[1]->recvs.push_back(recv.side(0, 0));
  const std::vector<ListenerDesc> d = descs(ranks);
  Status receiver = ncclSuccess;
  Clock::time_point aborted;
  std::thread t([&] { receiver = ranks[1]->proxy->start(ranks[1]->sends, ranks[1]->recvs, d); });
  EXPECT_EQ(ranks[0]->proxy->start(ranks[0]->sends, ranks[0]->recvs, d), ncclRemoteError);
  aborted = Clock::now();
  ranks[1]->abort = true;
  t.join();
  EXPECT_LT(secondsSince(aborted), 1.0);
  EXPECT_EQ(receiver, ncclSystemError);
  std::string last = log::lastErrorOfProcess();
  EXPECT_NE(last.find("channel 0 from rank 0 (pid 70 on node-0)"), std::string::npos) << last;
}

TEST(NetProxy, AbortStopsStartPromptly) {
  RecvMem recv(256);
  Ranks ranks = makeRanks(2, 30);
  ranks[1]->recvs.push_back(recv.side(0, 0));  // rank 0 never comes
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ranks[1]->abort = true;
  });
  auto t0 = Clock::now();
  EXPECT_EQ(ranks[1]->proxy->start(ranks[1]->sends, ranks[1]->recvs, descs(ranks)), ncclSystemError);
  EXPECT_LT(secondsSince(t0), 1.0);
  aborter.join();
}

TEST(NetProxy, SetupTimesOutNamingTheMissingPeer) {
  RecvMem a(256), b(256);
  Ranks ranks = makeRanks(3, 1);
  ranks[0]->recvs.push_back(a.side(2, 1));
  ranks[0]->recvs.push_back(b.side(0, 2));
  auto t0 = Clock::now();
  EXPECT_EQ(ranks[0]->proxy->start(ranks[0]->sends, ranks[0]->recvs, descs(ranks)), ncclSystemError);
  EXPECT_GT(secondsSince(t0), 0.9);
  EXPECT_LT(secondsSince(t0), 3.0);
  std::string last = log::lastErrorOfProcess();
  EXPECT_NE(last.find("channel 2 from rank 1 (pid 71 on node-1)"), std::string::npos) << last;
  EXPECT_NE(last.find("channel 0 from rank 2 (pid 72 on node-2)"), std::string::npos) << last;
}

TEST(NetProxy, RejectsABadListenerDescriptor) {
  SendMem send(256);
  Ranks ranks = makeRanks(2);
  ranks[0]->sends.push_back(send.side(0, 1));
  std::vector<ListenerDesc> d = descs(ranks);
  d[1].jobKey ^= 1;
  EXPECT_EQ(ranks[0]->proxy->start(ranks[0]->sends, ranks[0]->recvs, d), ncclRemoteError);
  EXPECT_EQ(ranks[0]->proxy->start(ranks[0]->sends, ranks[0]->recvs, d), ncclInternalError);  // once only
}

// A raw receiver for rank 0's connection to rank 1: accepts, answers the hello; the test does the rest.
struct RawReceiverFixture {
  explicit RawReceiverFixture(uint64_t stepBytes) : send(stepBytes), ranks(makeRanks(2)), raw(1) {
    ranks[0]->sends.push_back(send.side(0, 1));
    std::vector<ListenerDesc> d = descs(ranks);
    d[1] = raw.desc;
    Status started = ncclInternalError;
    std::thread t([&] { started = ranks[0]->proxy->start(ranks[0]->sends, ranks[0]->recvs, d); });
    conn = acceptRaw(raw.fd.get());
    Hello h;
    EXPECT_EQ(readRaw(conn.get(), &h, sizeof(h)), Io::kOk);
    std::string why;
    EXPECT_EQ(checkHello(h, kJob, 1, 2, "raw", &why), ncclSuccess) << why;
    EXPECT_EQ(writeRaw(conn.get(), &h, sizeof(h)), Io::kOk);
    t.join();
    EXPECT_EQ(started, ncclSuccess);
  }
  void publish(uint64_t steps, uint64_t bytes) {
    for (uint64_t s = loadAcq(&send.tail); s < steps; ++s) send.sizes[s % kSteps] = dev::stepSizeWord(s, bytes);
    storeRel(&send.tail, steps);
  }
  SendMem send;  // first: outlives the proxy
  Ranks ranks;
  RawListener raw;
  Fd conn;
};

TEST(NetProxy, ReceiverClosingMidRunFailsTheSender) {
  RawReceiverFixture f(64 << 10);
  f.publish(4, 64 << 10);
  char buf[1000];
  EXPECT_EQ(readRaw(f.conn.get(), buf, sizeof(buf)), Io::kOk);  // part of step 0
  auto t0 = Clock::now();
  f.conn.reset();
  EXPECT_TRUE(waitUntil([&] { return f.ranks[0]->failures.load() > 0; }, 1000));
  EXPECT_LT(secondsSince(t0), 1.0);
  EXPECT_EQ(f.ranks[0]->lastCode.load(), ncclRemoteError);
  std::string last = log::lastErrorOfProcess();
  EXPECT_NE(last.find("net proxy (rank 0), channel 0, sending to peer rank 1 (pid 71 on node-1)"), std::string::npos)
      << last;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(f.ranks[0]->failures.load(), 1);  // once
}

TEST(NetProxy, MalformedCreditsFailTheSender) {
  for (int kind = 0; kind < 3; ++kind) {
    RawReceiverFixture f(256);
    f.publish(2, 100);
    DataHeader h;
    char payload[100];
    for (int s = 0; s < 2; ++s) {
      ASSERT_EQ(readRaw(f.conn.get(), &h, sizeof(h)), Io::kOk);
      EXPECT_EQ(h.step, (uint64_t)s);
      EXPECT_EQ(h.bytes, 100u);
      ASSERT_EQ(readRaw(f.conn.get(), payload, sizeof(payload)), Io::kOk);
    }
    Credit c = kind == 0 ? makeCredit(0, 3) : kind == 1 ? Credit{0xdeadbeef, 0, 1} : makeCredit(5, 1);
    ASSERT_EQ(writeRaw(f.conn.get(), &c, sizeof(c)), Io::kOk);
    EXPECT_TRUE(waitUntil([&] { return f.ranks[0]->failures.load() > 0; }, 1000)) << kind;
    EXPECT_EQ(f.ranks[0]->lastCode.load(), ncclRemoteError);
    EXPECT_EQ(loadAcq(&f.send.head), 0u);  // nothing credited to the GPU
  }
}

TEST(NetProxy, StepSizeLargerThanTheSlotIsAnInternalError) {
  RawReceiverFixture f(256);
  f.publish(1, 257);
  EXPECT_TRUE(waitUntil([&] { return f.ranks[0]->failures.load() > 0; }, 1000));
  EXPECT_EQ(f.ranks[0]->lastCode.load(), ncclInternalError);
  EXPECT_EQ(f.ranks[0]->proxy->stepsSent(), 0u);
}

TEST(NetProxy, DestructorReturnsWhileAPeerIsStuck) {
  RawReceiverFixture f(1 << 20);
  f.publish(8, 1 << 20);  // 8 MiB that the raw peer never reads: the proxy's sends would block
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = Clock::now();
  f.ranks[0]->proxy.reset();  // gives up draining once nothing moved for a second
  EXPECT_LT(secondsSince(t0), 2.0);
  EXPECT_EQ(f.ranks[0]->failures.load(), 0);
}

// ncclSend, stream synchronize, ncclCommDestroy: the sending kernel is done once its steps are in
// the image, so the destroyed proxy must still send them before it says goodbye.
TEST(NetProxy, DestroyRightAfterPublishingStillDeliversTheSteps) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 1 << 20));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  SendMem& m = links[0]->send;
  for (uint64_t s = 0; s < kSteps; ++s) {  // a whole window, published at once
    const uint64_t n = stepSize(s, m.stepBytes, links[0]->seed);
    for (uint64_t i = 0; i < n; ++i) m.slots[(s % kSteps) * m.stepBytes + i] = byteAt(s, i, links[0]->seed);
    m.sizes[s % kSteps] = dev::stepSizeWord(s, n);
  }
  storeRel(&m.tail, kSteps);
  ranks[0]->proxy.reset();
  EXPECT_EQ(runReceiverGpu(links[0]->recv, kSteps, links[0]->seed), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ranks[1]->failures.load(), 0) << "the receiver saw a crash, not a goodbye";
  EXPECT_EQ(ranks[0]->failures.load(), 0);
}

// A raw sender on rank 1's connection to rank 0: connects, sends the hello, waits for the echo.
struct RawSenderFixture {
  explicit RawSenderFixture(uint64_t stepBytes) : recv(stepBytes), ranks(makeRanks(2)) {
    ranks[0]->recvs.push_back(recv.side(0, 1));
    std::vector<ListenerDesc> d = descs(ranks);
    Status started = ncclInternalError;
    std::thread t([&] { started = ranks[0]->proxy->start(ranks[0]->sends, ranks[0]->recvs, d); });
    conn = connectRaw(d[0]);
    Hello h = makeHello(kJob, 1, 0, 0, stepBytes);
    EXPECT_EQ(writeRaw(conn.get(), &h, sizeof(h)), Io::kOk);
    Hello echo;
    EXPECT_EQ(readRaw(conn.get(), &echo, sizeof(echo)), Io::kOk);
    EXPECT_EQ(memcmp(&echo, &h, sizeof(h)), 0);
    t.join();
    EXPECT_EQ(started, ncclSuccess);
  }
  void sendStep(uint64_t step, uint64_t bytes, char fill) {
    DataHeader h = makeDataHeader(0, step, bytes);
    std::vector<char> payload(bytes, fill);
    EXPECT_EQ(writeRaw(conn.get(), &h, sizeof(h)), Io::kOk);
    if (bytes > 0) EXPECT_EQ(writeRaw(conn.get(), payload.data(), bytes), Io::kOk);
  }
  bool failedWith(ncclResult_t code) {
    return waitUntil([&] { return ranks[0]->failures.load() > 0; }, 1000) && ranks[0]->lastCode.load() == code;
  }
  RecvMem recv;  // first: outlives the proxy
  Ranks ranks;
  Fd conn;
};

TEST(NetProxy, SenderClosingMidStepFailsTheReceiver) {
  RawSenderFixture f(4096);
  f.sendStep(0, 4096, 'a');
  EXPECT_TRUE(waitUntil([&] { return loadAcq(&f.recv.tail) == 1; }, 1000));
  DataHeader h = makeDataHeader(0, 1, 4096);
  ASSERT_EQ(writeRaw(f.conn.get(), &h, sizeof(h)), Io::kOk);
  ASSERT_EQ(writeRaw(f.conn.get(), "half", 4), Io::kOk);
  auto t0 = Clock::now();
  f.conn.reset();
  EXPECT_TRUE(f.failedWith(ncclRemoteError));
  EXPECT_LT(secondsSince(t0), 1.0);
  EXPECT_EQ(loadAcq(&f.recv.tail), 1u);  // the torn step was never published
  std::string last = log::lastErrorOfProcess();
  EXPECT_NE(last.find("receiving from peer rank 1 (pid 71 on node-1)"), std::string::npos) << last;
  EXPECT_NE(last.find("middle of step 1"), std::string::npos) << last;
}

TEST(NetProxy, MalformedDataHeadersFailTheReceiverWithoutWritingOutOfBounds) {
  const uint64_t stepBytes = 1024;
  struct Case {
    const char* name;
    DataHeader h;
    uint64_t payload;
  } cases[] = {
      {"too many bytes", makeDataHeader(0, 1, stepBytes + 1), stepBytes + 1},
      {"huge byte count", makeDataHeader(0, 1, ~0ull >> 1), 8192},
      {"wrong magic", DataHeader{0x20544547, 0, 1, 100}, 100},
      {"wrong step", makeDataHeader(0, 2, 100), 100},
      {"wrong channel", makeDataHeader(9, 1, 100), 100},
  };
  for (const Case& c : cases) {
    RawSenderFixture f(stepBytes);
    f.sendStep(0, 10, 'a');  // one good step first
    EXPECT_TRUE(waitUntil([&] { return loadAcq(&f.recv.tail) == 1; }, 1000)) << c.name;
    ASSERT_EQ(writeRaw(f.conn.get(), &c.h, sizeof(c.h)), Io::kOk);
    std::vector<char> garbage(c.payload, 'Z');
    (void)writeRaw(f.conn.get(), garbage.data(), garbage.size());  // may fail once the proxy closed
    EXPECT_TRUE(f.failedWith(ncclRemoteError)) << c.name;
    EXPECT_EQ(loadAcq(&f.recv.tail), 1u) << c.name;
    EXPECT_TRUE(f.recv.untouchedOutside(1)) << c.name;  // only step 0's slot was written
    for (char b : f.recv.buf) ASSERT_NE(b, 'Z') << c.name;
  }
}

TEST(NetProxy, StepBeyondTheCreditWindowIsRefused) {
  RawSenderFixture f(64);
  for (uint64_t s = 0; s < kSteps; ++s) f.sendStep(s, 64, 'a');  // the receiver GPU consumes nothing
  EXPECT_TRUE(waitUntil([&] { return loadAcq(&f.recv.tail) == (uint64_t)kSteps; }, 1000));
  f.sendStep(kSteps, 64, 'Z');  // would overwrite slot 0, still unread
  EXPECT_TRUE(f.failedWith(ncclRemoteError));
  for (char b : f.recv.buf) ASSERT_NE(b, 'Z');
}

// ---------------------------------------------------------------------------------------------
// Abort and teardown between real proxies

TEST(NetProxy, AbortStopsTheProgressThreadQuietly) {
  std::vector<std::unique_ptr<Link>> links;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 128));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 20), "");
  ranks[0]->abort = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  SendMem& m = links[0]->send;
  m.sizes[20 % kSteps] = dev::stepSizeWord(20, 10);
  storeRel(&m.tail, 21);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(ranks[0]->proxy->stepsSent(), 20u);  // step 20 was not moved
  EXPECT_EQ(ranks[1]->proxy->stepsReceived(), 20u);
  auto t0 = Clock::now();
  ranks[0]->proxy.reset();
  EXPECT_LT(secondsSince(t0), 0.5);
  EXPECT_EQ(ranks[0]->failures.load(), 0);
  // The aborted rank closed without a goodbye: its peer notices.
  EXPECT_TRUE(waitUntil([&] { return ranks[1]->failures.load() > 0; }, 1000));
  EXPECT_EQ(ranks[1]->lastCode.load(), ncclRemoteError);
}

TEST(NetProxy, OrderlyDestroyIsQuietUntilDataIsOwed) {
  std::vector<std::unique_ptr<Link>> links;  // declared first: outlives the proxies
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 2, 128));
  links.push_back(std::make_unique<Link>(ranks, 1, 0, 2, 128));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 50), "");
  auto t0 = Clock::now();
  ranks[1]->proxy.reset();  // rank 0 is still connected both ways
  EXPECT_LT(secondsSince(t0), 0.5);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(ranks[0]->failures.load(), 0);  // a goodbye, not a crash
  // Sending more to the rank that left is an error.
  SendMem& m = links[0]->send;
  m.sizes[50 % kSteps] = dev::stepSizeWord(50, 1);
  storeRel(&m.tail, 51);
  EXPECT_TRUE(waitUntil([&] { return ranks[0]->failures.load() > 0; }, 1000));
  EXPECT_EQ(ranks[0]->lastCode.load(), ncclRemoteError);
  t0 = Clock::now();
  ranks[0]->proxy.reset();
  EXPECT_LT(secondsSince(t0), 0.5);
}

// Rank 2 vanishes (its sockets close without a word); rank 1 notices and stops, and rank 0, which
// only talks to rank 1, learns from rank 1's fail frame that rank 2 was the cause.
TEST(NetProxy, AFailureCascadeNamesTheRankThatFailedFirst) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(3);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));
  links.push_back(std::make_unique<Link>(ranks, 1, 0, 0, 4096));
  links.push_back(std::make_unique<Link>(ranks, 2, 1, 0, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 50), "");
  ranks[2]->abort.store(true);  // an abort is quiet: its peers see plain closes, as after a crash
  ASSERT_TRUE(waitUntil([&] { return ranks[0]->failures.load() > 0 && ranks[1]->failures.load() > 0; }, 3000));
  EXPECT_EQ(ranks[1]->lastCode.load(), ncclRemoteError);
  EXPECT_NE(ranks[1]->lastError.find("receiving from peer rank 2"), std::string::npos) << ranks[1]->lastError;
  EXPECT_EQ(ranks[0]->lastCode.load(), ncclRemoteError);
  EXPECT_NE(ranks[0]->lastError.find("after its connection with peer rank 2 (pid 72 on node-2) failed"),
            std::string::npos) << ranks[0]->lastError;
  EXPECT_EQ(ranks[0]->failures.load(), 1);
  EXPECT_EQ(ranks[1]->failures.load(), 1);
}

}  // namespace
}  // namespace weft::proxy
