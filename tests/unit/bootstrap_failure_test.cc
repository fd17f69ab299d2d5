// The bootstrap when things go wrong: a rank that never arrives, a rank that dies during the
// rendezvous or during allgathers, ranks that disagree, an unreachable root, abort, timeouts,
// and bad arguments. Each case must end within its deadline with an error naming the culprit.
#include <gtest/gtest.h>

#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bootstrap/wire.h"
#include "bootstrap_fork_harness.h"
#include "test_env.h"

namespace weft::bootstrap {
namespace {

using test::ChildResult;
using test::ForkedRanks;
using test::ParentRoot;
using test::RankOutcome;

using test::contains;

RankOutcome initOnly(int rank, int nRanks, const ncclUniqueId& id, const char* timeout) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", timeout);
  std::unique_ptr<Bootstrap> b;
  Status s = Bootstrap::init(id, rank, nRanks, nullptr, &b);
  return test::outcome(s, log::lastErrorOfThread());
}

// A root whose process is out of file descriptors cannot accept a rank's connection, which stays
// queued and keeps the listener readable: the root must pause between tries, not spin a core.
TEST(BootstrapFailure, ARootOutOfDescriptorsDoesNotSpin) {
  const pid_t child = fork();
  if (child == 0) {
    std::unique_ptr<Root> root;
    if (Root::create(SocketAddress::loopback(AF_INET), randomJobKey(), &root, 20) != ncclSuccess) _exit(10);
    std::atomic<bool> stop{false};
    root->start(&stop);
    Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!client.valid()) _exit(11);
    rlimit low{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(12);
    std::vector<Fd> filler;
    for (int i = 0; i < 64; ++i) {
      Fd f(open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!f.valid()) break;
      filler.push_back(std::move(f));
    }
    const SocketAddress to = root->address();
    if (connect(client.get(), to.sockaddrPtr(), to.length()) != 0 && errno != EINPROGRESS) _exit(13);
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    getrusage(RUSAGE_SELF, &after);
    auto seconds = [](const timeval& t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; };
    const double cpu = seconds(after.ru_utime) + seconds(after.ru_stime) - seconds(before.ru_utime) -
                       seconds(before.ru_stime);
    filler.clear();
    stop.store(true);
    (void)root->join();
    _exit(cpu < 0.3 ? 0 : 20);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "20: the root's thread spun (CPU time per second of waiting)";
}

TEST(BootstrapFailure, MissingRankTimesOutNamingIt) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2}, [](int rank, const ncclUniqueId& id) { return initOnly(rank, 4, id, "2"); });
  ParentRoot root(2);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  ASSERT_EQ(rs.size(), 3u);
  for (const ChildResult& r : rs) {
    EXPECT_EQ(r.outcome.status, ncclSystemError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "timed out")) << r.outcome.text;
    EXPECT_TRUE(contains(r.outcome.text, "rank(s) 3 (1 of 4) never arrived")) << r.outcome.text;
    EXPECT_GT(r.outcome.seconds, 1.5);
    EXPECT_LT(r.outcome.seconds, 4.5);
  }
  EXPECT_EQ(root.join(), ncclSystemError);
  EXPECT_TRUE(contains(root.root->errorText(), "rank(s) 3 ")) << root.root->errorText();
  EXPECT_TRUE(contains(root.root->errorText(), "timed out")) << root.root->errorText();
}

