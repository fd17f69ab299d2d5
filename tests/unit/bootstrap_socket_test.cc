// Address text, interface selection rules (NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY), deadlines.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <thread>

#include "bootstrap/interfaces.h"
#include "bootstrap/limits.h"
#include "bootstrap/socket.h"
#include "core/param.h"
#include "util/deadline.h"

namespace weft::bootstrap {
namespace {

SocketAddress parseOk(const std::string& text) {
  SocketAddress a;
  std::string why;
  EXPECT_TRUE(SocketAddress::parse(text, &a, &why, false)) << text << ": " << why;
  return a;
}

TEST(SocketAddress, ParsesIpv4) {
  SocketAddress a = parseOk("10.0.0.4:41234");
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 41234);
  EXPECT_EQ(a.toString(), "10.0.0.4:41234");
  EXPECT_EQ(a.hostString(), "10.0.0.4");
  EXPECT_FALSE(a.isLoopback());
  EXPECT_TRUE(parseOk("127.0.0.1:1").isLoopback());
}

TEST(SocketAddress, ParsesBracketedIpv6) {
  SocketAddress a = parseOk("[::1]:5000");
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.port(), 5000);
  EXPECT_EQ(a.toString(), "[::1]:5000");
  EXPECT_TRUE(a.isLoopback());
  SocketAddress b = parseOk("[fd00::2]:65535");
  EXPECT_EQ(b.toString(), "[fd00::2]:65535");
  EXPECT_FALSE(b.isLoopback());
  EXPECT_TRUE(parseOk("[fe80::1]:7").isLinkLocal());
}

TEST(SocketAddress, RejectsBadText) {
  const char* bad[] = {"", "10.0.0.4", "10.0.0.4:", ":80", "10.0.0.4:0", "10.0.0.4:65536", "10.0.0.4:12ab",
                       "10.0.0.4:-1", "::1:5000", "[::1]5000", "[::1", "[]:80", "999.1.1.1:80", "10.0.0:80x",
                       "[10.0.0.4]:80x", "10.0.0.4:123456"};
  for (const char* text : bad) {
    SocketAddress a;
    std::string why;
    EXPECT_FALSE(SocketAddress::parse(text, &a, &why, false)) << "'" << text << "' was accepted";
    EXPECT_FALSE(why.empty()) << text;
  }
}

TEST(SocketAddress, ResolvesLocalhostAndComparesWithPort) {
  SocketAddress a, b;
  std::string why;
  ASSERT_TRUE(SocketAddress::parse("localhost:6000", &a, &why)) << why;
  EXPECT_TRUE(a.isLoopback());
  EXPECT_EQ(a.port(), 6000);
  b = a;
  EXPECT_EQ(a, b);
  b.setPort(6001);
  EXPECT_NE(a, b);
  EXPECT_NE(parseOk("[::1]:6000"), parseOk("127.0.0.1:6000"));
}

TEST(IfnameFilter, PrefixExactAndExclude) {
  IfnameFilter prefix = IfnameFilter::parse("eth,ib");
  EXPECT_TRUE(prefix.matches("eth0"));
  EXPECT_TRUE(prefix.matches("ib1"));
  EXPECT_FALSE(prefix.matches("lo"));
  EXPECT_FALSE(prefix.matches("en0"));

  IfnameFilter exact = IfnameFilter::parse("=eth0");
  EXPECT_TRUE(exact.matches("eth0"));
  EXPECT_FALSE(exact.matches("eth01"));
  EXPECT_FALSE(exact.matches("eth"));

  IfnameFilter excl = IfnameFilter::parse("^docker,lo");
  EXPECT_TRUE(excl.excludes());
  EXPECT_FALSE(excl.matches("docker0"));
  EXPECT_FALSE(excl.matches("lo"));
  EXPECT_TRUE(excl.matches("eth0"));

  IfnameFilter exclExact = IfnameFilter::parse("^=eth0");
  EXPECT_FALSE(exclExact.matches("eth0"));
  EXPECT_TRUE(exclExact.matches("eth01"));

  IfnameFilter none = IfnameFilter::parse("");
  EXPECT_FALSE(none.isSet());
  EXPECT_TRUE(none.matches("anything"));
}

std::vector<Interface> sampleInterfaces() {
  return {
      {"lo", parseOk("127.0.0.1:1")},      {"docker0", parseOk("172.17.0.1:1")}, {"virbr0", parseOk("192.168.122.1:1")},
      {"eth0", parseOk("10.0.0.4:1")},     {"ib0", parseOk("10.1.0.4:1")},       {"lo", parseOk("[::1]:1")},
      {"eth0", parseOk("[fd00::4]:1")},
  };
}

TEST(SelectInterface, DefaultSkipsLoopbackDockerAndVirbr) {
  auto pick = selectInterface(sampleInterfaces(), "", AF_UNSPEC);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->name, "eth0");
  EXPECT_EQ(pick->address.hostString(), "10.0.0.4");
}

