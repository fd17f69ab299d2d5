// The network proxy's wire formats and their checks (proxy/net_wire.h): every field a peer could
// get wrong is refused with a message, and the orderly-close frames are told apart.
#include <gtest/gtest.h>

#include <string>

#include "bootstrap/socket.h"
#include "device/abi.h"
#include "device/work_math.h"
#include "proxy/net_wire.h"

namespace weft::proxy {
namespace {

using bootstrap::SocketAddress;

constexpr uint64_t kJob = 0x5eed0000cafe1234ull;

TEST(NetWire, ListenerDescRoundTripAndChecks) {
  SocketAddress a = SocketAddress::loopback(AF_INET);
  a.setPort(5000);
  ListenerDesc d = makeListenerDesc(kJob, 3, a);
  SocketAddress out;
  std::string why;
  ASSERT_EQ(checkListenerDesc(d, kJob, 3, "peer 3", &out, &why), ncclSuccess) << why;
  EXPECT_EQ(out, a);

  SocketAddress a6 = SocketAddress::loopback(AF_INET6);
  a6.setPort(6000);
  ASSERT_EQ(checkListenerDesc(makeListenerDesc(kJob, 0, a6), kJob, 0, "x", &out, &why), ncclSuccess) << why;
  EXPECT_EQ(out, a6);

  auto bad = [&](ListenerDesc b, const char* needle) {
    SocketAddress untouched;
    std::string w;
    EXPECT_EQ(checkListenerDesc(b, kJob, 3, "peer 3", &untouched, &w), ncclRemoteError) << needle;
    EXPECT_EQ(w.rfind("peer 3: ", 0), 0u) << w;
    EXPECT_NE(w.find(needle), std::string::npos) << w;
    EXPECT_FALSE(untouched.valid());
  };
  auto with = [&](const std::function<void(ListenerDesc&)>& mutate) {
    ListenerDesc b = d;
    mutate(b);
    return b;
  };
  bad(with([](ListenerDesc& b) { b.magic ^= 1; }), "magic");
  bad(with([](ListenerDesc& b) { b.jobKey ^= 1; }), "job key");
  bad(with([](ListenerDesc& b) { b.rank = 4; }), "rank 4");
  bad(with([](ListenerDesc& b) { b.address.family = 5; }), "family");
  bad(with([](ListenerDesc& b) { b.address.port = 0; }), "port");
  SocketAddress any;
  std::string w;
  ASSERT_TRUE(SocketAddress::parse("0.0.0.0:5000", &any, &w, false)) << w;
  bad(makeListenerDesc(kJob, 3, any), "wildcard");
  ASSERT_TRUE(SocketAddress::parse("[::]:5000", &any, &w, false)) << w;
  bad(makeListenerDesc(kJob, 3, any), "wildcard");
}

TEST(NetWire, HelloChecks) {
  const Hello good = makeHello(kJob, 2, 1, 7, 4096, 4096);
  std::string why;
  EXPECT_EQ(checkHello(good, kJob, 1, 4, "conn", &why), ncclSuccess) << why;
  EXPECT_EQ(checkHello(makeHello(kJob, 2, 1, 7, 4096), kJob, 1, 4, "conn", &why), ncclSuccess) << why;
  struct Case {
    std::function<void(Hello&)> mutate;
    const char* needle;
  } cases[] = {
      {[](Hello& h) { h.magic = 0x20544547; }, "magic"},
      {[](Hello& h) { h.version = 99; }, "version"},
      {[](Hello& h) { h.jobKey ^= 0x10; }, "job key"},
      {[](Hello& h) { h.reserved0 = 1; }, "reserved"},
      {[](Hello& h) { h.llStepBytes = 100; }, "LL step size of 100"},
      {[](Hello& h) { h.receiver = 2; }, "addressed to rank 2"},
      {[](Hello& h) { h.sender = 4; }, "sender rank 4"},
      {[](Hello& h) { h.sender = -1; }, "sender rank -1"},
      {[](Hello& h) { h.channel = dev::kMaxChannels; }, "channel"},
      {[](Hello& h) { h.channel = -3; }, "channel -3"},
      {[](Hello& h) { h.stepBytes = 0; }, "step size"},
  };
  for (const Case& c : cases) {
    Hello h = good;
    c.mutate(h);
    std::string w;
    EXPECT_EQ(checkHello(h, kJob, 1, 4, "conn", &w), ncclRemoteError) << c.needle;
    EXPECT_EQ(w.rfind("conn: ", 0), 0u) << w;
    EXPECT_NE(w.find(c.needle), std::string::npos) << w;
  }
}

TEST(NetWire, DataHeaderChecks) {
  std::string why;
  // Channel 2: Simple steps from 5 on (step 4 arrived), the receiver consumed 1 step (window [1, 9)),
  // 1000-byte Simple slots and 4096-byte LL slots.
  const RecvWindow win{5, 1, 1000, 4096};
  for (const DataHeader& h : {makeDataHeader(2, 5, 1000), makeDataHeader(2, 5, 0), makeDataHeader(2, 7, 10),
                              makeLinesHeader(2, 1, 0, 16), makeLinesHeader(2, 8, 4080, 16),
                              makeLinesHeader(2, 3, 16, 4080)}) {
    EXPECT_EQ(checkDataHeader(h, 2, win, "d", &why), ncclSuccess) << why;
  }
  struct Case {
    DataHeader h;
    const char* needle;
  } cases[] = {
      {makeDataHeader(2, 5, 1001), "beyond the 1000-byte slot"},
      {makeDataHeader(2, 5, ~0ull), "beyond"},
      {DataHeader{kDataMagic, 2, 5, 8, 10}, "at offset 8"},
      {makeDataHeader(3, 5, 10), "channel 3"},
      {makeDataHeader(2, 4, 10), "but step 4 has arrived"},
      {makeDataHeader(2, 9, 10), "ignored the credits"},
      {makeLinesHeader(2, 0, 0, 16), "after the receiver consumed"},
      {makeLinesHeader(2, 9, 0, 16), "ignored the credits"},
      {makeLinesHeader(2, 3, 0, 0), "not whole 16-byte lines"},
      {makeLinesHeader(2, 3, 0, 24), "not whole"},
      {makeLinesHeader(2, 3, 8, 16), "not whole"},
      {makeLinesHeader(2, 3, 4080, 32), "within the 4096-byte slot"},
      {DataHeader{0x12345678, 2, 5, 0, 10}, "magic"},
  };
  for (const Case& c : cases) {
    std::string w;
    EXPECT_EQ(checkDataHeader(c.h, 2, win, "d", &w), ncclRemoteError) << c.needle;
    EXPECT_NE(w.find(c.needle), std::string::npos) << w;
  }
  // Without LL slots: no lines, and the Simple steps are consecutive.
  const RecvWindow simpleOnly{5, 1, 1000, 0};
  std::string w;
  EXPECT_EQ(checkDataHeader(makeLinesHeader(2, 3, 0, 16), 2, simpleOnly, "d", &w), ncclRemoteError);
  EXPECT_NE(w.find("without LL slots"), std::string::npos) << w;
  EXPECT_EQ(checkDataHeader(makeDataHeader(2, 5, 10), 2, simpleOnly, "d", &why), ncclSuccess) << why;
  EXPECT_EQ(checkDataHeader(makeDataHeader(2, 6, 10), 2, simpleOnly, "d", &w), ncclRemoteError);
  EXPECT_NE(w.find("step 6, expected step 5"), std::string::npos) << w;
  DataHeader bye = makeByeData(2);
  EXPECT_TRUE(isBye(bye));
  EXPECT_FALSE(isBye(makeDataHeader(2, 0, 0)));
  EXPECT_TRUE(isLines(makeLinesHeader(2, 0, 0, 16)));
  EXPECT_FALSE(isLines(makeDataHeader(2, 0, 16)));
  EXPECT_EQ(checkDataHeader(bye, 2, win, "d", &why), ncclSuccess);
  EXPECT_EQ(checkDataHeader(makeByeData(1), 2, win, "d", &why), ncclRemoteError);
}

TEST(NetWire, LinesCarryTheirStepsFlag) {
  uint32_t lines[3][4];
  for (uint32_t i = 0; i < 3; ++i) {
    lines[i][0] = 100 + i;
    lines[i][2] = 200 + i;
    lines[i][1] = lines[i][3] = dev::llFlag(6);
  }
  std::string why;
  EXPECT_EQ(checkLines(reinterpret_cast<const char*>(lines), sizeof(lines), 6, "l", &why), ncclSuccess) << why;
  std::string w;
  EXPECT_EQ(checkLines(reinterpret_cast<const char*>(lines), sizeof(lines), 7, "l", &w), ncclRemoteError);
  EXPECT_NE(w.find("line 0 of step 7"), std::string::npos) << w;
  lines[1][3] = dev::llFlag(5);  // half of line 1 is an older step's
  EXPECT_EQ(checkLines(reinterpret_cast<const char*>(lines), sizeof(lines), 6, "l", &w), ncclRemoteError);
  EXPECT_NE(w.find("line 1 of step 6"), std::string::npos) << w;
}

TEST(NetWire, CreditChecks) {
  std::string why;
  EXPECT_EQ(checkCredit(makeCredit(1, 4), 1, 3, 6, "c", &why), ncclSuccess) << why;
  EXPECT_EQ(checkCredit(makeCredit(1, 6), 1, 3, 6, "c", &why), ncclSuccess) << why;
  EXPECT_EQ(checkCredit(makeCredit(1, 3), 1, 3, 6, "c", &why), ncclSuccess) << why;
  std::string w;
  EXPECT_EQ(checkCredit(makeCredit(1, 2), 1, 3, 6, "c", &w), ncclRemoteError);
  EXPECT_NE(w.find("backwards"), std::string::npos) << w;
  EXPECT_EQ(checkCredit(makeCredit(1, 7), 1, 3, 6, "c", &w), ncclRemoteError);
  EXPECT_NE(w.find("only 6 were sent"), std::string::npos) << w;
  EXPECT_EQ(checkCredit(makeCredit(0, 4), 1, 3, 6, "c", &w), ncclRemoteError);
  EXPECT_EQ(checkCredit(Credit{kDataMagic, 1, 4}, 1, 3, 6, "c", &w), ncclRemoteError);
  EXPECT_NE(w.find("magic"), std::string::npos) << w;
  EXPECT_TRUE(isBye(makeByeCredit(1)));
  EXPECT_EQ(checkCredit(makeByeCredit(1), 1, 3, 6, "c", &w), ncclSuccess);
}

}  // namespace
}  // namespace weft::proxy