TEST(BootstrapFailure, RankLeavingTheRootFailsEveryone) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2, 3}, [](int rank, const ncclUniqueId& id) -> RankOutcome {
    if (rank != 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 2 comes and goes first
      return initOnly(rank, 4, id, "10");
    }
    // Rank 2 says hello like a real rank, then dies before the rendezvous completes.
    UniqueIdInfo info;
    std::string why;
    WEFT_CHILD_CHECK(decodeUniqueId(id, &info, &why), why);
    Fd fd;
    int err = 0;
    WEFT_CHILD_CHECK(connectBlocking(info.root, util::Deadline::afterMs(5000), nullptr, true, &fd, &err) == Io::kOk, "connect");
    wire::RootHello hello;
    memset(&hello, 0, sizeof(hello));
    hello.rank = 2;
    hello.nRanks = 4;
    hello.nRoots = 1;
    hello.listen = wire::encodeAddress(SocketAddress::loopback(AF_INET));
    hello.listen.port = 9;
    wire::FrameHeader h = wire::makeHeader(wire::FrameType::kRootHello, info.jobKey, 2, 0, sizeof(hello), sizeof(hello));
    WEFT_CHILD_CHECK(sendAll(fd.get(), &h, sizeof(h), util::Deadline::afterMs(1000), nullptr, &err) == Io::kOk, "send");
    WEFT_CHILD_CHECK(sendAll(fd.get(), &hello, sizeof(hello), util::Deadline::afterMs(1000), nullptr, &err) == Io::kOk, "send");
    return test::outcome(ncclSuccess);  // the socket closes as the process leaves
  });
  ParentRoot root(10);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  for (const ChildResult& r : rs) {
    if (r.rank == 2) continue;
    EXPECT_EQ(r.outcome.status, ncclRemoteError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "rank 2 (127.0.0.1:9) closed its connection to the root")) << r.outcome.text;
    EXPECT_LT(r.outcome.seconds, 5.0) << "should fail at once, not at the 10 s deadline";
  }
  EXPECT_EQ(root.join(), ncclRemoteError);
}

TEST(BootstrapFailure, RankDeadDuringAddressExchangeFailsEveryoneQuickly) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2, 3}, [](int rank, const ncclUniqueId& id) -> RankOutcome {
    if (rank != 2) return initOnly(rank, 4, id, "10");
    // Rank 2 completes the root rendezvous with a listen address where nobody listens, then
    // exits: its predecessor is refused, and its successor waits for a connection that never comes.
    UniqueIdInfo info;
    std::string why;
    WEFT_CHILD_CHECK(decodeUniqueId(id, &info, &why), why);
    Fd dead;
    wire::RootHello hello;
    memset(&hello, 0, sizeof(hello));
    SocketAddress deadAddress;
    WEFT_CHILD_CHECK(listenOn(SocketAddress::loopback(AF_INET), &dead, &deadAddress) == ncclSuccess, "listen");
    dead.reset();
    hello.rank = 2;
    hello.nRanks = 4;
    hello.nRoots = 1;
    hello.listen = wire::encodeAddress(deadAddress);
    Fd fd;
    int err = 0;
    util::Deadline d = util::Deadline::afterMs(5000);
    WEFT_CHILD_CHECK(connectBlocking(info.root, d, nullptr, true, &fd, &err) == Io::kOk, "connect");
    wire::FrameHeader h = wire::makeHeader(wire::FrameType::kRootHello, info.jobKey, 2, 0, sizeof(hello), sizeof(hello));
    WEFT_CHILD_CHECK(sendAll(fd.get(), &h, sizeof(h), d, nullptr, &err) == Io::kOk, "send");
    WEFT_CHILD_CHECK(sendAll(fd.get(), &hello, sizeof(hello), d, nullptr, &err) == Io::kOk, "send");
    char reply[sizeof(wire::FrameHeader) + sizeof(wire::RootReply)];
    WEFT_CHILD_CHECK(recvAll(fd.get(), reply, sizeof(reply), d, nullptr, &err) == Io::kOk, "reply");
    return test::outcome(ncclSuccess);
  });
  ParentRoot root(10);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  for (const ChildResult& r : rs) {
    if (r.rank == 2) continue;
    EXPECT_EQ(r.outcome.status, ncclRemoteError) << test::describe(rs);
    EXPECT_LT(r.outcome.seconds, 3.0) << test::describe(rs);
    // The predecessor sees the refusal itself; the others hear of a failure along the ring,
    // which names rank 2 unless a rank in between had already exited.
    if (r.rank == 1) EXPECT_TRUE(contains(r.outcome.text, "rank 2 (")) << r.outcome.text;
  }
  EXPECT_EQ(root.join(), ncclSuccess);
}

