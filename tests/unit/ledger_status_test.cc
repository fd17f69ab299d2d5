// weft-status's reading of the host's ledger pages: page names, the ranks behind and the call the
// others wait in, sends and receives that do not match between host mates, findings, and ranks
// whose process has gone.
#include "core/ledger_status.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include <gtest/gtest.h>

#include "core/call_check.h"
#include "ledger_test_util.h"

using namespace weft::core;

namespace {

constexpr auto freshHash = weft::test::freshCommHash;

const CommLedgerView* find(const std::vector<CommLedgerView>& comms, uint64_t hash) {
  for (const CommLedgerView& c : comms)
    if (c.commHash == hash) return &c;
  return nullptr;
}

CallSignature allReduce(uint64_t count) { return weft::test::allReduceCall(count); }

// Pages for ranks 0..2 of communicator `hash`, all on this host (null ones where there is no
// shared memory).
std::vector<std::unique_ptr<OpLedger>> threeRankPages(uint64_t hash) {
  std::vector<std::unique_ptr<OpLedger>> pages;
  for (int r = 0; r < 3; ++r) pages.push_back(OpLedger::create(hash, r, 3));
  return pages;
}

// What weft-status prints now for communicator `hash` ("" and a failure when no page is found).
std::string statusNow(uint64_t hash) {
  const std::vector<CommLedgerView> comms = scanLedgerPages();
  const CommLedgerView* comm = find(comms, hash);
  if (comm == nullptr) {
    ADD_FAILURE() << "no page of communicator " << hash;
    return "";
  }
  return describeCommStatus(*comm);
}

}  // namespace

TEST(LedgerStatus, PageNamesAreParsedStrictly) {
  uint64_t hash = 0;
  int rank = -1;
  ASSERT_TRUE(parseLedgerPageName("weft-00000000deadbeef-12", &hash, &rank));
  EXPECT_EQ(hash, 0xdeadbeefULL);
  EXPECT_EQ(rank, 12);
  EXPECT_EQ(OpLedger::pageName(0x1234abcdULL, 7), "/weft-000000001234abcd-7");  // the name pages get
  EXPECT_TRUE(parseLedgerPageName(OpLedger::pageName(0x1234abcdULL, 7).substr(1), &hash, &rank));
  for (const char* other : {"weft-00000000DEADBEEF-1", "weft-0000deadbeef-1", "weft-00000000deadbeef-", "weft-00000000deadbeef-1x",
                            "weft-00000000deadbeef-1-0", "weft-shm-00000000deadbeef-1", "sem.weft", "weft-00000000deadbeef-9999999999"}) {
    EXPECT_FALSE(parseLedgerPageName(other, &hash, &rank)) << other;
  }
}

