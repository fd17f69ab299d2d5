// The network plugin loader (transport/net/net_plugin.h) and the plugin proxy (proxy/plugin_proxy.h)
// with the test plugin of tests/unit/net_plugin (TCP over loopback, NCCL's ext-net ABI v8 and v10):
// ranks are PluginProxy instances in one process, host memory and threads stand in for the GPUs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net_proxy_test_util.h"
#include "device/work_math.h"
#include "proxy/plugin_proxy.h"
#include "test_env.h"
#include "transport/net/net_plugin.h"

namespace weft::proxy {
namespace {

using namespace net_test;
using transport::NetPlugin;

std::string pluginPath(const char* file) { return std::string(WEFT_NET_PLUGIN_DIR) + "/" + file; }

// Loads (and initializes again, which re-reads the test plugin's settings) the plugin at `file`.
const NetPlugin* load(const char* file) {
  NetPlugin* plugin = nullptr;
  std::string why;
  EXPECT_EQ(NetPlugin::loadForTest(pluginPath(file), &plugin, &why), ncclSuccess) << why;
  return plugin;
}

TEST(NetPluginLoader, PicksTheNewestTableAndReadsTheDevice) {
  const NetPlugin* v10 = load("libnccl-net-weftloop.so");
  ASSERT_NE(v10, nullptr);
  EXPECT_EQ(v10->version(), 10);
  EXPECT_EQ(v10->name(), "weftloop");
  EXPECT_EQ(v10->devices(), 1);
  EXPECT_NE(v10->library().find("libnccl-net-weftloop.so"), std::string::npos) << v10->library();
  transport::NetPluginDevice dev;
  ASSERT_EQ(v10->device(0, &dev), ncclSuccess);
  EXPECT_EQ(dev.name, "weftloop");
  EXPECT_EQ(dev.ptrSupport, netabi::kPtrHost);
  EXPECT_EQ(dev.speedMbps, 10000);
  EXPECT_EQ(dev.maxTransferBytes, size_t(1) << 30);
  EXPECT_NE(v10->device(1, &dev), ncclSuccess) << "one device only";
  const NetPlugin* v8 = load("libnccl-net-weftloop8.so");
  ASSERT_NE(v8, nullptr);
  EXPECT_EQ(v8->version(), 8);
  EXPECT_EQ(v8->name(), "weftloop8");
  ASSERT_EQ(v8->device(0, &dev), ncclSuccess);
  EXPECT_EQ(dev.maxTransferBytes, 0u) << "v8 properties carry no transfer limit";
}

TEST(NetPluginLoader, SaysWhyALibraryCannotServe) {
  NetPlugin* plugin = nullptr;
  std::string why;
  EXPECT_EQ(NetPlugin::loadForTest(pluginPath("libnccl-net-weftempty.so"), &plugin, &why), ncclInvalidUsage);
  EXPECT_NE(why.find("exports no network plugin table"), std::string::npos) << why;
  EXPECT_EQ(NetPlugin::loadForTest(pluginPath("libnccl-net-missing.so"), &plugin, &why), ncclSystemError);
  EXPECT_NE(why.find("could not load"), std::string::npos) << why;
  {
    test::ScopedEnv env;
    env.set("WEFT_LOOP_NET_DEVICES", "0");
    EXPECT_NE(NetPlugin::loadForTest(pluginPath("libnccl-net-weftloop.so"), &plugin, &why), ncclSuccess);
    EXPECT_NE(why.find("has no device"), std::string::npos) << why;
  }
  {
    test::ScopedEnv env;
    env.set("WEFT_LOOP_NET_INIT_FAIL", "1");
    EXPECT_EQ(NetPlugin::loadForTest(pluginPath("libnccl-net-weftloop.so"), &plugin, &why), ncclSystemError);
    EXPECT_NE(why.find("failed to initialize"), std::string::npos) << why;
  }
  EXPECT_EQ(plugin, nullptr) << "no failed load hands out a plugin";
}

// A rank: its plugin proxy and what its failures said.
struct PluginRank {
  PluginRank(const NetPlugin* plugin, int rank, int nRanks) {
    cfg.jobKey = kJob;
    cfg.rank = rank;
    cfg.nRanks = nRanks;
    for (int r = 0; r < nRanks; ++r) cfg.peerNames.push_back("rank " + std::to_string(r) + " (node-" +
                                                             std::to_string(r) + ")");
    cfg.abortRequested = &abort;
    cfg.onFailure = [this](ncclResult_t code) {
      lastCode = code;
      lastError = log::lastErrorOfThread();
      failures++;
    };
    cfg.setupTimeoutSec = 2;
    EXPECT_EQ(PluginProxy::create(cfg, plugin, 0, &proxy), ncclSuccess);
  }
  NetProxyConfig cfg;
  std::atomic<bool> abort{false};
  std::atomic<int> failures{0};
  std::atomic<int> lastCode{ncclSuccess};
  std::string lastError;
  std::unique_ptr<PluginProxy> proxy;
  std::vector<NetSendSide> sends;
  std::vector<NetRecvSide> recvs;
};

using PluginRanks = std::vector<std::unique_ptr<PluginRank>>;

// Every rank listens, hands each sender its info (as the bootstrap does), then all start at once.
std::vector<Status> startAll(PluginRanks& ranks, const std::function<void(PluginConnectInfo*)>& tamper = nullptr) {
  std::vector<std::vector<PluginConnectInfo>> listened(ranks.size()), infos(ranks.size());
  for (auto& r : ranks) EXPECT_EQ(r->proxy->listen(r->recvs, &listened[r->cfg.rank]), ncclSuccess);
  for (auto& r : ranks)
    for (const NetSendSide& s : r->sends)
      for (const PluginConnectInfo& info : listened[s.peer])
        if (info.sender == r->cfg.rank && info.channel == s.channel) infos[r->cfg.rank].push_back(info);
  if (tamper) tamper(&infos[0][0]);
  std::vector<Status> result(ranks.size(), ncclInternalError);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] { result[i] = ranks[i]->proxy->start(ranks[i]->sends, infos[i]); });
  }
  for (auto& t : threads) t.join();
  return result;
}

