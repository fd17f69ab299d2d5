// The bootstrap with ranks as separate processes on loopback: rendezvous, allgather, send/recv
// (ring and all-pairs, distinct payloads), barrier, large messages, multiple roots, IPv6,
// ncclGetUniqueId and NCCL_COMM_ID.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <thread>

#include "bootstrap_fork_harness.h"

namespace weft::bootstrap {
namespace {

using test::ChildResult;
using test::ForkedRanks;
using test::ParentRoot;
using test::RankOutcome;

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

void expectAllSucceeded(const std::vector<ChildResult>& rs, size_t count) {
  ASSERT_EQ(rs.size(), count);
  bool ok = true;
  for (const ChildResult& r : rs) ok = ok && r.reported && r.outcome.status == ncclSuccess && r.exited && r.exitCode == 0;
  EXPECT_TRUE(ok) << test::describe(rs);
}

size_t pairBytes(int src, int dst) { return (size_t)((src * 31 + dst * 17) % 97) + 1; }

// Init, then allgather, ring send/recv, all-pairs send/recv (every message sent before any is
// received, so most arrive unexpected), self send/recv and barriers, checking every byte.
RankOutcome exercise(int rank, int n, const ncclUniqueId* ids, int nIds) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "30");
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Bootstrap> b;
  WEFT_CHILD_TRY(Bootstrap::init(ids, nIds, rank, n, nullptr, &b));
  double initMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  WEFT_CHILD_CHECK(b->rank() == rank && b->nRanks() == n, "rank/nRanks");
  for (int r = 0; r < n; ++r) {
    WEFT_CHILD_CHECK(b->peerAddress(r).find("127.0.0.1:") == 0 || b->peerAddress(r).find("[::1]:") == 0,
                     "peer address " + b->peerAddress(r));
  }

  const size_t slice = 37;
  std::vector<uint8_t> all(slice * n, 0xee);
  std::vector<uint8_t> mine = test::pattern(rank, -1, 1, slice);
  memcpy(all.data() + rank * slice, mine.data(), slice);
  WEFT_CHILD_TRY(b->allGather(all.data(), slice));
  for (int r = 0; r < n; ++r) {
    WEFT_CHILD_CHECK(memcmp(all.data() + r * slice, test::pattern(r, -1, 1, slice).data(), slice) == 0,
                     "allgather slice of rank " + std::to_string(r));
  }
  WEFT_CHILD_TRY(b->allGather(nullptr, 0));

  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<uint8_t> ring = test::pattern(rank, next, 2, 64), got(64);
  WEFT_CHILD_TRY(b->send(next, 7, ring.data(), ring.size()));
  WEFT_CHILD_TRY(b->recv(prev, 7, got.data(), got.size()));
  WEFT_CHILD_CHECK(got == test::pattern(prev, rank, 2, 64), "ring payload from " + std::to_string(prev));

  for (int p = 0; p < n; ++p) {
    std::vector<uint8_t> v = test::pattern(rank, p, 3, pairBytes(rank, p));
    WEFT_CHILD_TRY(b->send(p, 1000 + rank, v.data(), v.size()));
  }
  for (int p = n - 1; p >= 0; --p) {
    std::vector<uint8_t> v(pairBytes(p, rank));
    WEFT_CHILD_TRY(b->recv(p, 1000 + p, v.data(), v.size()));
    WEFT_CHILD_CHECK(v == test::pattern(p, rank, 3, v.size()), "all-pairs payload from " + std::to_string(p));
  }
  WEFT_CHILD_TRY(b->barrier());
  WEFT_CHILD_TRY(b->barrier());
  return RankOutcome{ncclSuccess, 0, std::to_string(initMs)};
}

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, AllGatherSendRecvBarrier) {
  const int n = GetParam();
  auto t0 = std::chrono::steady_clock::now();
  ForkedRanks ranks;
  ranks.start(iota(n), [n](int rank, const ncclUniqueId& id) { return exercise(rank, n, &id, 1); });
  ParentRoot root(30);
  ranks.sendId(root.id);
  auto rs = ranks.wait(60000);
  expectAllSucceeded(rs, n);
  EXPECT_EQ(root.join(), ncclSuccess) << root.root->errorText();
  double maxInit = 0;
  for (const ChildResult& r : rs) maxInit = std::max(maxInit, atof(r.outcome.text.c_str()));
  double totalMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ bootstrap ] " << n << " ranks: rendezvous (init) took up to " << maxInit << " ms; fork + all "
            << "operations + reaping " << totalMs << " ms" << std::endl;
  if (n == 32) EXPECT_LT(maxInit, 5000) << "the 32-rank rendezvous is too slow";
}

