// Strangers on the bootstrap's ports: garbage, HTTP, truncated, oversized, wrong-magic and
// wrong-job-key connections to the root and to a rank's listen socket must be dropped (closed by
// the victim) without a crash or a hang, and the real rendezvous and traffic must still succeed.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cstring>

#include "bootstrap/wire.h"
#include "bootstrap_fork_harness.h"

namespace weft::bootstrap {
namespace {

using test::ChildResult;
using test::ForkedRanks;
using test::ParentRoot;
using test::RankOutcome;

std::string bytesOf(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

std::string frame(wire::FrameType type, uint64_t key, int rank, const void* payload, uint32_t length) {
  wire::FrameHeader h = wire::makeHeader(type, key, rank, 0, length, length);
  return bytesOf(&h, sizeof(h)) + bytesOf(payload, length);
}

struct Attack {
  std::string name;
  std::string bytes;
  bool halfClose = false;   // shutdown(SHUT_WR) after sending: a truncated frame
  bool expectClosed = true;  // the victim must close it (false: a silent stranger, left pending)
  Fd fd;
};

// Connects and sends each attack's bytes (ignoring send errors: the victim may close early).
bool launch(const SocketAddress& target, std::vector<Attack>* attacks, std::string* why) {
  for (Attack& a : *attacks) {
    int err = 0;
    if (connectBlocking(target, util::Deadline::afterMs(3000), nullptr, false, &a.fd, &err) != Io::kOk) {
      *why = a.name + ": connect failed: " + strerror(err);
      return false;
    }
    if (!a.bytes.empty()) (void)sendAll(a.fd.get(), a.bytes.data(), a.bytes.size(), util::Deadline::afterMs(2000), nullptr, &err);
    if (a.halfClose) shutdown(a.fd.get(), SHUT_WR);
  }
  return true;
}

// True when the victim closed the connection (end of stream or reset) within ms.
bool closedByVictim(int fd, int ms) {
  util::Deadline d = util::Deadline::afterMs(ms);
  char buf[4096];
  for (;;) {
    int err = 0;
    size_t got = 0;
    Io io = recvAll(fd, buf, sizeof(buf), d, nullptr, &err, &got);
    if (io == Io::kClosed) return true;
    if (io == Io::kTimedOut) return false;
    if (io == Io::kFailed) return err == ECONNRESET;
  }
}

// Checks every attack; returns the names of those not handled as expected.
std::string verify(std::vector<Attack>* attacks) {
  std::string bad;
  for (Attack& a : *attacks) {
    if (a.expectClosed && !closedByVictim(a.fd.get(), 3000)) bad += " [" + a.name + " was not closed]";
  }
  return bad;
}

std::vector<Attack> commonAttacks(uint64_t jobKey, wire::FrameType helloType, const std::string& validHello) {
  std::vector<Attack> v;
  v.push_back({"http", "GET / HTTP/1.1\r\nHost: weft\r\n\r\n"});
  v.push_back({"random bytes", std::string("\x01\x02\x03\x04\xff\xfe\xfd\xfc\x00\x00garbage!garbage!garbage!garbage!", 42)});
  wire::FrameHeader h = wire::makeHeader(helloType, jobKey, 0, 0, 40, 40);
  h.magic = 0xdeadbeef;
  v.push_back({"wrong magic", bytesOf(&h, sizeof(h)) + std::string(40, 'x')});
  h = wire::makeHeader(helloType, jobKey ^ 0x5555, 0, 0, 0, 0);
  v.push_back({"wrong job key (stale job)", validHello.substr(0, 8) + bytesOf((char*)&h + 8, 8) + validHello.substr(16)});
  h = wire::makeHeader(helloType, jobKey, 0, 0, 1 << 20, 1 << 20);
  v.push_back({"oversized hello", bytesOf(&h, sizeof(h)) + std::string(4096, 'y')});
  h = wire::makeHeader(wire::FrameType::kData, jobKey, 0, 0, 100, 100);
  v.push_back({"data before hello", bytesOf(&h, sizeof(h)) + std::string(100, 'z')});
  Attack truncated{"truncated header", validHello.substr(0, 10)};
  truncated.halfClose = true;
  v.push_back(std::move(truncated));
  Attack truncatedPayload{"truncated payload", validHello.substr(0, validHello.size() - 5)};
  truncatedPayload.halfClose = true;
  v.push_back(std::move(truncatedPayload));
  Attack silent{"silent", ""};
  silent.expectClosed = false;
  v.push_back(std::move(silent));
  v.push_back({"version 2", [&] {
                 wire::FrameHeader v2 = wire::makeHeader(helloType, jobKey, 0, 0, 40, 40);
                 v2.version = 2;
                 return bytesOf(&v2, sizeof(v2)) + std::string(40, 0);
               }()});
  return v;
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

RankOutcome normalTraffic(Bootstrap& b) {
  int n = b.nRanks(), rank = b.rank();
  std::vector<int> all(n, -1);
  all[rank] = rank * 7;
  WEFT_CHILD_TRY(b.allGather(all.data(), sizeof(int)));
  for (int r = 0; r < n; ++r) WEFT_CHILD_CHECK(all[r] == r * 7, "allgather");
  for (int p = 0; p < n; ++p) WEFT_CHILD_TRY(b.send(p, 50, &rank, sizeof(rank)));
  for (int p = 0; p < n; ++p) {
    int v = -1;
    WEFT_CHILD_TRY(b.recv(p, 50, &v, sizeof(v)));
    WEFT_CHILD_CHECK(v == p, "all-pairs");
  }
  WEFT_CHILD_TRY(b.barrier());
  return test::outcome(ncclSuccess);
}

TEST(BootstrapHostile, RootDropsStrangersAndStillServes) {
  ForkedRanks ranks;
  ranks.start(iota(4), [](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 4, nullptr, &b));
    return normalTraffic(*b);
  });
  ParentRoot root(30);
  wire::RootHello hello;
  memset(&hello, 0, sizeof(hello));
  hello.rank = 1;
  hello.nRanks = 4;
  hello.nRoots = 1;
  hello.listen = wire::encodeAddress(SocketAddress::loopback(AF_INET));
  hello.listen.port = 9;
  std::string valid = frame(wire::FrameType::kRootHello, root.jobKey, 1, &hello, sizeof(hello));
  std::vector<Attack> attacks = commonAttacks(root.jobKey, wire::FrameType::kRootHello, valid);
  wire::RootHello outOfRange = hello;
  outOfRange.rank = 99;
  attacks.push_back({"rank out of range", frame(wire::FrameType::kRootHello, root.jobKey, 99, &outOfRange, sizeof(outOfRange))});
  wire::RootHello badRoot = hello;
  badRoot.rootIndex = 5;
  attacks.push_back({"root index out of range", frame(wire::FrameType::kRootHello, root.jobKey, 1, &badRoot, sizeof(badRoot))});
  attacks.push_back({"short hello", frame(wire::FrameType::kRootHello, root.jobKey, 1, &hello, sizeof(hello) - 4)});
  attacks.push_back({"closed at once", "", true, true});
  std::string why;
  ASSERT_TRUE(launch(root.root->address(), &attacks, &why)) << why;
  EXPECT_EQ(verify(&attacks), "");
  ranks.sendId(root.id);  // only now do the real ranks arrive
  auto rs = ranks.wait(30000);
  for (const ChildResult& r : rs) EXPECT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
  EXPECT_EQ(root.join(), ncclSuccess) << root.root->errorText();
}

TEST(BootstrapHostile, RootSurvivesAFloodOfRandomConnections) {
  ForkedRanks ranks;
  ranks.start(iota(3), [](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 3, nullptr, &b));
    return normalTraffic(*b);
  });
  ParentRoot root(30);
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 17;
  };
  // Random garbage, half of it behind a valid magic and version; never the right job key, so
  // nothing here can pass for a rank.
  std::vector<Attack> attacks;
  for (int i = 0; i < 200; ++i) {
    std::string bytes;
    if (i % 2 == 0) {
      wire::FrameHeader h = wire::makeHeader((wire::FrameType)(next() % 10), root.jobKey ^ (1 + next()), (int)next(), 0,
                                             next() % 100000, (uint32_t)(next() % 100000));
      bytes = bytesOf(&h, sizeof(h));
    }
    size_t n = next() % 300;
    for (size_t k = 0; k < n; ++k) bytes.push_back((char)next());
    Attack a{"random " + std::to_string(i), bytes};
    a.halfClose = next() % 2 == 0;
    a.expectClosed = false;  // a prefix of a valid magic may legitimately wait for more bytes
    attacks.push_back(std::move(a));
  }
  std::string why;
  ASSERT_TRUE(launch(root.root->address(), &attacks, &why)) << why;
  ranks.sendId(root.id);
  auto rs = ranks.wait(30000);
  for (const ChildResult& r : rs) EXPECT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
  EXPECT_EQ(root.join(), ncclSuccess) << root.root->errorText();
}