PluginRanks makeRanks(const NetPlugin* plugin, int n) {
  PluginRanks ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<PluginRank>(plugin, r, n));
  return ranks;
}

// Simple steps of every size from 0 to the whole slot, both ways and on two channels, each one
// message; the receivers see every byte (up to the 16-byte padding) and nothing past it; an
// orderly destroy of the senders' side leaves the receivers quiet (a bye on every connection).
TEST(PluginProxy, SimpleStepsOfEverySizeBothWaysThenAQuietDestroy) {
  for (const char* file : {"libnccl-net-weftloop.so", "libnccl-net-weftloop8.so"}) {
    SCOPED_TRACE(file);
    const NetPlugin* plugin = load(file);
    ASSERT_NE(plugin, nullptr);
    PluginRanks ranks = makeRanks(plugin, 2);
    std::vector<std::unique_ptr<Link>> links;
    links.push_back(std::make_unique<Link>(ranks, 0, 1, 0, 4096));
    links.push_back(std::make_unique<Link>(ranks, 0, 1, 3, 4096));
    links.push_back(std::make_unique<Link>(ranks, 1, 0, 0, 8192));
    for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
    ASSERT_EQ(runLinks(links, 2000, 0, 16), "");
    EXPECT_EQ(ranks[0]->proxy->stepsSent(), 4000u);
    EXPECT_EQ(ranks[1]->proxy->stepsReceived(), 4000u);
    EXPECT_EQ(ranks[0]->proxy->stepsReceived(), 2000u);
    ASSERT_EQ(runLinks(links, 500, 2000, 16), "") << "a second round goes on from the counters";
    ranks[0]->proxy.reset();  // destroyed in order: byes
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(ranks[1]->failures.load(), 0) << ranks[1]->lastError;
    ranks[1]->proxy.reset();
    EXPECT_EQ(ranks[0]->failures.load(), 0) << ranks[0]->lastError;
  }
}