RankOutcome allGatherLoop(int rank, const ncclUniqueId& id, bool dieAfterInit, std::atomic<int>* busy = nullptr) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "10");
  std::unique_ptr<Bootstrap> b;
  WEFT_CHILD_TRY(Bootstrap::init(id, rank, 4, nullptr, &b));
  if (dieAfterInit) raise(SIGKILL);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  int iterations = 0;
  while (std::chrono::steady_clock::now() < end) {
    std::vector<int> v(4 * 256, -1);
    for (int i = 0; i < 256; ++i) v[rank * 256 + i] = rank * 100000 + iterations + i;
    Status s = b->allGather(v.data(), 256 * sizeof(int));
    if (s != ncclSuccess) {
      return test::outcome(s, b->failureText() + " [after " + std::to_string(iterations) + " allgathers]");
    }
    for (int r = 0; r < 4; ++r) WEFT_CHILD_CHECK(v[r * 256 + 7] == r * 100000 + iterations + 7, "allgather data");
    if (++iterations == 20 && busy != nullptr) busy->store(1);
  }
  return RankOutcome{test::kCheckFailed, 0, "no error within 8 s"};
}

TEST(BootstrapFailure, RankKilledDuringAllGathersIsNamed) {
  // Rank 2 raises a flag in shared memory once the ranks are busy with allgathers; then it is killed.
  void* shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* busy = new (shared) std::atomic<int>(0);
  ForkedRanks ranks;
  ranks.start({0, 1, 2, 3}, [busy](int rank, const ncclUniqueId& id) {
    return allGatherLoop(rank, id, false, rank == 2 ? busy : nullptr);
  });
  ParentRoot root(10);
  ranks.sendId(root.id);
  for (int i = 0; i < 1500 && busy->load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(busy->load(), 1) << "the ranks never got going";
  kill(ranks.pidOf(2), SIGKILL);
  auto rs = ranks.wait(20000);
  for (const ChildResult& r : rs) {
    if (r.rank == 2) {
      EXPECT_EQ(r.signal, SIGKILL);
      continue;
    }
    EXPECT_EQ(r.outcome.status, ncclRemoteError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "rank 2 (127.0.0.1:")) << r.outcome.text;
    EXPECT_LT(r.outcome.seconds, 6.0) << "noticed at the deadline, not at once";
  }
  EXPECT_EQ(root.join(), ncclSuccess);
  munmap(shared, sizeof(std::atomic<int>));
}

TEST(BootstrapFailure, RankDeadAfterInitIsNamedByEveryone) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2, 3}, [](int rank, const ncclUniqueId& id) { return allGatherLoop(rank, id, rank == 2); });
  ParentRoot root(10);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  for (const ChildResult& r : rs) {
    if (r.rank == 2) continue;
    EXPECT_EQ(r.outcome.status, ncclRemoteError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "rank 2 (127.0.0.1:")) << r.outcome.text;
    EXPECT_LT(r.outcome.seconds, 3.0);
  }
  EXPECT_EQ(root.join(), ncclSuccess);
}

// After init, rank 2 dies and the others wait for a message from it. Rank 3 reads from rank 2's
// connection (end of stream), rank 1 sends to it (its connection closes), and rank 0 has no
// connection with it at all (it probes rank 2's listen socket and is refused). All three must
// notice well before the 10 s deadline.
TEST(BootstrapFailure, SilentPeerDeathIsNoticedBeforeTheDeadline) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2, 3}, [](int rank, const ncclUniqueId& id) -> RankOutcome {
    test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "10");
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 4, nullptr, &b));
    if (rank == 2) raise(SIGKILL);
    int v = 0;
    Status s = b->recv(2, 1, &v, sizeof(v));
    return test::outcome(s, b->failureText());
  });
  ParentRoot root(10);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  for (const ChildResult& r : rs) {
    if (r.rank == 2) continue;
    EXPECT_EQ(r.outcome.status, ncclRemoteError) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "rank 2 (127.0.0.1:")) << r.outcome.text;
    EXPECT_TRUE(contains(r.outcome.text, "recv from rank 2 (tag 1)")) << r.outcome.text;
    EXPECT_LT(r.outcome.seconds, 3.0) << test::describe(rs);
  }
  EXPECT_EQ(root.join(), ncclSuccess);
}

