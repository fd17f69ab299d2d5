// The bootstrap with ranks as threads of one process (as ncclCommInitAll needs: every rank's init
// must run concurrently, since init waits for all ranks), and a Bootstrap used by two threads at
// once, which must be refused rather than corrupt its state.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "bootstrap/unique_id.h"
#include "core/log.h"
#include "core/param.h"

namespace weft::bootstrap {
namespace {

class BootstrapThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    setenv("NCCL_BOOTSTRAP_TIMEOUT", "20", 1);
    param::resetForTesting();
    UniqueIdInfo info;
    info.jobKey = randomJobKey();
    ASSERT_EQ(Root::create(SocketAddress::loopback(AF_INET), info.jobKey, &root_, 20), ncclSuccess);
    info.root = root_->address();
    encodeUniqueId(info, &id_);
    root_->start(&stopRoot_);
  }
  void TearDown() override {
    stopRoot_.store(true);
    (void)root_->join();
    unsetenv("NCCL_SOCKET_IFNAME");
    unsetenv("NCCL_BOOTSTRAP_TIMEOUT");
    param::resetForTesting();
  }
  // Ranks 0 and 1 of a two-rank bootstrap, made side by side.
  void initPair(std::unique_ptr<Bootstrap>* b0, std::unique_ptr<Bootstrap>* b1,
                const std::atomic<bool>* abortFlag = nullptr) {
    Status s1 = ncclInternalError;
    std::thread rank1([&] { s1 = Bootstrap::init(id_, 1, 2, abortFlag, b1); });
    const Status s0 = Bootstrap::init(id_, 0, 2, abortFlag, b0);
    rank1.join();
    ASSERT_EQ(s0, ncclSuccess);
    ASSERT_EQ(s1, ncclSuccess);
  }
  std::unique_ptr<Root> root_;
  std::atomic<bool> stopRoot_{false};
  ncclUniqueId id_;
};

TEST_F(BootstrapThreads, RanksAsThreadsOfOneProcess) {
  constexpr int n = 4;
  Status results[n];
  int gathered[n][n];
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      results[r] = Bootstrap::init(id_, r, n, nullptr, &b);
      if (results[r] != ncclSuccess) return;
      for (int i = 0; i < n; ++i) gathered[r][i] = i == r ? r * r : -1;
      results[r] = b->allGather(gathered[r], sizeof(int));
      if (results[r] == ncclSuccess) results[r] = b->barrier();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r], ncclSuccess) << "rank " << r;
    for (int i = 0; i < n; ++i) EXPECT_EQ(gathered[r][i], i * i) << "rank " << r << " slot " << i;
  }
  EXPECT_EQ(root_->join(), ncclSuccess);
}

TEST_F(BootstrapThreads, ConcurrentUseIsRefused) {
  std::unique_ptr<Bootstrap> b0, b1;
  std::atomic<bool> abortFlag{false};
  ASSERT_NO_FATAL_FAILURE(initPair(&b0, &b1, &abortFlag));

  // Thread A waits in recv (rank 1 never sends); thread B uses the same Bootstrap meanwhile.
  Status recvStatus = ncclSuccess;
  std::thread a([&] {
    char c;
    recvStatus = b0->recv(1, 3, &c, 1);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(b0->barrier(), ncclInvalidUsage);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("another thread"), std::string::npos);
  auto t0 = std::chrono::steady_clock::now();
  abortFlag.store(true);
  a.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(recvStatus, ncclSystemError);
  EXPECT_NE(b0->failureText().find("aborted"), std::string::npos) << b0->failureText();
  EXPECT_LT(s, 1.0) << "the abort flag must end a wait within a poll slice";
}

// A send that times out part way through its message leaves the stream in the middle of a frame:
// the connection is done for. Later sends to that peer fail at once saying so, rather than writing
// frames the peer would read as the rest of the cut message.
TEST_F(BootstrapThreads, ASendCutShortByItsDeadlineRetiresTheConnection) {
  setenv("NCCL_BOOTSTRAP_TIMEOUT", "1", 1);
  param::resetForTesting();
  std::unique_ptr<Bootstrap> b0, b1;
  ASSERT_NO_FATAL_FAILURE(initPair(&b0, &b1));
  // Rank 1 reads nothing: 64 MiB cannot all fit in the sockets' buffers, so the send times out.
  std::vector<char> big(64u << 20, 'x');
  EXPECT_NE(b0->send(1, 5, big.data(), big.size()), ncclSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  int small = 7;
  EXPECT_NE(b0->send(1, 6, &small, sizeof(small)), ncclSuccess);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("cut short"), std::string::npos) << log::lastErrorOfThread();
  EXPECT_LT(s, 0.5) << "refused at once, not after another deadline";
}

// ncclCommAbort from a watchdog thread while the main thread waits in the communicator's bootstrap
// (a split, or a shrink, which polls no abort flag): close() ends that wait and returns once the
// thread has left, so the bootstrap can be freed under it.
TEST_F(BootstrapThreads, CloseEndsAnotherThreadsWaitBeforeTheBootstrapGoes) {
  std::unique_ptr<Bootstrap> b0, b1;
  ASSERT_NO_FATAL_FAILURE(initPair(&b0, &b1));
  b0->setAbortFlag(nullptr);  // as ncclCommShrink does
  std::atomic<bool> left{false};
  Status waited = ncclSuccess;
  std::thread splitting([&] {
    char c;
    waited = b0->recv(1, 3, &c, 1);  // rank 1 never sends
    left.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  b0->close();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < 100 && !left.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(left.load()) << "the other thread's wait did not end";
  EXPECT_LT(s, 1.0);
  splitting.join();
  EXPECT_EQ(waited, ncclSystemError);
  EXPECT_NE(b0->failureText().find("being destroyed"), std::string::npos) << b0->failureText();
  b0.reset();
}

// A rank whose creation fails on its own (out of memory, say) after the rendezvous tells its peers:
// a peer waiting for it in the next barrier fails at once with the cause, not at its deadline.
TEST_F(BootstrapThreads, ARankThatGivesUpTellsThePeersWaitingForIt) {
  std::unique_ptr<Bootstrap> b0, b1;
  ASSERT_NO_FATAL_FAILURE(initPair(&b0, &b1));
  Status barrier = ncclSuccess;
  std::string text;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread waiting([&] {
    barrier = b1->barrier();
    text = log::lastErrorOfThread();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  b0->giveUp("rank 0: out of device memory while setting up its connections");
  waiting.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(barrier, ncclRemoteError);
  EXPECT_NE(text.find("out of device memory"), std::string::npos) << text;
  EXPECT_LT(s, 2.0) << "told, not timed out (NCCL_BOOTSTRAP_TIMEOUT is 20 s here)";
}

}  // namespace
}  // namespace weft::bootstrap