// The receiver's info says where and what to connect: one for another channel, or with other slot
// sizes, is refused before any connection is tried, with a message naming what differs.
TEST(PluginProxy, ConnectInfoForAnotherConnectionIsRefused) {
  const NetPlugin* plugin = load("libnccl-net-weftloop.so");
  ASSERT_NE(plugin, nullptr);
  for (int which = 0; which < 2; ++which) {
    PluginRanks ranks = makeRanks(plugin, 2);
    std::vector<std::unique_ptr<Link>> links;
    links.push_back(std::make_unique<Link>(ranks, 0, 1, 2, 4096));
    std::vector<Status> rc = startAll(ranks, [which](PluginConnectInfo* info) {
      if (which == 0) info->channel = 5;
      else info->stepBytes *= 2;
    });
    EXPECT_EQ(rc[0], ncclRemoteError);
    EXPECT_NE(rc[1], ncclSuccess) << "the receiver's accept timed out";
    const std::string err = log::lastErrorOfProcess();
    EXPECT_TRUE(err.find("expects channel 2") != std::string::npos || err.find("not made within") !=
                std::string::npos || err.find("NCCL_BUFFSIZE") != std::string::npos) << err;
  }
}

// The plugin fails a send (the test plugin's injected failure): the sending rank fails naming the
// peer and closes its connections, and the receiver, whose receive then breaks, fails naming the
// sender, within a second.
TEST(PluginProxy, AFailedSendFailsBothEndsNamingThePeer) {
  test::ScopedEnv env;
  env.set("WEFT_LOOP_NET_FAIL_AFTER_SENDS", "30");
  const NetPlugin* plugin = load("libnccl-net-weftloop.so");
  ASSERT_NE(plugin, nullptr);
  PluginRanks ranks = makeRanks(plugin, 2);
  std::vector<std::unique_ptr<Link>> links;
  links.push_back(std::make_unique<Link>(ranks, 0, 1, 1, 4096));
  for (Status s : startAll(ranks)) ASSERT_EQ(s, ncclSuccess);
  // 30 sends complete, so the GPU can write 8 more steps without waiting for a credit; the
  // receiving GPU takes those 30 (so that its proxy keeps receives posted, where it sees the close).
  std::string received;
  std::thread receiver([&] { received = runReceiverGpu(links[0]->recv, 30, links[0]->seed, 0, 16); });
  EXPECT_EQ(runSenderGpu(links[0]->send, 30 + kSteps, links[0]->seed), "");
  receiver.join();
  EXPECT_EQ(received, "");
  EXPECT_TRUE(waitUntil([&] { return ranks[0]->failures.load() > 0 && ranks[1]->failures.load() > 0; }, 5000));
  EXPECT_EQ(ranks[0]->lastCode.load(), ncclRemoteError);
  EXPECT_NE(ranks[0]->lastError.find("sending to peer rank 1 (node-1)"), std::string::npos) << ranks[0]->lastError;
  EXPECT_NE(ranks[1]->lastError.find("receiving from peer rank 0 (node-0)"), std::string::npos)
      << ranks[1]->lastError;
  EXPECT_LE(ranks[1]->proxy->stepsReceived(), 30u);
  ranks.clear();  // first: a change of the environment makes the log read its settings again
  env.unset("WEFT_LOOP_NET_FAIL_AFTER_SENDS");
  ASSERT_NE(load("libnccl-net-weftloop.so"), nullptr);  // the plugin's settings back to normal
}

