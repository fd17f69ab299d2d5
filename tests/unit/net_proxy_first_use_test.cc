// Connections made on first use (NetProxy::expectReceives / addSends) joining proxies that already
// run: the receiver declares its side, the sender connects, the receiver's progress thread accepts.
#include "net_proxy_test_util.h"

namespace weft::proxy {
namespace {

using namespace net_test;  // NOLINT(build/namespaces): this suite's helpers

// Declares the receive side of the link made last (from -> to) at its receiver, then connects its
// send side (the order a communicator keeps: the receiver's offer precedes the sender's connect).
// Returns what expectReceives and addSends said.
std::vector<Status> connectOnFirstUse(Ranks& ranks, int from, int to) {
  const NetRecvSide recv = ranks[to]->recvs.back();
  const NetSendSide send = ranks[from]->sends.back();
  ranks[to]->recvs.pop_back();
  ranks[from]->sends.pop_back();
  return {ranks[to]->proxy->expectReceives({recv}), ranks[from]->proxy->addSends({send})};
}

TEST(NetProxyFirstUse, ConnectionsJoinRunningProxiesWhileOthersMoveData) {
  std::vector<std::unique_ptr<Link>> first, later;  // declared first: outlive the proxies
  Ranks ranks = makeRanks(2);
  first.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));  // made at start
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  ranks[0]->sends.clear();
  ranks[1]->recvs.clear();
  std::string early;
  std::thread traffic([&] { early = runLinks(first, 3000); });  // while the others are made
  for (int channel : {2, 3}) {
    later.push_back(std::make_unique<Link>(ranks, 0, 1, channel, 4096));
    for (Status s : connectOnFirstUse(ranks, 0, 1)) EXPECT_EQ(s, ncclSuccess);
  }
  later.push_back(std::make_unique<Link>(ranks, 1, 0, 2, 2048));
  for (Status s : connectOnFirstUse(ranks, 1, 0)) EXPECT_EQ(s, ncclSuccess);
  traffic.join();
  EXPECT_EQ(early, "");
  EXPECT_EQ(runLinks(later, 1000), "");
  EXPECT_EQ(ranks[1]->proxy->stepsReceived(), 3000u + 2 * 1000u);
  EXPECT_EQ(ranks[0]->proxy->stepsReceived(), 1000u);
  expectNoFailures(ranks);
}

// Proxies that start with no connection at all (a rank whose only network peers are reached on
// first use) and have gone idle still accept them, and every pair of three ranks then talks.
TEST(NetProxyFirstUse, IdleProxiesWithoutConnectionsAcceptThemLater) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(3);
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  ASSERT_TRUE(waitUntil([&] { return ranks[0]->proxy->idle() && ranks[2]->proxy->idle(); }, 2000));
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      if (from == to) continue;
      links.push_back(std::make_unique<Link>(ranks, from, to, 1, 1000));
      for (Status s : connectOnFirstUse(ranks, from, to)) ASSERT_EQ(s, ncclSuccess);
    }
  }
  EXPECT_EQ(runLinks(links, 700), "");
  for (const auto& r : ranks) EXPECT_EQ(r->proxy->stepsReceived(), 2 * 700u);
  expectNoFailures(ranks);
}

// A sender that connects where nothing was declared is refused (the receiver logs it and goes on);
// once the receiver declares the side, the same connection is made and carries data.
TEST(NetProxyFirstUse, UndeclaredConnectionIsRefusedWithoutHarmingTheReceiver) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(2);
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 5, 4096));
  EXPECT_EQ(ranks[0]->proxy->addSends({ranks[0]->sends.back()}), ncclRemoteError);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ranks[1]->failures.load(), 0);
  // The refused side is forgotten: once the receiver declares it, the same connection is made.
  for (Status s : connectOnFirstUse(ranks, 0, 1)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(links, 200), "");
  // A side declared and never connected costs nothing, at run time or at destruction.
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 7, 4096));
  EXPECT_EQ(ranks[1]->proxy->expectReceives({ranks[1]->recvs.back()}), ncclSuccess);
  expectNoFailures(ranks);
  const auto t0 = Clock::now();
  ranks[1]->proxy.reset();
  ranks[0]->proxy.reset();
  EXPECT_LT(secondsSince(t0), 1.0);
}

