// The bootstrap with ranks as threads of one process (as ncclCommInitAll needs: every rank's init
// must run concurrently, since init waits for all ranks), and a Bootstrap used by two threads at
// once, which must be refused rather than corrupt its state.
#include <gtest/gtest.h>

#include <thread>

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
  Status s1 = ncclInternalError;
  std::thread rank1([&] { s1 = Bootstrap::init(id_, 1, 2, &abortFlag, &b1); });
  ASSERT_EQ(Bootstrap::init(id_, 0, 2, &abortFlag, &b0), ncclSuccess);
  rank1.join();
  ASSERT_EQ(s1, ncclSuccess);

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

}  // namespace
}  // namespace weft::bootstrap