// 5, 6, 7 and 13: every way a Bruck round can be cut short (n not a power of two).
INSTANTIATE_TEST_SUITE_P(Sizes, BootstrapRanks, ::testing::Values(1, 2, 3, 5, 6, 7, 8, 13, 32));

TEST(BootstrapMultiProcess, LargeMessagesBothWaysAtOnce) {
  // Both ranks send first: more than a socket buffer each way, and more than one 16 MiB frame.
  const size_t big = (16u << 20) + 4099, slice = 1u << 20;
  ForkedRanks ranks;
  ranks.start({0, 1}, [&](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 2, nullptr, &b));
    std::vector<uint8_t> out = test::pattern(rank, 1 - rank, 4, big), in(big);
    WEFT_CHILD_TRY(b->send(1 - rank, 1, out.data(), out.size()));
    WEFT_CHILD_TRY(b->recv(1 - rank, 1, in.data(), in.size()));
    WEFT_CHILD_CHECK(in == test::pattern(1 - rank, rank, 4, big), "big payload");
    std::vector<uint8_t> all(2 * slice);
    std::vector<uint8_t> mine = test::pattern(rank, -1, 5, slice);
    memcpy(all.data() + rank * slice, mine.data(), slice);
    WEFT_CHILD_TRY(b->allGather(all.data(), slice));
    WEFT_CHILD_CHECK(memcmp(all.data() + (1 - rank) * slice, test::pattern(1 - rank, -1, 5, slice).data(), slice) == 0,
                     "allgather slice");
    return test::outcome(ncclSuccess);
  });
  ParentRoot root(30);
  ranks.sendId(root.id);
  expectAllSucceeded(ranks.wait(60000), 2);
  EXPECT_EQ(root.join(), ncclSuccess);
}

TEST(BootstrapMultiProcess, QueuesUnexpectedTagsInOrder) {
  ForkedRanks ranks;
  ranks.start({0, 1}, [](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 2, nullptr, &b));
    if (rank == 0) {
      for (int tag : {3, 2, 1}) WEFT_CHILD_TRY(b->send(1, tag, &tag, sizeof(tag)));
      for (int v : {11, 22, 33}) WEFT_CHILD_TRY(b->send(1, 5, &v, sizeof(v)));
      WEFT_CHILD_TRY(b->send(1, -7, "neg", 3));
    } else {
      for (int tag : {1, 2, 3}) {
        int v = 0;
        WEFT_CHILD_TRY(b->recv(0, tag, &v, sizeof(v)));
        WEFT_CHILD_CHECK(v == tag, "tag " + std::to_string(tag) + " carried " + std::to_string(v));
      }
      for (int expect : {11, 22, 33}) {
        int v = 0;
        WEFT_CHILD_TRY(b->recv(0, 5, &v, sizeof(v)));
        WEFT_CHILD_CHECK(v == expect, "same-tag messages out of order");
      }
      char neg[3];
      WEFT_CHILD_TRY(b->recv(0, -7, neg, 3));
      WEFT_CHILD_CHECK(memcmp(neg, "neg", 3) == 0, "negative tag");
    }
    WEFT_CHILD_TRY(b->barrier());
    return test::outcome(ncclSuccess);
  });
  ParentRoot root(30);
  ranks.sendId(root.id);
  expectAllSucceeded(ranks.wait(30000), 2);
  EXPECT_EQ(root.join(), ncclSuccess);
}

TEST(BootstrapMultiProcess, SizeMismatchNamesBothSizes) {
  ForkedRanks ranks;
  ranks.start({0, 1}, [](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 2, nullptr, &b));
    char buf[16] = {};
    if (rank == 0) {
      WEFT_CHILD_TRY(b->send(1, 9, buf, 8));
      WEFT_CHILD_TRY(b->recv(1, 10, buf, 1));  // wait until rank 1 has looked
      return test::outcome(ncclSuccess);
    }
    Status s = b->recv(0, 9, buf, 16);
    WEFT_CHILD_TRY(b->send(0, 10, buf, 1));
    return test::outcome(s, b->failureText());
  });
  ParentRoot root(30);
  ranks.sendId(root.id);
  auto rs = ranks.wait(30000);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].outcome.status, ncclSuccess) << test::describe(rs);
  EXPECT_EQ(rs[1].outcome.status, ncclInvalidUsage) << test::describe(rs);
  EXPECT_NE(rs[1].outcome.text.find("sent 8 bytes"), std::string::npos) << rs[1].outcome.text;
  EXPECT_NE(rs[1].outcome.text.find("expected 16 bytes"), std::string::npos) << rs[1].outcome.text;
  EXPECT_EQ(root.join(), ncclSuccess);
}