TEST(NetProxyFirstUse, SidesDeclaredTwiceAreRefused) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(2);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  EXPECT_EQ(ranks[1]->proxy->expectReceives({ranks[1]->recvs[0]}), ncclInternalError);  // made at start
  EXPECT_EQ(ranks[0]->proxy->addSends({ranks[0]->sends[0]}), ncclInternalError);
  NetRecvSide bad = ranks[1]->recvs[0];
  bad.channel = 1;
  bad.slots = nullptr;
  EXPECT_EQ(ranks[1]->proxy->expectReceives({bad}), ncclInternalError);
  expectNoFailures(ranks);
}

// User-pains row 17 in steady state: while data moves, a running proxy's listener gets a port scan
// (connect, close), an HTTP request, random bytes the size of a hello, a hello cut short and held,
// and more silent connections than it keeps. No rank fails, the data keeps moving, what is not a
// hello is closed, the oldest idle connections go first, and a connection made on first use
// afterwards works.
TEST(NetProxyFirstUse, ScansAndGarbageOnTheListenerLeaveTheDataMoving) {
  std::vector<std::unique_ptr<Link>> first, later;
  Ranks ranks = makeRanks(2);
  first.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  ranks[0]->sends.clear();
  ranks[1]->recvs.clear();
  std::string early;
  std::thread traffic([&] { early = runLinks(first, 5000); });
  const ListenerDesc d = descs(ranks)[1];
  { Fd scan = connectRaw(d); }
  Fd http = connectRaw(d), noise = connectRaw(d), cut = connectRaw(d);
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: weft\r\nUser-Agent: scanner\r\n\r\n";
  ASSERT_EQ(writeRaw(http.get(), get.data(), get.size()), Io::kOk);
  char random[sizeof(Hello)];
  for (size_t i = 0; i < sizeof(random); ++i) random[i] = (char)(i * 97 + 13);
  ASSERT_EQ(writeRaw(noise.get(), random, sizeof(random)), Io::kOk);
  const Hello half = makeHello(kJob, 0, 1, 2, 4096);
  ASSERT_EQ(writeRaw(cut.get(), &half, sizeof(half) / 2), Io::kOk);
  std::vector<Fd> idle;
  for (int i = 0; i < 80; ++i) idle.push_back(connectRaw(d));
  char byte;
  for (Fd* refused : {&http, &noise, &cut}) {  // the cut hello is the oldest left: closed for room
    EXPECT_EQ(readRaw(refused->get(), &byte, 1, 3000), Io::kClosed);
  }
  EXPECT_EQ(readRaw(idle.back().get(), &byte, 1, 100), Io::kTimedOut);  // the newest is kept
  traffic.join();
  EXPECT_EQ(early, "");
  later.push_back(std::make_unique<Link>(ranks, 0, 1, 2, 4096));
  for (Status s : connectOnFirstUse(ranks, 0, 1)) EXPECT_EQ(s, ncclSuccess);
  EXPECT_EQ(runLinks(later, 500), "");
  EXPECT_EQ(ranks[1]->proxy->stepsReceived(), 5500u);
  expectNoFailures(ranks);
}

// After an abort (or a failure) the progress thread is gone: adding connections fails at once,
// naming the stop, instead of waiting for a thread that will never take them.
TEST(NetProxyFirstUse, AddingAfterTheProxyStoppedFailsAtOnce) {
  std::vector<std::unique_ptr<Link>> links;
  Ranks ranks = makeRanks(2);
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 2, 4096));
  ranks[0]->abort.store(true);
  const auto t0 = Clock::now();
  EXPECT_NE(ranks[0]->proxy->addSends({ranks[0]->sends.back()}), ncclSuccess);
  EXPECT_LT(secondsSince(t0), 1.0);
  ranks[1]->abort.store(true);
  EXPECT_NE(ranks[1]->proxy->expectReceives({ranks[1]->recvs.back()}), ncclSuccess);
  EXPECT_EQ(ranks[0]->failures.load() + ranks[1]->failures.load(), 0);  // an abort is quiet
}

}  // namespace
}  // namespace weft::proxy