TEST(BootstrapFailure, NRanksMismatchFailsEveryone) {
  ForkedRanks ranks;
  ranks.start({0, 1, 2}, [](int rank, const ncclUniqueId& id) { return initOnly(rank, rank == 2 ? 4 : 3, id, "10"); });
  ParentRoot root(10);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  for (const ChildResult& r : rs) {
    EXPECT_EQ(r.outcome.status, ncclInvalidUsage) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "every rank must pass the same nranks")) << r.outcome.text;
    EXPECT_LT(r.outcome.seconds, 3.0);
  }
  EXPECT_EQ(root.stopAndJoin(), ncclInvalidUsage);
}

TEST(BootstrapFailure, DuplicateRankFailsEveryone) {
  ForkedRanks ranks;
  ranks.start({0, 1, 1}, [](int rank, const ncclUniqueId& id) { return initOnly(rank, 3, id, "10"); });
  ParentRoot root(10);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  for (const ChildResult& r : rs) {
    EXPECT_EQ(r.outcome.status, ncclInvalidUsage) << test::describe(rs);
    EXPECT_TRUE(contains(r.outcome.text, "rank 1 (") && contains(r.outcome.text, "arrived twice")) << r.outcome.text;
  }
  EXPECT_EQ(root.stopAndJoin(), ncclInvalidUsage);
}

TEST(BootstrapFailure, AbortFlagStopsInitQuickly) {
  ForkedRanks ranks;
  ranks.start({0}, [](int rank, const ncclUniqueId& id) -> RankOutcome {
    std::atomic<bool> abortFlag{false};
    std::thread raiser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      abortFlag.store(true);
    });
    std::unique_ptr<Bootstrap> b;
    Status s = Bootstrap::init(id, 0, 2, &abortFlag, &b);  // rank 1 never comes; default 300 s deadline
    raiser.join();
    return test::outcome(s, log::lastErrorOfThread());
  });
  ParentRoot root(60);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].outcome.status, ncclSystemError) << test::describe(rs);
  EXPECT_TRUE(contains(rs[0].outcome.text, "aborted")) << rs[0].outcome.text;
  EXPECT_LT(rs[0].outcome.seconds, 1.5);
  EXPECT_NE(root.stopAndJoin(), ncclSuccess);
}

