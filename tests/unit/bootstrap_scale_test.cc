// The bootstrap at scale (matrix row 12): a root that finds 1500 ranks queued at once answers
// them all; a thousand ranks, 8 processes of 128 rank threads each, create three times in a row
// (a restart loop), each creation an init, allgathers of two sizes checked slot by slot, and a
// barrier. Processes rather than one: every rank holds about 4 log2(n) sockets, more than one
// process may open here.
//
// The allgathers are Bruck's (ceil(log2 n) rounds), the address exchange at init too. With 512
// rank threads per core, every sequential step costs a pass of the scheduler over all of them:
// what this test measures is mostly that, not the network, so its times are printed, not checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/wire.h"
#include "bootstrap_fork_harness.h"

namespace weft::bootstrap {
namespace {

constexpr int kProcesses = 8;
constexpr int kThreadsPerProcess = 128;
constexpr int kRanks = kProcesses * kThreadsPerProcess;
constexpr int kCreations = 3;

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One rank's creation: init, a 16-byte and a 256-byte allgather (every slot checked), a barrier.
// Returns "" or what went wrong; adds its phase times to the slowest seen.
std::string oneCreation(int rank, int creation, const ncclUniqueId& id, double* slowest) {
  auto t = std::chrono::steady_clock::now();
  std::unique_ptr<Bootstrap> b;
  if (Bootstrap::init(id, rank, kRanks, nullptr, &b) != ncclSuccess) {
    return "init: " + std::string(log::lastErrorOfThread());
  }
  slowest[0] = std::max(slowest[0], secondsSince(t));
  for (size_t words : {2u, 32u}) {
    t = std::chrono::steady_clock::now();
    std::vector<uint64_t> all((size_t)kRanks * words, ~0ull);
    for (size_t i = 0; i < words; ++i) all[rank * words + i] = ((uint64_t)creation << 48) ^ ((uint64_t)rank << 16) ^ i;
    if (b->allGather(all.data(), words * sizeof(uint64_t)) != ncclSuccess) return "allgather: " + b->failureText();
    for (int r = 0; r < kRanks; ++r) {
      for (size_t i = 0; i < words; ++i) {
        if (all[r * words + i] != (((uint64_t)creation << 48) ^ ((uint64_t)r << 16) ^ i)) {
          return "allgather of " + std::to_string(words * 8) + " bytes: slot " + std::to_string(r) + " word " +
                 std::to_string(i) + " is wrong";
        }
      }
    }
    slowest[words == 2 ? 1 : 2] = std::max(slowest[words == 2 ? 1 : 2], secondsSince(t));
  }
  t = std::chrono::steady_clock::now();
  if (b->barrier() != ncclSuccess) return "barrier: " + b->failureText();
  slowest[3] = std::max(slowest[3], secondsSince(t));
  // log2(1024) = 10 rounds each: the address exchange (two messages a round but the last), two
  // allgathers and the barrier (one each); a ring would have sent 1023 per allgather. Bytes: what
  // the allgathers bring, (n - 1) x (16 + 256) and addresses, and two addresses passed on a round.
  constexpr uint64_t kRounds = 10, kAddressBytes = sizeof(wire::WireAddress), kMessages = 5 * kRounds - 1;
  const Messenger::Traffic& traffic = b->traffic();
  if (traffic.messagesSent != kMessages || traffic.messagesReceived != kMessages) {
    return "sent " + std::to_string(traffic.messagesSent) + " and received " +
           std::to_string(traffic.messagesReceived) + " messages, expected " + std::to_string(kMessages);
  }
  const uint64_t gathered = (kRanks - 1) * (16 + 256 + kAddressBytes) + 2 * (kRounds - 1) * kAddressBytes;
  if (traffic.bytesReceived != gathered) {
    return "received " + std::to_string(traffic.bytesReceived) + " bytes, expected " + std::to_string(gathered);
  }
  if (b->connectedPeers() > 4 * kRounds) return "connected with " + std::to_string(b->connectedPeers()) + " peers";
  return "";
}

// A child process: its 128 ranks as threads, creation after creation.
test::RankOutcome runProcess(int process) {
  test::childSetEnv("NCCL_BOOTSTRAP_TIMEOUT", "60");
  const std::vector<ncclUniqueId> ids = test::ForkedRanks::idsOfThisChild();
  if ((int)ids.size() != kCreations) return test::RankOutcome{test::kCheckFailed, 0, "expected one id per creation"};
  std::mutex mu;
  std::string firstError;
  double slowest[4] = {0, 0, 0, 0};  // init, allgather 16 B, allgather 256 B, barrier
  std::vector<double> creationSeconds;
  for (int c = 0; c < kCreations && firstError.empty(); ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreadsPerProcess; ++i) {
      threads.emplace_back([&, i] {
        const int rank = process * kThreadsPerProcess + i;
        double mine[4] = {0, 0, 0, 0};
        std::string err = oneCreation(rank, c, ids[c], mine);
        std::lock_guard<std::mutex> lock(mu);
        for (int k = 0; k < 4; ++k) slowest[k] = std::max(slowest[k], mine[k]);
        if (!err.empty() && firstError.empty()) firstError = "rank " + std::to_string(rank) + ": " + err;
      });
    }
    for (std::thread& t : threads) t.join();
    creationSeconds.push_back(secondsSince(t0));
  }
  if (!firstError.empty()) return test::outcome(ncclInternalError, firstError);
  char text[256];
  snprintf(text, sizeof(text), "creations %.2f/%.2f/%.2f s; slowest init %.2f s, allgather 16 B %.3f s, 256 B %.3f s, "
           "barrier %.3f s", creationSeconds[0], creationSeconds[1], creationSeconds[2], slowest[0], slowest[1],
           slowest[2], slowest[3]);
  return test::outcome(ncclSuccess, text);
}

TEST(BootstrapScale, AThousandRanksCreateThreeTimesOver) {
  std::vector<int> processes(kProcesses);
  for (int p = 0; p < kProcesses; ++p) processes[p] = p;
  test::ForkedRanks ranks;
  ranks.start(processes, [](int process, const ncclUniqueId&) { return runProcess(process); });
  std::vector<std::unique_ptr<test::ParentRoot>> roots;
  std::vector<ncclUniqueId> ids;
  for (int c = 0; c < kCreations; ++c) {
    roots.push_back(std::make_unique<test::ParentRoot>(60));
    ids.push_back(roots.back()->id);
  }
  for (int p = 0; p < kProcesses; ++p) ranks.sendIds(p, ids.data(), kCreations);
  auto rs = ranks.wait(110000);
  for (const test::ChildResult& r : rs) {
    EXPECT_EQ(r.outcome.status, ncclSuccess) << test::describe(rs);
    printf("process %d (ranks %d-%d): %s\n", r.rank, r.rank * kThreadsPerProcess,
           (r.rank + 1) * kThreadsPerProcess - 1, r.outcome.text.c_str());
  }
  for (auto& root : roots) EXPECT_EQ(root->join(), ncclSuccess);
}

// A large job's ranks all reach the root at once (one launcher starts them together): 1500 are
// queued on its listen socket, each with its hello sent, before the root accepts the first. Every
// one of them is a rank, so every one must be answered; the limit on connections waiting for their
// hello (meant for strangers holding slots) must not drop ranks that had no chance to be read yet.
TEST(BootstrapScale, RanksQueuedAtTheRootAllAtOnceAreAllAnswered) {
  constexpr int kQueued = 1500;
  const uint64_t jobKey = randomJobKey();
  std::unique_ptr<Root> root;
  ASSERT_EQ(Root::create(SocketAddress::loopback(AF_INET), jobKey, &root, 30), ncclSuccess);
  std::vector<Fd> ranks(kQueued);
  const util::Deadline deadline = util::Deadline::afterSeconds(20);
  Fd unused;  // a valid listen address for the hellos; the ranks' neighbours never dial it here
  SocketAddress listenAddress;
  ASSERT_EQ(listenOn(SocketAddress::loopback(AF_INET), &unused, &listenAddress), ncclSuccess);
  for (int r = 0; r < kQueued; ++r) {
    int err = 0;
    ASSERT_EQ(connectBlocking(root->address(), deadline, nullptr, true, &ranks[r], &err), Io::kOk) << r;
    wire::RootHello hello;
    memset(&hello, 0, sizeof(hello));
    hello.rank = r;
    hello.nRanks = kQueued;
    hello.nRoots = 1;
    hello.listen = wire::encodeAddress(listenAddress);
    char frame[sizeof(wire::FrameHeader) + sizeof(hello)];
    const wire::FrameHeader h =
        wire::makeHeader(wire::FrameType::kRootHello, jobKey, r, 0, sizeof(hello), sizeof(hello));
    memcpy(frame, &h, sizeof(h));
    memcpy(frame + sizeof(h), &hello, sizeof(hello));
    ASSERT_EQ(sendAll(ranks[r].get(), frame, sizeof(frame), deadline, nullptr, &err), Io::kOk) << r;
  }
  std::atomic<bool> stop{false};
  root->start(&stop);
  int answered = 0, firstUnanswered = -1;
  for (int r = 0; r < kQueued; ++r) {
    char reply[sizeof(wire::FrameHeader) + sizeof(wire::RootReply)];
    int err = 0;
    wire::FrameHeader h;
    if (recvAll(ranks[r].get(), reply, sizeof(reply), deadline, nullptr, &err) == Io::kOk &&
        (memcpy(&h, reply, sizeof(h)), h.type == (uint16_t)wire::FrameType::kRootReply)) {
      ++answered;
    } else if (firstUnanswered < 0) {
      firstUnanswered = r;
    }
  }
  EXPECT_EQ(answered, kQueued) << "rank " << firstUnanswered << " was not answered";
  stop.store(true);  // a root that lost ranks would wait for them
  EXPECT_EQ(root->join(), ncclSuccess);
}

}  // namespace
}  // namespace weft::bootstrap