// A peer that sends raw plugin messages (not a PluginProxy) to rank 1's receive side on channel 0,
// which has LL slots of 256 bytes: every malformed message fails the receiver with a message that
// says what was wrong, naming the peer, and nothing lands outside the slots.
TEST(PluginProxy, MalformedMessagesFailTheReceiverSayingWhy) {
  const NetPlugin* plugin = load("libnccl-net-weftloop.so");
  ASSERT_NE(plugin, nullptr);
  struct Case {
    const char* what;
    std::vector<char> message;
    const char* expect;
  };
  auto lines = [](uint64_t step, int n, uint32_t trailerMagic, uint32_t trailerStep, bool goodFlags) {
    std::vector<char> m(16 * n + 8, 0);
    for (int i = 0; i < n; ++i) {
      const uint32_t words[4] = {(uint32_t)i, goodFlags ? dev::llFlag(step) : 7u, (uint32_t)i + 1, dev::llFlag(step)};
      memcpy(m.data() + 16 * i, words, 16);
    }
    memcpy(m.data() + 16 * n, &trailerMagic, 4);
    memcpy(m.data() + 16 * n + 4, &trailerStep, 4);
    return m;
  };
  const int32_t failNotice[3] = {(int32_t)kFailMagic, 0, 2};
  std::vector<char> notice(12);
  memcpy(notice.data(), failNotice, 12);
  std::vector<Case> cases = {
      {"a size of no kind", std::vector<char>(20, 1), "is no step, LL lines or notice"},
      {"LL lines for another step", lines(0, 2, kLinesMagic, 5, true), "came with a trailer for step 5"},
      {"LL lines with a wrong trailer magic", lines(0, 2, 0x12345678, 0, true), "came with a trailer"},
      {"LL lines without their flag", lines(0, 2, kLinesMagic, 0, false), "flag"},
      {"LL lines past the LL slot", lines(0, 17, kLinesMagic, 0, true), "is no step, LL lines or notice"},
      {"a fail notice naming rank 2", notice, "after its connection with peer rank 2 (node-2) failed"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    PluginRanks ranks = makeRanks(plugin, 3);
    RecvMem mem(4096);
    std::vector<char> llSlots(kSteps * 256, 0);
    NetRecvSide side = mem.side(0, 0);
    side.llSlots = llSlots.data();
    side.llStepBytes = 256;
    std::vector<PluginConnectInfo> infos;
    ASSERT_EQ(ranks[1]->proxy->listen({side}, &infos), ncclSuccess);
    Status started = ncclInternalError;
    std::thread receiver([&] { started = ranks[1]->proxy->start({}, {}); });
    void* comm = nullptr;
    for (auto end = Clock::now() + std::chrono::seconds(2); comm == nullptr && Clock::now() < end;) {
      ASSERT_EQ(plugin->connect(0, infos[0].handle, &comm), ncclSuccess);
    }
    receiver.join();
    ASSERT_EQ(started, ncclSuccess);
    ASSERT_NE(comm, nullptr);
    std::vector<char> message = k.message;
    void* mr = nullptr;
    ASSERT_EQ(plugin->regMr(comm, message.data(), message.size(), &mr), ncclSuccess);
    void* request = nullptr;
    ASSERT_EQ(plugin->isend(comm, message.data(), message.size(), 0, mr, &request), ncclSuccess);
    bool done = false;
    size_t bytes = 0;
    while (!done) ASSERT_EQ(plugin->test(request, &done, &bytes), ncclSuccess);
    ASSERT_TRUE(waitUntil([&] { return ranks[1]->failures.load() > 0; }, 2000));
    EXPECT_NE(ranks[1]->lastError.find(k.expect), std::string::npos) << ranks[1]->lastError;
    EXPECT_NE(ranks[1]->lastError.find("receiving from peer rank 0 (node-0)"), std::string::npos)
        << ranks[1]->lastError;
    EXPECT_EQ(mem.tail, 0u) << "no step was published";
    EXPECT_TRUE(mem.untouchedOutside(kSteps));
    EXPECT_EQ(ranks[1]->proxy->linesReceived(), 0u);
    (void)plugin->deregMr(comm, mr);
    plugin->closeSend(comm);
  }
}

}  // namespace
}  // namespace weft::proxy