// A rank whose creation is aborted before it reaches the root that its own process runs (the
// ncclGetUniqueId root): the root fails at once and tells the ranks that came, instead of holding
// them (and its thread and sockets) for NCCL_BOOTSTRAP_TIMEOUT; it ends within its linger.
TEST(BootstrapFailure, ARankThatGivesUpReleasesItsProcesssRoot) {
  ForkedRanks ranks;
  ranks.start({1}, [](int, const ncclUniqueId&) -> RankOutcome {
    ncclUniqueId own;
    WEFT_CHILD_TRY(createRootId(&own));  // a detached root in this process, as ncclGetUniqueId makes
    const auto t0 = std::chrono::steady_clock::now();
    Status s1 = ncclSuccess;
    std::string text1;
    std::thread rank1([&] {
      std::unique_ptr<Bootstrap> b;
      s1 = Bootstrap::init(own, 1, 2, nullptr, &b);  // default 300 s deadline
      text1 = log::lastErrorOfThread();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::atomic<bool> aborted{true};
    std::unique_ptr<Bootstrap> b0;
    WEFT_CHILD_CHECK(Bootstrap::init(own, 0, 2, &aborted, &b0) != ncclSuccess, "rank 0's aborted init succeeded");
    rank1.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WEFT_CHILD_CHECK(seconds < 3.0, "rank 1 waited " + std::to_string(seconds) + " s: " + text1);
    for (int i = 0; i < 150 && Root::detachedRunning() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    WEFT_CHILD_CHECK(Root::detachedRunning() == 0, "the failed root still runs 15 s later");
    return test::outcome(s1, text1);
  });
  ParentRoot unused(5);  // the child makes its own root; the harness still hands out an id
  ranks.sendId(unused.id);
  auto rs = ranks.wait(30000);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].outcome.status, ncclRemoteError) << test::describe(rs);
  EXPECT_TRUE(contains(rs[0].outcome.text, "rank 0, in the process running this root, gave up its creation (aborted)"))
      << rs[0].outcome.text;
  EXPECT_NE(unused.stopAndJoin(), ncclSuccess);
}

TEST(BootstrapFailure, RecvTimesOutNamingThePeer) {
  ForkedRanks ranks;
  ranks.start({0, 1}, [](int rank, const ncclUniqueId& id) -> RankOutcome {
    test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", rank == 0 ? "1" : "10");
    std::unique_ptr<Bootstrap> b;
    WEFT_CHILD_TRY(Bootstrap::init(id, rank, 2, nullptr, &b));
    char c = 'x';
    if (rank == 1) {
      WEFT_CHILD_TRY(b->recv(0, 6, &c, 1));  // sent by rank 0 after its timeout
      return test::outcome(ncclSuccess);
    }
    auto t0 = std::chrono::steady_clock::now();
    Status s = b->recv(1, 5, &c, 1);  // rank 1 never sends this
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WEFT_CHILD_TRY(b->send(1, 6, &c, 1));
    return test::outcome(s, b->failureText() + " [waited " + std::to_string(waited) + "]");
  });
  ParentRoot root(10);
  ranks.sendId(root.id);
  auto rs = ranks.wait(20000);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].outcome.status, ncclSuccess) << test::describe(rs);
  EXPECT_EQ(rs[0].outcome.status, ncclSystemError) << test::describe(rs);
  EXPECT_TRUE(contains(rs[0].outcome.text, "timed out")) << rs[0].outcome.text;
  EXPECT_TRUE(contains(rs[0].outcome.text, "rank 1 (127.0.0.1:")) << rs[0].outcome.text;
  EXPECT_TRUE(contains(rs[0].outcome.text, "recv from rank 1 (tag 5)")) << rs[0].outcome.text;
  EXPECT_EQ(root.join(), ncclSuccess);
}

// A ncclGetUniqueId root that refuses connections has ended (an id used twice, or its process
// gone): said within kEndedRootRetryMs, not after NCCL_BOOTSTRAP_TIMEOUT (300 s here).
TEST(BootstrapFailure, AnEndedRootIsNamedAtOnce) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  param::resetForTesting();
  UniqueIdInfo info;
  info.jobKey = 77;
  {
    Fd fd;  // a port that nobody listens on once this scope ends
    ASSERT_EQ(listenOn(SocketAddress::loopback(AF_INET), &fd, &info.root), ncclSuccess);
  }
  ncclUniqueId id;
  encodeUniqueId(info, &id);
  std::unique_ptr<Bootstrap> b;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Bootstrap::init(id, 0, 2, nullptr, &b), ncclSystemError);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string text = log::lastErrorOfThread();
  EXPECT_TRUE(contains(text, "refuses connections: it has ended") && contains(text, info.root.toString())) << text;
  EXPECT_TRUE(contains(text, "new ncclGetUniqueId")) << text;
  EXPECT_GT(s, 1.5);
  EXPECT_LT(s, 4.0);
  unsetenv("NCCL_SOCKET_IFNAME");
  param::resetForTesting();
}