TEST(SelectInterface, FamilyFilter) {
  auto pick = selectInterface(sampleInterfaces(), "", AF_INET6);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->name, "eth0");
  EXPECT_EQ(pick->address.family(), AF_INET6);
}

TEST(SelectInterface, LoopbackOnlyWhenNothingElse) {
  std::vector<Interface> few = {{"docker0", parseOk("172.17.0.1:1")}, {"lo", parseOk("127.0.0.1:1")}};
  auto pick = selectInterface(few, "", AF_UNSPEC);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->name, "lo");
  EXPECT_FALSE(selectInterface({{"docker0", parseOk("172.17.0.1:1")}}, "", AF_UNSPEC).has_value());
}

TEST(SelectInterface, UserListsAreObeyed) {
  auto all = sampleInterfaces();
  EXPECT_EQ(selectInterface(all, "ib", AF_UNSPEC)->name, "ib0");
  EXPECT_EQ(selectInterface(all, "lo", AF_UNSPEC)->address.hostString(), "127.0.0.1");
  EXPECT_EQ(selectInterface(all, "lo", AF_INET6)->address.hostString(), "::1");
  EXPECT_EQ(selectInterface(all, "docker", AF_UNSPEC)->name, "docker0");
  EXPECT_EQ(selectInterface(all, "^docker,virbr,eth", AF_UNSPEC)->name, "ib0");
  EXPECT_EQ(selectInterface(all, "=eth", AF_UNSPEC), std::nullopt);
  EXPECT_EQ(selectInterface(all, "nomatch", AF_UNSPEC), std::nullopt);
  // Excluding everything but loopback still falls back to loopback.
  EXPECT_EQ(selectInterface(all, "^docker,virbr,eth,ib", AF_UNSPEC)->name, "lo");
}

TEST(SelectInterface, ParseFamily) {
  bool bad = false;
  EXPECT_EQ(parseFamily("AF_INET", &bad), AF_INET);
  EXPECT_EQ(parseFamily("AF_INET6", &bad), AF_INET6);
  EXPECT_EQ(parseFamily("", &bad), AF_UNSPEC);
  EXPECT_FALSE(bad);
  EXPECT_EQ(parseFamily("AF_UNIX", &bad), AF_UNSPEC);
  EXPECT_TRUE(bad);
}

TEST(SelectInterface, ChooseFromEnvironmentOnThisHost) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  param::resetForTesting();
  Interface itf;
  ASSERT_EQ(chooseInterface(nullptr, &itf), ncclSuccess);
  EXPECT_EQ(itf.name, "lo");
  EXPECT_EQ(itf.address.hostString(), "::1");
  setenv("NCCL_SOCKET_IFNAME", "=no-such-interface", 1);
  param::resetForTesting();
  EXPECT_EQ(chooseInterface(nullptr, &itf), ncclSystemError);
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("NCCL_SOCKET_FAMILY");
  param::resetForTesting();
  // A root on loopback means everyone is on this host: loopback of the root's family.
  SocketAddress root = parseOk("[::1]:5000");
  ASSERT_EQ(chooseInterface(&root, &itf), ncclSuccess);
  EXPECT_EQ(itf.address.hostString(), "::1");
}

TEST(Deadline, ExpiresAndCapsPollTimeouts) {
  util::Deadline d = util::Deadline::afterMs(60);
  EXPECT_FALSE(d.expired());
  EXPECT_LE(d.pollMs(100), 60);
  EXPECT_EQ(d.pollMs(10), 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(d.pollMs(100), 0);
  EXPECT_EQ(d.remainingMs(), 0);
  util::Deadline never = util::Deadline::afterSeconds(0);
  EXPECT_TRUE(never.isNever());
  EXPECT_FALSE(never.expired());
  EXPECT_EQ(never.pollMs(100), 100);
  EXPECT_FALSE(d.extendedByMs(10000).expired());
  // NCCL_BOOTSTRAP_TIMEOUT far past what the clock can count is "never", not an overflow into the past.
  for (int64_t far : {int64_t(10'000'000'000), INT64_MAX / 1000 + 1, INT64_MAX}) {
    EXPECT_TRUE(util::Deadline::afterSeconds(far).isNever()) << far;
    EXPECT_FALSE(util::Deadline::afterSeconds(far).expired()) << far;
    EXPECT_FALSE(util::Deadline::afterMs(far).expired()) << far;
  }
  EXPECT_FALSE(util::Deadline::afterSeconds(86400 * 365).isNever()) << "a year is still a deadline";
}

TEST(RankList, CompressesRuns) {
  EXPECT_EQ(formatRankList({3}), "3");
  EXPECT_EQ(formatRankList({1, 2, 3, 7, 9, 10}), "1-3, 7, 9-10");
  EXPECT_EQ(formatRankList({1, 3, 5, 7}, 2), "1, 3 and 2 more");
}

}  // namespace
}  // namespace weft::bootstrap