TEST(BootstrapMultiProcess, Ipv6Root) {
  ForkedRanks ranks;
  ranks.start(iota(3), [](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 3, nullptr, &b));
    WEFT_CHILD_CHECK(b->listenAddress().family() == AF_INET6, "expected to listen on IPv6 loopback");
    WEFT_CHILD_CHECK(b->peerAddress((rank + 1) % 3).find("[::1]:") == 0, b->peerAddress((rank + 1) % 3));
    int v[3] = {0, 0, 0};
    v[rank] = rank + 100;
    WEFT_CHILD_TRY(b->allGather(v, sizeof(int)));
    WEFT_CHILD_CHECK(v[0] == 100 && v[1] == 101 && v[2] == 102, "allgather over IPv6");
    return test::outcome(ncclSuccess);
  });
  ParentRoot root(30, AF_INET6);
  ranks.sendId(root.id);
  expectAllSucceeded(ranks.wait(30000), 3);
  EXPECT_EQ(root.join(), ncclSuccess);
}

void runMultiRoot(int n, int nIds) {
  ForkedRanks ranks;
  ranks.start(iota(n), [n](int rank, const ncclUniqueId&) {
    std::vector<ncclUniqueId>& ids = ForkedRanks::idsOfThisChild();
    return exercise(rank, n, ids.data(), (int)ids.size());
  });
  std::vector<std::unique_ptr<ParentRoot>> roots;
  std::vector<ncclUniqueId> ids;
  for (int i = 0; i < nIds; ++i) {
    roots.push_back(std::make_unique<ParentRoot>(30));
    ids.push_back(roots.back()->id);
  }
  for (int r = 0; r < n; ++r) ranks.sendIds(r, ids.data(), nIds);
  expectAllSucceeded(ranks.wait(60000), n);
  for (auto& root : roots) EXPECT_EQ(root->join(), ncclSuccess) << root->root->errorText();
}

TEST(BootstrapMultiProcess, MultipleRoots) {
  runMultiRoot(8, 3);
  runMultiRoot(5, 2);
  runMultiRoot(4, 4);
  runMultiRoot(2, 2);
}

TEST(BootstrapMultiProcess, GetUniqueIdEndToEnd) {
  ForkedRanks ranks;
  ranks.start(iota(4), [](int rank, const ncclUniqueId& id) { return exercise(rank, 4, &id, 1); });
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ranks.sendId(id);
  expectAllSucceeded(ranks.wait(60000), 4);
  // The detached root ends once every rank is answered; later tests fork, so wait for it.
  for (int i = 0; i < 500 && Root::detachedRunning() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Root::detachedRunning(), 0);
}

uint16_t freePort(int family) {
  Fd fd;
  SocketAddress bound;
  EXPECT_EQ(listenOn(SocketAddress::loopback(family), &fd, &bound), ncclSuccess);
  return bound.port();
}

void runCommId(const std::string& commId, int family) {
  ForkedRanks ranks;
  ranks.start(iota(3), [&](int rank, const ncclUniqueId&) -> RankOutcome {
    test::childSetEnv("NCCL_COMM_ID", commId);
    ncclUniqueId id;  // every rank makes its own: they must agree
    WEFT_CHILD_TRY(ncclGetUniqueId(&id));
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 3, nullptr, &b));
    WEFT_CHILD_CHECK(b->listenAddress().family() == family, "listen family");
    int v[3] = {0, 0, 0};
    v[rank] = rank * 10 + 1;
    WEFT_CHILD_TRY(b->allGather(v, sizeof(int)));
    WEFT_CHILD_CHECK(v[0] == 1 && v[1] == 11 && v[2] == 21, "allgather");
    WEFT_CHILD_TRY(b->barrier());
    return test::outcome(ncclSuccess);
  });
  ncclUniqueId unused;
  memset(&unused, 0, sizeof(unused));
  ranks.sendId(unused);
  expectAllSucceeded(ranks.wait(30000), 3);
}

TEST(BootstrapMultiProcess, CommIdStartsTheRootInRankZero) {
  runCommId("127.0.0.1:" + std::to_string(freePort(AF_INET)), AF_INET);
  runCommId("[::1]:" + std::to_string(freePort(AF_INET6)), AF_INET6);
}

}  // namespace
}  // namespace weft::bootstrap