TEST(BootstrapHostile, RanksDropStrangersOnTheirListenSockets) {
  ForkedRanks ranks;
  ranks.start(iota(3), [](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 3, nullptr, &b));
    char go = 0;
    if (rank == 1) {
      // Waits (and so keeps serving its listen socket) while rank 0 attacks it.
      WEFT_CHILD_TRY(b->recv(0, 77, &go, 1));
      return normalTraffic(*b);
    }
    if (rank == 0) {
      UniqueIdInfo info;
      std::string why;
      WEFT_CHILD_CHECK(decodeUniqueId(id, &info, &why), why);
      SocketAddress victim;
      WEFT_CHILD_CHECK(SocketAddress::parse(b->peerAddress(1), &victim, &why, false), why);
      wire::PeerHello hello;
      memset(&hello, 0, sizeof(hello));
      hello.nRanks = 3;
      hello.listen = wire::encodeAddress(b->listenAddress());
      std::string valid = frame(wire::FrameType::kPeerHello, info.jobKey, 2, &hello, sizeof(hello));
      std::vector<Attack> attacks = commonAttacks(info.jobKey, wire::FrameType::kPeerHello, valid);
      wire::PeerHello wrongN = hello;
      wrongN.nRanks = 5;
      attacks.push_back({"nranks mismatch", frame(wire::FrameType::kPeerHello, info.jobKey, 2, &wrongN, sizeof(wrongN))});
      attacks.push_back({"claims the victim's own rank", frame(wire::FrameType::kPeerHello, info.jobKey, 1, &hello, sizeof(hello))});
      attacks.push_back({"claims an already connected rank", frame(wire::FrameType::kPeerHello, info.jobKey, 0, &hello, sizeof(hello))});
      attacks.push_back({"rank out of range", frame(wire::FrameType::kPeerHello, info.jobKey, 3, &hello, sizeof(hello))});
      attacks.push_back({"root hello to a rank", frame(wire::FrameType::kRootHello, info.jobKey, 2, &hello, sizeof(hello))});
      WEFT_CHILD_CHECK(launch(victim, &attacks, &why), why);
      std::string bad = verify(&attacks);
      WEFT_CHILD_CHECK(bad.empty(), "rank 1 kept bad connections open:" + bad);
      WEFT_CHILD_TRY(b->send(1, 77, &go, 1));
    }
    return normalTraffic(*b);
  });
  ParentRoot root(30);
  ranks.sendId(root.id);
  auto rs = ranks.wait(40000);
  ASSERT_EQ(rs.size(), 3u);
  for (const ChildResult& r : rs) EXPECT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
  EXPECT_EQ(root.join(), ncclSuccess);
}

}  // namespace
}  // namespace weft::bootstrap