// The common mistake behind it: a unique id used for a second creation.
TEST(BootstrapFailure, AUniqueIdUsedTwiceIsSaidToBeUsed) {
  ForkedRanks ranks;
  ranks.start({0}, [](int, const ncclUniqueId&) -> RankOutcome {
    ncclUniqueId own;
    WEFT_CHILD_TRY(createRootId(&own));
    Status s1 = ncclSuccess;
    std::thread rank1([&] {
      std::unique_ptr<Bootstrap> b;
      s1 = Bootstrap::init(own, 1, 2, nullptr, &b);
    });
    std::unique_ptr<Bootstrap> first;
    WEFT_CHILD_TRY(Bootstrap::init(own, 0, 2, nullptr, &first));
    rank1.join();
    WEFT_CHILD_CHECK(s1 == ncclSuccess, "rank 1's first creation failed");
    for (int i = 0; i < 50 && Root::detachedRunning() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Bootstrap> again;
    Status s = Bootstrap::init(own, 0, 2, nullptr, &again);  // the same id once more; default 300 s deadline
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WEFT_CHILD_CHECK(seconds < 4.0, "the second use took " + std::to_string(seconds) + " s");
    return test::outcome(s, log::lastErrorOfThread());
  });
  ParentRoot unused(5);
  ranks.sendId(unused.id);
  auto rs = ranks.wait(30000);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].outcome.status, ncclSystemError) << test::describe(rs);
  EXPECT_TRUE(contains(rs[0].outcome.text, "refuses connections: it has ended")) << rs[0].outcome.text;
  EXPECT_NE(unused.stopAndJoin(), ncclSuccess);
}

// A root that rank 0 starts (NCCL_COMM_ID) may come up after the others knock: they keep trying
// until the deadline, then say that nothing accepted their connections.
TEST(BootstrapFailure, ARootThatRankZeroStartsIsAwaitedToTheDeadline) {
  setenv("NCCL_BOOTSTRAP_TIMEOUT", "3", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  param::resetForTesting();
  UniqueIdInfo info;
  info.jobKey = 78;
  info.rootStartedByRank = true;
  {
    Fd fd;
    ASSERT_EQ(listenOn(SocketAddress::loopback(AF_INET), &fd, &info.root), ncclSuccess);
  }
  ncclUniqueId id;
  encodeUniqueId(info, &id);
  std::unique_ptr<Bootstrap> b;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Bootstrap::init(id, 1, 2, nullptr, &b), ncclSystemError);  // rank 1: it starts no root
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string text = log::lastErrorOfThread();
  EXPECT_TRUE(contains(text, "timed out") && contains(text, info.root.toString())) << text;
  EXPECT_GT(s, 2.9);
  EXPECT_LT(s, 5.0);
  unsetenv("NCCL_BOOTSTRAP_TIMEOUT");
  unsetenv("NCCL_SOCKET_IFNAME");
  param::resetForTesting();
}

TEST(BootstrapFailure, BadArgumentsAreRejectedUpFront) {
  UniqueIdInfo info;
  info.jobKey = 5;
  info.root = SocketAddress::loopback(AF_INET);
  info.root.setPort(9);
  ncclUniqueId good, zero;
  encodeUniqueId(info, &good);
  memset(&zero, 0, sizeof(zero));
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::init(zero, 0, 2, nullptr, &b), ncclInvalidArgument);
  EXPECT_TRUE(contains(log::lastErrorOfThread(), "all zeros")) << log::lastErrorOfThread();
  EXPECT_EQ(Bootstrap::init(good, 2, 2, nullptr, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::init(good, -1, 2, nullptr, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::init(good, 0, 0, nullptr, &b), ncclInvalidArgument);
  ncclUniqueId two[2] = {good, good};
  EXPECT_EQ(Bootstrap::init(two, 2, 0, 1, nullptr, &b), ncclInvalidArgument);  // more ids than ranks
  EXPECT_EQ(Bootstrap::init(two, 2, 0, 2, nullptr, &b), ncclInvalidArgument);  // the same root twice
  EXPECT_TRUE(contains(log::lastErrorOfThread(), "same root")) << log::lastErrorOfThread();
  EXPECT_EQ(b, nullptr);
}

}  // namespace
}  // namespace weft::bootstrap