TEST(LedgerStatus, NamesTheRankBehindTheCallTheOthersWaitInAndUnmatchedSends) {
  const uint64_t hash = freshHash();
  const auto pages = threeRankPages(hash);
  if (!pages[0]) GTEST_SKIP() << "no POSIX shared memory on this machine";
  for (int r = 0; r < 3; ++r) pages[r]->publish(allReduce(256));
  pages[0]->publish(allReduce(1024));
  pages[1]->publish(allReduce(1024));  // rank 2 has not made collective #2
  pages[1]->publishP2p(0, P2pDirection::kSend, {64, ncclFloat32});
  pages[1]->publishP2p(0, P2pDirection::kSend, {64, ncclFloat32});
  pages[0]->publishP2p(1, P2pDirection::kRecv, {64, ncclFloat32});  // rank 0 posted one receive of two
  pages[0]->postFinding(2, "collective #2 differs (a test's words)");

  const std::vector<CommLedgerView> comms = scanLedgerPages();
  const CommLedgerView* comm = find(comms, hash);
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(comm->ranks.size(), 3u);
  EXPECT_EQ(comm->ranks[2].pid, getpid());
  EXPECT_TRUE(comm->ranks[2].alive);
  const std::string text = describeCommStatus(*comm);
  EXPECT_NE(text.find("rank 2 (pid " + std::to_string(getpid()) + "): 1 collective, the latest"), std::string::npos)
      << text;
  EXPECT_NE(text.find("behind: rank 2 has not made collective #2 (" + describeCall(allReduce(1024)) +
                      "), which ranks 0 and 1 have made"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 has posted 2 sends to rank 0, which has posted 1 receive from it: a receive is "
                      "missing"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 found: collective #2 differs (a test's words)"), std::string::npos) << text;

  pages[2]->publish(allReduce(1024));
  pages[0]->publishP2p(1, P2pDirection::kRecv, {64, ncclFloat32});
  const std::string level = statusNow(hash);
  EXPECT_EQ(level.find("behind"), std::string::npos) << level;
  EXPECT_EQ(level.find("point-to-point"), std::string::npos) << level;
}

TEST(LedgerStatus, RanksWithoutTheGraphReplayOthersWaitInAreNamed) {
  const uint64_t hash = freshHash();
  const auto pages = threeRankPages(hash);
  if (!pages[0]) GTEST_SKIP() << "no POSIX shared memory on this machine";
  for (int r = 0; r < 3; ++r) pages[r]->publish(allReduce(256));  // the captured call: the same everywhere
  const int64_t nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
  pages[0]->publishReplays(4, nowMs - 7000);
  pages[1]->publishReplays(4, nowMs - 6000);
  pages[2]->publishReplays(0, nowMs);  // rank 2 never launched the replay
  const std::string text = statusNow(hash);
  EXPECT_NE(text.find("a graph replay's kernel runs on 4 channels, unchanged for 7 s"), std::string::npos) << text;
  EXPECT_NE(text.find("graph replays: rank 2 runs none while ranks 0 and 1 run one"), std::string::npos) << text;
  EXPECT_EQ(text.find("every rank of this host has made the same calls"), std::string::npos) << text;

  pages[2]->publishReplays(4, nowMs);  // it launches it: nobody is behind
  const std::string level = statusNow(hash);
  EXPECT_EQ(level.find("graph replays:"), std::string::npos) << level;
  EXPECT_NE(level.find("every rank of this host has made the same calls"), std::string::npos) << level;
}

TEST(LedgerStatus, AKilledRanksPageIsMarkedExitedAndMissingPagesAreSaid) {
  const uint64_t hash = freshHash();
  auto mine = OpLedger::create(hash, 0, 3);
  if (!mine) GTEST_SKIP() << "no POSIX shared memory on this machine";
  mine->publish(allReduce(8));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // leaves its page behind, as a killed rank does
    auto page = OpLedger::create(hash, 1, 3);
    page.release();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const std::vector<CommLedgerView> comms = scanLedgerPages();
  const CommLedgerView* comm = find(comms, hash);
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(comm->ranks.size(), 2u);
  EXPECT_FALSE(comm->ranks[1].alive);
  const std::string text = describeCommStatus(*comm);
  EXPECT_NE(text.find("rank 1 (pid " + std::to_string(child) + ", exited): 0 collectives"), std::string::npos) << text;
  EXPECT_NE(text.find("behind: rank 1 has not made collective #1"), std::string::npos) << text;
  EXPECT_NE(text.find("the pages say 3 ranks on this host"), std::string::npos) << text;
  EXPECT_EQ(removeExitedPages(*comm), 1);  // the killed rank's page only
  const std::vector<CommLedgerView> after = scanLedgerPages();
  ASSERT_NE(find(after, hash), nullptr);
  EXPECT_EQ(find(after, hash)->ranks.size(), 1u);
  EXPECT_EQ(find(after, hash)->ranks[0].rank, 0);
}

// Pure: many ranks behind are all named, the call too (no line buffer cuts them).
TEST(LedgerStatus, ManyRanksBehindAreAllNamed) {
  CommLedgerView comm;
  comm.commHash = 0xabc;
  comm.hostRanks = 64;
  for (int r = 0; r < 64; ++r) {
    RankLedgerView v;
    v.rank = r;
    v.pid = 1000 + r;
    v.collectives = r == 0 ? 9 : 8;
    v.haveLatest = true;
    v.latest = allReduce(r == 0 ? 4096 : 2048);
    v.sends.assign(64, 0);
    v.receives.assign(64, 0);
    comm.ranks.push_back(v);
  }
  const std::string text = describeCommStatus(comm);
  EXPECT_NE(text.find("behind: ranks 1, 2, 3, "), std::string::npos) << text;
  EXPECT_NE(text.find(", 62 and 63 have not made collective #9 (" + describeCall(allReduce(4096)) +
                      "), which rank 0 has made\n"), std::string::npos) << text;
}

TEST(LedgerStatus, EachRanksMemoryIsShownOncePublished) {
  const uint64_t hash = freshHash();
  const auto pages = threeRankPages(hash);
  if (!pages[0]) GTEST_SKIP() << "no POSIX shared memory on this machine";
  pages[1]->publishMemory(LedgerMemory{37 << 20, 3 << 19, 0});
  const std::string text = statusNow(hash);
  EXPECT_NE(text.find("rank 1 (pid " + std::to_string(getpid()) +
                      "): 0 collectives; holds GPU 37.00 MiB, pinned host 1.50 MiB, /dev/shm 0.00 MiB"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("rank 0 (pid " + std::to_string(getpid()) + "): 0 collectives; holds"), std::string::npos)
      << text;  // nothing published: nothing said
}
