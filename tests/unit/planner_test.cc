#include "enqueue/planner.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "device/kernel_api.h"
#include "device/special_kernels.h"
#include "transport/connection_plan.h"
#include "planner_test_util.h"

using namespace weft;
using namespace weft::enqueue;

namespace {

PlanShape ringShape(int rank, int nRanks, int nChannels) { return test::uniformShape(rank, nRanks, nChannels, nChannels); }

Task allReduce(size_t count, dev::DataType type) { return test::collTask(TaskKind::kAllReduce, count, type); }

Task p2p(TaskKind kind, int peer, size_t bytes) { return test::p2pTask(kind, peer, bytes); }

}  // namespace

TEST(SplitRange, CoversTheRangeExactlyWithAlignedBoundaries) {
  for (uint64_t count : {0ull, 1ull, 7ull, 128ull, 1000ull, 123457ull}) {
    for (int parts : {1, 2, 3, 8, 24}) {
      uint64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        uint64_t off, len;
        splitRange(count, parts, 128, i, &off, &len);
        EXPECT_EQ(off, next) << count << "/" << parts << " part " << i;
        if (off + len < count) EXPECT_EQ((off + len) % 128, 0u) << "inner boundaries are aligned";
        next = off + len;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Planner, SmallCollectiveUsesOneChannelLargeUsesAll) {
  PlanShape s = ringShape(0, 2, 16);
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({allReduce(256, dev::kFloat32)}, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].channels.size(), 1u);
  ASSERT_EQ(planTasks({allReduce(64 << 20, dev::kFloat32)}, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].channels.size(), 16u);
  uint64_t total = 0;
  for (const auto& works : launches[0].works) {
    ASSERT_EQ(works.size(), 1u);
    EXPECT_EQ(works[0].func, dev::kFuncAllReduce);
    EXPECT_EQ(works[0].count, 64u << 20);
    total += works[0].chanCount;
  }
  EXPECT_EQ(total, 64u << 20);
}

TEST(Planner, ZeroCountProducesNoWork) {
  PlanShape s = ringShape(1, 2, 4);
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({allReduce(0, dev::kInt32), p2p(TaskKind::kSend, 0, 0), p2p(TaskKind::kRecv, 0, 0)}, s, &launches),
            ncclSuccess);
  EXPECT_TRUE(launches.empty());
}

TEST(Planner, OneRankCollectivesBecomeCopiesExceptUserScaling) {
  Task inPlace = allReduce(64, dev::kFloat32);
  inPlace.recvBuff = const_cast<void*>(inPlace.sendBuff);
  Task scaled = allReduce(16, dev::kFloat32);
  scaled.redOp = dev::kRedPreMulSum;
  Task gather = test::collTask(TaskKind::kAllGather, 10, dev::kFloat64);
  Task intAvg = test::collTask(TaskKind::kReduceScatter, 3, dev::kInt32);
  intAvg.redOp = dev::kRedSumPostDiv;  // divides by 1
  const Task send = p2p(TaskKind::kSend, 0, 8), recv = p2p(TaskKind::kRecv, 0, 8);
  const std::vector<Task> all = {allReduce(0, dev::kInt8), inPlace, scaled, send, gather, recv, intAvg};

  std::vector<Task> tasks = all;
  std::vector<LocalCopy> copies;
  takeLocalCopies(&tasks, 1, &copies);
  ASSERT_EQ(tasks.size(), 1u);  // only the PreMulSum needs the kernel
  EXPECT_EQ(tasks[0].redOp, dev::kRedPreMulSum);
  ASSERT_EQ(copies.size(), 3u);  // empty and in-place ones are nothing; the self pair comes last
  EXPECT_EQ(copies[0].dst, gather.recvBuff);
  EXPECT_EQ(copies[0].src, gather.sendBuff);
  EXPECT_EQ(copies[0].bytes, 80u);
  EXPECT_EQ(copies[1].bytes, 12u);
  EXPECT_EQ(copies[2].dst, recv.recvBuff);
  EXPECT_EQ(copies[2].src, send.sendBuff);
  EXPECT_EQ(copies[2].bytes, 8u);

  tasks = all;  // with peers every task needs the kernel
  copies.clear();
  takeLocalCopies(&tasks, 2, &copies);
  EXPECT_EQ(tasks.size(), all.size());
  EXPECT_TRUE(copies.empty());
}

TEST(Planner, OneRankSelfSendsAndReceivesPairInOrderOrStayWhenTheyDoNotMatch) {
  Task s1 = p2p(TaskKind::kSend, 0, 100), s2 = p2p(TaskKind::kSend, 0, 300);
  Task r1 = p2p(TaskKind::kRecv, 0, 100), r2 = p2p(TaskKind::kRecv, 0, 300);
  s2.sendBuff = reinterpret_cast<const void*>(uintptr_t(0x30000));
  r2.recvBuff = reinterpret_cast<void*>(uintptr_t(0x40000));
  // Receives before sends, and an empty pair between: the i-th receive gets the i-th send.
  std::vector<Task> tasks = {r1, p2p(TaskKind::kRecv, 0, 0), r2, s1, p2p(TaskKind::kSend, 0, 0), s2};
  std::vector<LocalCopy> copies;
  takeLocalCopies(&tasks, 1, &copies);
  EXPECT_TRUE(tasks.empty());
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].dst, r1.recvBuff);
  EXPECT_EQ(copies[0].src, s1.sendBuff);
  EXPECT_EQ(copies[0].bytes, 100u);
  EXPECT_EQ(copies[1].dst, r2.recvBuff);
  EXPECT_EQ(copies[1].src, s2.sendBuff);
  EXPECT_EQ(copies[1].bytes, 300u);

  // Sizes that differ, or a send without its receive: every point-to-point task stays, and the
  // planner refuses them with its message.
  PlanShape one = ringShape(0, 1, 1);
  for (const std::vector<Task>& bad : {std::vector<Task>{s1, r2}, std::vector<Task>{s1, r1, s2}}) {
    tasks = bad;
    copies.clear();
    takeLocalCopies(&tasks, 1, &copies);
    EXPECT_EQ(tasks.size(), bad.size());
    EXPECT_TRUE(copies.empty());
    std::vector<PlannedLaunch> launches;
    EXPECT_EQ(planTasks(tasks, one, &launches), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("pair up with equal sizes"), std::string::npos);
  }
}

TEST(Planner, RemembersTheTunersAnswerPerKindOpTypeAndCount) {
  PlanShape s = test::uniformShape(0, 2, 8, 8);
  ChoiceCache cache;
  s.choices = &cache;
  const Task big = allReduce(1 << 24, dev::kFloat32);
  CollChoice worked, remembered;
  ASSERT_EQ(chooseCollective(big, s, &worked), ncclSuccess);
  ASSERT_TRUE(cache.find(big, &remembered));
  EXPECT_EQ(remembered.algo, worked.algo);
  EXPECT_EQ(remembered.nChannels, worked.nChannels);

  // A stored answer is used as it is: the planner must not work it out again.
  CollChoice planted = worked;
  planted.nChannels = 3;
  cache.put(big, planted);
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({big}, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].channels.size(), 3u);

  // Anything else about the call is another entry.
  Task other = big;
  other.count += 1;
  EXPECT_FALSE(cache.find(other, &remembered));
  other = big;
  other.redOp = dev::kRedMax;
  EXPECT_FALSE(cache.find(other, &remembered));
  other = big;
  other.dataType = dev::kFloat16;
  EXPECT_FALSE(cache.find(other, &remembered));
  other = big;
  other.kind = TaskKind::kReduceScatter;
  EXPECT_FALSE(cache.find(other, &remembered));
}

TEST(Planner, ManyTasksAreCutIntoSeveralLaunchesKeepingOrder) {
  PlanShape s = ringShape(0, 2, 1);
  std::vector<Task> tasks;
  for (int i = 0; i < 70; ++i) tasks.push_back(allReduce(100 + i, dev::kInt32));
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks(tasks, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 3u);  // 32 + 32 + 6
  int next = 0;
  for (auto& l : launches) {
    ASSERT_EQ(l.channels.size(), 1u);
    for (auto& w : l.works[0]) EXPECT_EQ(w.count, 100u + next++);
  }
  EXPECT_EQ(next, 70);
}

// Simulates every rank's plan for a random-looking set of exchanges and checks that on each
// channel, the k-th send from a to b and the k-th receive at b from a describe the same bytes.
class PointToPointRanks : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(PointToPointRanks, PlansOfAllRanksMatch) {
  const int n = GetParam().first, nChannels = GetParam().second;
  std::vector<std::vector<Task>> tasks(n);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if ((a * 3 + b) % 4 == 1) continue;  // some pairs do not talk
      size_t bytes = 1000 + 37 * a + 11 * b;
      tasks[a].push_back(p2p(TaskKind::kSend, b, bytes));
      tasks[b].push_back(p2p(TaskKind::kRecv, a, bytes));
    }
  }
  // Every channel of a pair's set, then at most 2 of them (PlanShape::p2pMaxChannels); every
  // transfer on all of them, then fewer for small transfers (PlanShape::p2pChannelBytes); then
  // transfers of at most 1,300 bytes on LL over a mesh of the first two channels (p2pLLBytes).
  for (int test = 0; test < 6; ++test) {
    const int cap = test % 2 ? 2 : 0;
    const size_t channelBytes = test / 2 == 1 ? 256 : 0;
    const bool ll = test / 2 == 2;
    // (channel, from, to) -> ordered list of (offset, length, protocol) seen by the sender / receiver
    using Piece = std::tuple<uint64_t, uint64_t, int>;
    std::map<std::tuple<int, int, int>, std::vector<Piece>> sent, received;
    for (int r = 0; r < n; ++r) {
      std::vector<PlannedLaunch> launches;
      PlanShape shape = ringShape(r, n, nChannels);
      shape.p2pMaxChannels = cap;
      shape.p2pChannelBytes = channelBytes;
      if (ll) {
        shape.p2pLLBytes = 1300;
        shape.directChannels = {0, 1 % nChannels};
        shape.directChannels.resize(std::min(2, nChannels));
      }
      ASSERT_EQ(planTasks(tasks[r], shape, &launches), ncclSuccess);
      bool simpleSeen = false;
      for (auto& l : launches) {
        if (l.proto == dev::kProtoSimple) simpleSeen = true;
        else EXPECT_FALSE(simpleSeen) << "LL point-to-point launches come before the Simple ones on every rank";
        for (size_t b = 0; b < l.channels.size(); ++b) {
          for (auto& w : l.works[b]) {
            ASSERT_EQ(w.func, dev::kFuncSendRecv);
            ASSERT_EQ(w.proto, l.proto) << "an item runs in a launch of its protocol";
            if (w.proto == dev::kProtoLL) EXPECT_LT(l.channels[b], 2) << "LL only on the mesh channels";
            if (w.sendPeer >= 0) {
              sent[{l.channels[b], r, w.sendPeer}].push_back({w.chanOffset, w.chanCount, w.proto});
              if (w.sendPeer != r) EXPECT_EQ(w.proto == dev::kProtoLL, ll && w.count <= 1300);  // self: a copy
            }
            if (w.recvPeer >= 0) received[{l.channels[b], w.recvPeer, r}].push_back({w.recvOffset, w.recvCount, w.proto});
          }
        }
      }
    }
    EXPECT_FALSE(sent.empty());
    EXPECT_EQ(sent, received) << "cap " << cap << " channel bytes " << channelBytes << " ll " << ll;
    std::map<std::pair<int, int>, std::set<int>> pairChannels;  // (from, to) -> channels used
    for (const auto& e : sent) pairChannels[{std::get<1>(e.first), std::get<2>(e.first)}].insert(std::get<0>(e.first));
    for (const auto& e : pairChannels) {
      if (e.first.first == e.first.second) continue;  // self copies run on every channel
      EXPECT_LE((int)e.second.size(), cap > 0 ? cap : nChannels) << e.first.first << "->" << e.first.second;
    }
  }
}

// Two ranks exchange 8 bytes one way and 1 MiB the other: each end runs its small transfer on LL
// (first launch) and its large one on Simple (second launch), in separate items, so that the two
// ends of each transfer agree; with p2pLLBytes 0 both share one Simple item per channel.
TEST(Planner, SmallPointToPointRunsOnLLAndSplitsFromALargeOne) {
  for (const size_t llBytes : {size_t(16384), size_t(0)}) {
    for (int r = 0; r < 2; ++r) {
      PlanShape s = ringShape(r, 2, 4);
      s.directChannels = {0, 1, 2, 3};
      s.p2pLLBytes = llBytes;
      const size_t sendBytes = r == 0 ? 8 : 1 << 20, recvBytes = r == 0 ? 1 << 20 : 8;
      std::vector<Task> tasks = {p2p(TaskKind::kSend, 1 - r, sendBytes), p2p(TaskKind::kRecv, 1 - r, recvBytes)};
      std::vector<PlannedLaunch> launches;
      ASSERT_EQ(planTasks(tasks, s, &launches), ncclSuccess);
      if (llBytes == 0) {
        ASSERT_EQ(launches.size(), 1u);
        EXPECT_EQ(launches[0].proto, dev::kProtoSimple);
        uint64_t sent = 0, received = 0;
        int shared = 0;
        for (auto list : launches[0].works)
          for (auto& w : list) {
            sent += w.sendPeer >= 0 ? w.chanCount : 0;
            received += w.recvPeer >= 0 ? w.recvCount : 0;
            shared += w.sendPeer >= 0 && w.recvPeer >= 0;
          }
        EXPECT_EQ(sent, sendBytes);
        EXPECT_EQ(received, recvBytes);
        EXPECT_EQ(shared, 1) << "the 8 bytes fit one channel, whose item also receives";
        continue;
      }
      ASSERT_EQ(launches.size(), 2u) << "rank " << r;
      EXPECT_EQ(launches[0].proto, dev::kProtoLL);
      EXPECT_EQ(launches[1].proto, dev::kProtoSimple);
      uint64_t llBytesSeen = 0, simpleBytesSeen = 0;
      for (int k = 0; k < 2; ++k)
        for (auto list : launches[k].works)
          for (auto& w : list) {
            EXPECT_EQ(w.proto, launches[k].proto);
            EXPECT_TRUE((w.sendPeer < 0) != (w.recvPeer < 0)) << "one direction per item";
            const uint64_t moved = w.sendPeer >= 0 ? w.chanCount : w.recvCount;
            (k == 0 ? llBytesSeen : simpleBytesSeen) += moved;
            if (k == 0) EXPECT_EQ(w.chunkElems, 0u) << "LL: the kernel takes one step's payload";
            const bool smallSend = r == 0;  // rank 0 sends the 8 bytes, rank 1 receives them
            EXPECT_EQ(k == 0, w.sendPeer >= 0 ? smallSend : !smallSend);
          }
      EXPECT_EQ(llBytesSeen, 8u);
      EXPECT_EQ(simpleBytesSeen, 1u << 20);
    }
  }
}

// A communicator with network peers has no mesh: its small transfers run on LL over the pair's
// own channels (PlanShape::p2pLLOnPeerChannels; every connection there has LL slots). Five ranks,
// 8 channels of one ring, point-to-point-only connections on the first 3: a ring neighbour has 8
// channels, any other peer 3. Every rank's plan, simulated: both ends of each transfer agree on
// channels, pieces and protocol; LL exactly for the small transfers; every item on a channel that
// connects the pair; LL launches first. Without the flag (and no mesh) everything runs Simple.
TEST(Planner, PointToPointLLRunsOnThePairsChannelsWithoutAMesh) {
  const int n = 5, nChannels = 8;
  const std::vector<std::vector<int>> rings(nChannels, {0, 1, 2, 3, 4});
  std::vector<std::vector<Task>> tasks(n);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const size_t bytes = (a + 2 * b) % 3 != 1 ? 3000 + 16 * a : 70000 + 100 * b;  // LL up to 4096
      tasks[a].push_back(p2p(TaskKind::kSend, b, bytes));
      tasks[b].push_back(p2p(TaskKind::kRecv, a, bytes));
    }
  for (const bool onPeers : {true, false}) {
    using Piece = std::tuple<uint64_t, uint64_t, int>;  // offset, length, protocol
    std::map<std::tuple<int, int, int>, std::vector<Piece>> sent, received;  // (channel, from, to)
    int llItems = 0;
    for (int r = 0; r < n; ++r) {
      const transport::ConnectionPlan plan = transport::planConnections(r, rings, 0, {}, 3);
      PlanShape shape = test::uniformShape(r, n, nChannels, 0);
      for (int p = 0; p < n; ++p) {
        shape.sendChannels[p] = plan.sendChannels(p);
        shape.recvChannels[p] = plan.recvChannels(p);
      }
      ASSERT_TRUE(plan.meshChannels.empty());
      shape.p2pChannelBytes = 512;  // 3000 bytes: 6 channels where the pair has them
      shape.p2pLLBytes = 4096;
      shape.p2pLLOnPeerChannels = onPeers;
      std::vector<PlannedLaunch> launches;
      ASSERT_EQ(planTasks(tasks[r], shape, &launches), ncclSuccess);
      bool simpleSeen = false;
      for (auto& l : launches) {
        simpleSeen = simpleSeen || l.proto == dev::kProtoSimple;
        if (l.proto == dev::kProtoLL) EXPECT_FALSE(simpleSeen) << "LL launches come first";
        for (size_t b = 0; b < l.channels.size(); ++b)
          for (auto& w : l.works[b]) {
            ASSERT_EQ(w.proto, l.proto);
            const int c = l.channels[b];
            llItems += w.proto == dev::kProtoLL;
            if (w.sendPeer >= 0 && w.sendPeer != r) {
              EXPECT_TRUE(plan.sendOn[c][w.sendPeer]) << r << "->" << w.sendPeer << " on channel " << c;
              EXPECT_EQ(w.proto == dev::kProtoLL, onPeers && w.count <= 4096) << r << "->" << w.sendPeer;
              sent[{c, r, w.sendPeer}].push_back({w.chanOffset, w.chanCount, w.proto});
            }
            if (w.recvPeer >= 0 && w.recvPeer != r) {
              EXPECT_TRUE(plan.recvOn[c][w.recvPeer]) << w.recvPeer << "->" << r << " on channel " << c;
              received[{c, w.recvPeer, r}].push_back({w.recvOffset, w.recvCount, w.proto});
            }
          }
      }
    }
    EXPECT_EQ(sent, received) << "on peers " << onPeers;
    EXPECT_EQ(llItems > 0, onPeers);
    // A ring neighbour's small transfer may use channels beyond the point-to-point-only ones.
    std::set<int> neighbourLL;
    for (const auto& e : sent)
      if (std::get<2>(e.second.front()) == dev::kProtoLL && std::get<2>(e.first) == (std::get<1>(e.first) + 1) % n)
        neighbourLL.insert(std::get<0>(e.first));
    if (onPeers) EXPECT_TRUE(*neighbourLL.rbegin() >= 3);
  }
}

// An all-to-all among 4 ranks on 24 point-to-point channels: a small one gives each peer distance
// its own 8 channels, so that the three transfers run side by side; a large one spreads every
// transfer over all 24. Two ranks always use every channel.
TEST(Planner, SmallAllToAllGivesEachPeerItsOwnChannels) {
  auto channelsPerPeer = [](int nRanks, size_t bytes) {
    PlanShape s = test::uniformShape(0, nRanks, 32, 24);
    s.p2pChannelBytes = 128 << 10;
    std::vector<Task> tasks;
    for (int p = 1; p < nRanks; ++p) {
      tasks.push_back(p2p(TaskKind::kSend, p, bytes));
      tasks.push_back(p2p(TaskKind::kRecv, p, bytes));
    }
    std::vector<PlannedLaunch> launches;
    EXPECT_EQ(planTasks(tasks, s, &launches), ncclSuccess);
    std::map<int, std::set<int>> used;  // send peer -> channels
    for (auto& l : launches)
      for (size_t b = 0; b < l.channels.size(); ++b)
        for (auto& w : l.works[b])
          if (w.sendPeer >= 0) used[w.sendPeer].insert(l.channels[b]);
    return used;
  };
  auto small = channelsPerPeer(4, 512 << 10);
  ASSERT_EQ(small.size(), 3u);
  EXPECT_EQ(small[1], (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(small[2], (std::set<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(small[3], (std::set<int>{16, 17, 18, 19, 20, 21, 22, 23}));
  auto mid = channelsPerPeer(4, 2 << 20);  // 16 channels from 0, 8 and 16 (mod 24)
  EXPECT_EQ(mid[2].size(), 16u);
  EXPECT_TRUE(mid[2].count(23) && mid[2].count(8) && !mid[2].count(7));
  auto large = channelsPerPeer(4, 16 << 20);
  for (int p = 1; p < 4; ++p) EXPECT_EQ(large[p].size(), 24u) << p;
  EXPECT_EQ(channelsPerPeer(2, 4096)[1].size(), 24u);
}

// (ranks, channels): issue 6 asks for 3 to 64 ranks without the 4- and 8-GPU machines.
INSTANTIATE_TEST_SUITE_P(Sizes, PointToPointRanks,
                         ::testing::Values(std::make_pair(5, 3), std::make_pair(3, 1), std::make_pair(8, 4),
                                           std::make_pair(16, 2), std::make_pair(64, 4)),
                         [](const ::testing::TestParamInfo<std::pair<int, int>>& i) {
                           return std::to_string(i.param.first) + "ranks" + std::to_string(i.param.second) + "ch";
                         });

TEST(Planner, SelfSendAndReceiveShareOneItem) {
  PlanShape s = ringShape(2, 4, 2);
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks({p2p(TaskKind::kSend, 2, 4096), p2p(TaskKind::kRecv, 2, 4096)}, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  for (const auto& works : launches[0].works) {
    for (auto& w : works) {
      EXPECT_EQ(w.sendPeer, 2);
      EXPECT_EQ(w.recvPeer, 2);
      EXPECT_EQ(w.chanOffset, w.recvOffset);
      EXPECT_EQ(w.chanCount, w.recvCount);
    }
  }
}

TEST(Planner, CopyLanesAreHalfTheChannelsButAtLeastSixteenWithinTheBlockLimit) {
  EXPECT_EQ(defaultCopyLanes(1), kMinCopyLanes);  // one rank: a single channel
  EXPECT_EQ(defaultCopyLanes(32), 16);
  EXPECT_EQ(defaultCopyLanes(40), 20);
  EXPECT_EQ(defaultCopyLanes(56), 8);  // only 8 blocks left below kMaxChannels
  EXPECT_EQ(defaultCopyLanes(dev::kMaxChannels), 0);
}

TEST(Planner, SelfCopiesRunOnCopyLanesBesideThePeerTransfers) {
  PlanShape s = ringShape(0, 2, 4);
  s.copyLanes = defaultCopyLanes(s.nChannels);
  ASSERT_EQ(s.copyLanes, kMinCopyLanes);
  const size_t bytes = 8 << 20;
  std::vector<Task> tasks = {p2p(TaskKind::kSend, 0, bytes), p2p(TaskKind::kRecv, 0, bytes),
                             p2p(TaskKind::kSend, 1, bytes), p2p(TaskKind::kRecv, 1, bytes)};
  std::vector<PlannedLaunch> launches;
  ASSERT_EQ(planTasks(tasks, s, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  uint64_t selfBytes = 0, peerBytes = 0;
  for (size_t b = 0; b < launches[0].channels.size(); ++b) {
    const int channel = launches[0].channels[b];
    for (const dev::DevWork& w : launches[0].works[b]) {
      if (w.sendPeer == 0) {
        EXPECT_GE(channel, s.nChannels) << "a self copy belongs on a copy lane";
        EXPECT_EQ(w.recvPeer, 0);
        EXPECT_EQ(w.chanOffset, w.recvOffset);
        EXPECT_EQ(w.chanCount, w.recvCount);
        selfBytes += w.chanCount;
      } else {
        EXPECT_LT(channel, s.nChannels) << "peer transfers need a channel's connections";
        peerBytes += w.chanCount;
      }
    }
  }
  EXPECT_EQ(selfBytes, bytes);
  EXPECT_EQ(peerBytes, bytes);
}

TEST(Planner, UnpairedSelfSendIsRefused) {
  PlanShape s = ringShape(1, 2, 2);
  std::vector<PlannedLaunch> launches;
  EXPECT_EQ(planTasks({p2p(TaskKind::kSend, 1, 4096)}, s, &launches), ncclInvalidUsage);
  EXPECT_EQ(planTasks({p2p(TaskKind::kSend, 1, 4096), p2p(TaskKind::kRecv, 1, 2048)}, s, &launches),
            ncclInvalidUsage);
}

namespace {
// An item with these fields, the rest zero (what the special-kernel choice reads).
dev::DevWork kindItem(int func, int algo, int proto, int op, int type) {
  dev::DevWork w{};
  w.func = (uint8_t)func;
  w.algo = (uint8_t)algo;
  w.proto = (uint8_t)proto;
  w.redOp = (uint8_t)op;
  w.dataType = (uint8_t)type;
  return w;
}
}  // namespace

// The specialized kernel of a launch: only when every item is of the same specialized kind.
TEST(Planner, SpecialKernelOnlyForLaunchesOfOneKind) {
  auto item = kindItem;
  const dev::DevWork f32 = item(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kFloat32);
  const dev::DevWork bf16 = item(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kBfloat16);
  const dev::DevWork gather = item(dev::kFuncAllGather, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kInt64);
  const dev::DevWork maxF32 = item(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoLL, dev::kRedMax, dev::kFloat32);
  const dev::DevWork sumI32 = item(dev::kFuncAllReduce, dev::kAlgoDirect, dev::kProtoLL, dev::kRedSum, dev::kInt32);
  const dev::DevWork ring = item(dev::kFuncAllReduce, dev::kAlgoRing, dev::kProtoLL, dev::kRedSum, dev::kFloat32);
  // The kind the host picks for a launch of protocol `proto` with these items per channel (the
  // inlined Ring-sum twins off: SpecialRingSumsInlineOnlyForSmallItems).
  auto kindIn = [](int proto, std::vector<std::vector<dev::DevWork>> works) {
    PlannedLaunch l;
    l.proto = proto;
    l.works = std::move(works);
    return specialKernelOfLaunch(l, 0);
  };
  auto kindOf = [&](std::vector<std::vector<dev::DevWork>> works) { return kindIn(dev::kProtoLL, std::move(works)); };
  EXPECT_EQ(kindOf({{f32}, {f32, f32}}), dev::kSpecialDirectSumF32);
  EXPECT_EQ(kindOf({{bf16}}), dev::kSpecialDirectSumBf16);
  EXPECT_EQ(kindOf({{gather}, {gather}}), dev::kSpecialDirectGather);
  EXPECT_EQ(kindOf({{f32}, {bf16}}), dev::kSpecialNone) << "two kinds in one launch";
  EXPECT_EQ(kindOf({{f32, gather}}), dev::kSpecialNone);
  EXPECT_EQ(kindOf({{f32}, {ring}}), dev::kSpecialNone) << "a Ring item needs the general kernel";
  // LL reductions with a functor the general LL kernel runs out of line: that functor's kernel, for
  // Direct, Ring and Tree items alike (signed integer sums share the unsigned kernel).
  const int maxF32Kind = dev::llFunctorKind(dev::kRedMax, dev::kFloat32);
  const int sumU32Kind = dev::llFunctorKind(dev::kRedSum, dev::kUint32);
  ASSERT_NE(maxF32Kind, dev::kSpecialNone);
  ASSERT_NE(sumU32Kind, dev::kSpecialNone);
  ASSERT_NE(maxF32Kind, sumU32Kind);
  EXPECT_EQ(kindOf({{maxF32}}), maxF32Kind);
  EXPECT_EQ(kindOf({{sumI32}}), sumU32Kind);
  dev::DevWork sumU32Ring = sumI32;
  sumU32Ring.dataType = dev::kUint32;
  sumU32Ring.algo = dev::kAlgoRing;
  dev::DevWork sumI32Tree = sumI32;
  sumI32Tree.algo = dev::kAlgoTree;
  dev::DevWork maxF8 = maxF32;
  maxF8.dataType = dev::kFloat8e4m3;
  dev::DevWork maxF32Rs = maxF32;
  maxF32Rs.func = dev::kFuncReduceScatter;
  maxF32Rs.algo = dev::kAlgoRing;
  EXPECT_EQ(kindOf({{sumI32}, {sumU32Ring}}), sumU32Kind) << "int32 and uint32 sums: the same bits, one kernel";
  EXPECT_EQ(kindOf({{sumI32Tree}}), dev::kSpecialNone) << "Tree stays with the general kernel";
  EXPECT_EQ(kindOf({{maxF8}}), dev::kSpecialNone) << "fp8 stays with the general kernel";
  EXPECT_EQ(kindOf({{maxF32Rs}, {maxF32}}), maxF32Kind);
  EXPECT_EQ(kindOf({{maxF32}, {sumI32}}), dev::kSpecialNone) << "two functors in one launch";
  EXPECT_EQ(kindOf({{maxF32, gather}}), dev::kSpecialNone) << "a functor kind and a copy";
  EXPECT_EQ(kindOf({{ring}}), dev::kSpecialNone) << "float sum on Ring/LL is inlined in the general kernel";
  EXPECT_EQ(kindOf({}), dev::kSpecialNone) << "no items";
  dev::DevWork simpleGather = gather;
  simpleGather.proto = dev::kProtoSimple;
  EXPECT_EQ(kindOf({{simpleGather}}), dev::kSpecialNone) << "a symmetric (Direct/Simple) item in an LL launch";

  // Simple: Ring sums of float/half/bf16 (AllReduce, Reduce, ReduceScatter mixed), Ring copies
  // (Broadcast, AllGather mixed), SendRecv; the launch's protocol must match the kind's.
  auto simpleKindOf = [&](std::vector<std::vector<dev::DevWork>> works) {
    return kindIn(dev::kProtoSimple, std::move(works));
  };
  const dev::DevWork ringSum = item(dev::kFuncAllReduce, dev::kAlgoRing, dev::kProtoSimple, dev::kRedSum, dev::kFloat32);
  const dev::DevWork reduceSum = item(dev::kFuncReduce, dev::kAlgoRing, dev::kProtoSimple, dev::kRedSum, dev::kFloat32);
  const dev::DevWork rsHalf = item(dev::kFuncReduceScatter, dev::kAlgoRing, dev::kProtoSimple, dev::kRedSum, dev::kFloat16);
  const dev::DevWork arBf16 = item(dev::kFuncAllReduce, dev::kAlgoRing, dev::kProtoSimple, dev::kRedSum, dev::kBfloat16);
  const dev::DevWork bcast = item(dev::kFuncBroadcast, dev::kAlgoRing, dev::kProtoSimple, dev::kRedSum, dev::kInt8);
  const dev::DevWork agather = item(dev::kFuncAllGather, dev::kAlgoRing, dev::kProtoSimple, dev::kRedMax, dev::kFloat64);
  const dev::DevWork sendRecv = item(dev::kFuncSendRecv, dev::kAlgoRing, dev::kProtoSimple, dev::kRedSum, dev::kUint8);
  const dev::DevWork treeSum = item(dev::kFuncAllReduce, dev::kAlgoTree, dev::kProtoSimple, dev::kRedSum, dev::kFloat32);
  const dev::DevWork prodF32 = item(dev::kFuncAllReduce, dev::kAlgoRing, dev::kProtoSimple, dev::kRedProd, dev::kFloat32);
  EXPECT_EQ(simpleKindOf({{ringSum, reduceSum}, {ringSum}}), dev::kSpecialRingSumF32);
  EXPECT_EQ(simpleKindOf({{rsHalf}}), dev::kSpecialRingSumF16);
  EXPECT_EQ(simpleKindOf({{arBf16}}), dev::kSpecialRingSumBf16);
  EXPECT_EQ(simpleKindOf({{bcast}, {agather}}), dev::kSpecialRingCopy);
  EXPECT_EQ(simpleKindOf({{sendRecv, sendRecv}}), dev::kSpecialSendRecv);
  EXPECT_EQ(simpleKindOf({{ringSum}, {rsHalf}}), dev::kSpecialNone) << "two types in one launch";
  EXPECT_EQ(simpleKindOf({{ringSum, bcast}}), dev::kSpecialNone) << "sum and copy in one launch";
  EXPECT_EQ(simpleKindOf({{sendRecv}, {bcast}}), dev::kSpecialNone);
  EXPECT_EQ(simpleKindOf({{treeSum}}), dev::kSpecialNone) << "Tree is not specialized";
  EXPECT_EQ(simpleKindOf({{prodF32}}), dev::kSpecialNone) << "prod is not specialized";
  EXPECT_EQ(kindOf({{ringSum}}), dev::kSpecialNone) << "a Simple item in a launch that says LL";
  // The symmetric collectives (Direct on Simple): sums of float/half/bf16 (AllReduce and
  // ReduceScatter mixed) and AllGather of any type; never mixed with Ring items.
  auto symItem = [&](int func, int op, int type) { return item(func, dev::kAlgoDirect, dev::kProtoSimple, op, type); };
  const dev::DevWork symSum = symItem(dev::kFuncAllReduce, dev::kRedSum, dev::kFloat32);
  const dev::DevWork symRsSum = symItem(dev::kFuncReduceScatter, dev::kRedSum, dev::kFloat32);
  const dev::DevWork symHalf = symItem(dev::kFuncReduceScatter, dev::kRedSum, dev::kFloat16);
  const dev::DevWork symBf16 = symItem(dev::kFuncAllReduce, dev::kRedSum, dev::kBfloat16);
  const dev::DevWork symGather = symItem(dev::kFuncAllGather, dev::kRedMax, dev::kInt64);
  const dev::DevWork symMax = symItem(dev::kFuncAllReduce, dev::kRedMax, dev::kFloat32);
  EXPECT_EQ(simpleKindOf({{symSum, symRsSum}, {symSum}}), dev::kSpecialSymSumF32);
  EXPECT_EQ(simpleKindOf({{symHalf}}), dev::kSpecialSymSumF16);
  EXPECT_EQ(simpleKindOf({{symBf16}}), dev::kSpecialSymSumBf16);
  EXPECT_EQ(simpleKindOf({{symGather}}), dev::kSpecialSymGather);
  EXPECT_EQ(simpleKindOf({{symMax}}), dev::kSpecialNone) << "max stays with the general kernel";
  EXPECT_EQ(simpleKindOf({{symSum}, {ringSum}}), dev::kSpecialNone) << "symmetric and Ring items in one launch";
  EXPECT_EQ(simpleKindOf({{symSum, symGather}}), dev::kSpecialNone) << "a sum and a copy in one launch";
  dev::DevWork symReduce = symSum;
  symReduce.func = dev::kFuncReduce;
  EXPECT_EQ(simpleKindOf({{symReduce}}), dev::kSpecialNone) << "no symmetric Reduce";
  for (int k = dev::kSpecialSymSumF32; k <= dev::kSpecialSymGather; ++k) {
    EXPECT_EQ(dev::specialInlineTwin(k), k) << "symmetric kinds have no twin";
    EXPECT_EQ(dev::specialKernelFunction(k) != nullptr, dev::kernelFunction(dev::kProtoSimple) != nullptr) << k;
  }
  for (int k = dev::kSpecialNone + 1; k < dev::kNumSpecialKernels; ++k) {
    const int want = k >= dev::kSpecialLL128SumF32 ? dev::kProtoLL128
                     : k >= dev::kSpecialRingSumF32 ? dev::kProtoSimple
                                                    : dev::kProtoLL;
    EXPECT_EQ(dev::specialKernelProto(k), want) << k;
  }
  EXPECT_EQ(dev::specialKernelProto(maxF32Kind), dev::kProtoLL);

  // LL128: Ring sums of float/half/bf16 and Ring copies; Tree, other functors and other
  // protocols' launches stay with the general kernels.
  auto ll128KindOf = [&](std::vector<std::vector<dev::DevWork>> works) {
    return kindIn(dev::kProtoLL128, std::move(works));
  };
  auto asLL128 = [](dev::DevWork w) {
    w.proto = dev::kProtoLL128;
    return w;
  };
  EXPECT_EQ(ll128KindOf({{asLL128(ringSum), asLL128(reduceSum)}, {asLL128(ringSum)}}), dev::kSpecialLL128SumF32);
  EXPECT_EQ(ll128KindOf({{asLL128(rsHalf)}}), dev::kSpecialLL128SumF16);
  EXPECT_EQ(ll128KindOf({{asLL128(arBf16)}}), dev::kSpecialLL128SumBf16);
  EXPECT_EQ(ll128KindOf({{asLL128(bcast)}, {asLL128(agather)}}), dev::kSpecialLL128Copy);
  EXPECT_EQ(ll128KindOf({{asLL128(treeSum)}}), dev::kSpecialNone) << "Tree/LL128 is not specialized";
  EXPECT_EQ(ll128KindOf({{asLL128(prodF32)}}), dev::kSpecialNone) << "prod is not specialized";
  EXPECT_EQ(ll128KindOf({{asLL128(ringSum), asLL128(bcast)}}), dev::kSpecialNone) << "sum and copy in one launch";
  EXPECT_EQ(ll128KindOf({{ringSum}}), dev::kSpecialNone) << "a Simple item in a launch that says LL128";
  EXPECT_EQ(simpleKindOf({{asLL128(ringSum)}}), dev::kSpecialNone) << "an LL128 item in a launch that says Simple";
  EXPECT_EQ(kindOf({{asLL128(agather)}}), dev::kSpecialNone) << "an LL128 item in a launch that says LL";
  for (int k = dev::kSpecialLL128SumF32; k <= dev::kSpecialLL128Copy; ++k)
    EXPECT_EQ(dev::specialKernelFunction(k) != nullptr, dev::kernelFunction(dev::kProtoLL128) != nullptr)
        << "kind " << k << ": a kernel wherever LL128's general kernel is built";
}

// A Ring-sum launch runs the inlined twin when each of its items moves at most the threshold on its
// channel; the twin runs the same items (the kernel's check) and exists wherever the sums do.
TEST(Planner, SpecialRingSumsInlineOnlyForSmallItems) {
  auto sized = [](int func, int proto, int type, uint64_t count) {
    dev::DevWork w = kindItem(func, dev::kAlgoRing, proto, dev::kRedSum, type);
    w.chanCount = count;
    return w;
  };
  auto kindOf = [](std::vector<std::vector<dev::DevWork>> works, uint64_t limit, int proto = dev::kProtoSimple) {
    PlannedLaunch l;
    l.proto = proto;
    l.works = std::move(works);
    return specialKernelOfLaunch(l, limit);
  };
  const uint64_t kLimit = 1 << 20;
  const dev::DevWork small = sized(dev::kFuncAllReduce, dev::kProtoSimple, dev::kFloat32, kLimit / 4);
  const dev::DevWork big = sized(dev::kFuncReduce, dev::kProtoSimple, dev::kFloat32, kLimit / 4 + 1);
  const dev::DevWork halfRs = sized(dev::kFuncReduceScatter, dev::kProtoSimple, dev::kFloat16, kLimit / 2);
  const dev::DevWork bf16 = sized(dev::kFuncAllReduce, dev::kProtoSimple, dev::kBfloat16, 1);
  EXPECT_EQ(kindOf({{small}, {small}}, kLimit), dev::kSpecialRingSumInlineF32);
  EXPECT_EQ(kindOf({{small}, {small, big}}, kLimit), dev::kSpecialRingSumF32) << "one item above the limit";
  EXPECT_EQ(kindOf({{small}}, 0), dev::kSpecialRingSumF32) << "limit 0: never inlined";
  EXPECT_EQ(kindOf({{halfRs}}, kLimit), dev::kSpecialRingSumInlineF16) << "bytes, not elements, count";
  EXPECT_EQ(kindOf({{bf16}}, kLimit), dev::kSpecialRingSumInlineBf16);
  const dev::DevWork copy = sized(dev::kFuncAllGather, dev::kProtoSimple, dev::kFloat32, 1);
  EXPECT_EQ(kindOf({{copy}}, kLimit), dev::kSpecialRingCopy) << "copies have no twin";
  EXPECT_EQ(kindOf({{sized(dev::kFuncAllReduce, dev::kProtoLL128, dev::kFloat32, 1)}}, kLimit, dev::kProtoLL128),
            dev::kSpecialLL128SumF32)
      << "LL128 sums have no twin";
  for (int kind : {dev::kSpecialRingSumF32, dev::kSpecialRingSumF16, dev::kSpecialRingSumBf16}) {
    const int twin = dev::specialInlineTwin(kind);
    EXPECT_NE(twin, kind);
    EXPECT_EQ(dev::specialItemKind(twin), kind);
    EXPECT_EQ(dev::specialItemKind(kind), kind);
    EXPECT_EQ(dev::specialKernelProto(twin), dev::kProtoSimple);
    EXPECT_TRUE(dev::specialKernelNarrowCopies(twin));
    EXPECT_FALSE(dev::specialKernelOutlinesCopies(twin));
    EXPECT_EQ(dev::specialKernelFunction(twin) != nullptr, dev::specialKernelFunction(kind) != nullptr);
    EXPECT_NE(dev::specialKernelFunction(twin), dev::specialKernelFunction(kind));
  }
}

// Every (operation, type) pair the general LL kernel runs out of line has a functor kind, built into
// the library (both parts of kernel_ll_functor*.cu together), and no other kind of the range is.
TEST(Planner, EveryOutOfLineLLFunctorHasAKernel) {
  int built = 0;
  for (int op = 0; op < dev::kNumRedOps; ++op) {
    for (int type = 0; type < dev::kNumDataTypes; ++type) {
      const int kind = dev::llFunctorKind(op, type);
      const bool exists = !(op == dev::kRedSumPostDiv && !dev::isIntegerType(type));
      const bool inlined = op == dev::kRedSum && (type == dev::kFloat32 || type == dev::kFloat16 || type == dev::kBfloat16);
      const bool fp8 = type == dev::kFloat8e4m3 || type == dev::kFloat8e5m2;  // left to the general kernel
      if (!exists || inlined || fp8) {
        EXPECT_EQ(kind, dev::kSpecialNone) << "op " << op << " type " << type;
        continue;
      }
      ASSERT_NE(kind, dev::kSpecialNone) << "op " << op << " type " << type;
      EXPECT_TRUE(dev::llFunctorKindBuilt(kind));
      EXPECT_EQ(dev::llFunctorKindOp(kind), op);
      const int folded = dev::redOpFoldsSigned(op) ? dev::unsignedTwin(type) : type;
      EXPECT_EQ(dev::llFunctorKindType(kind), folded) << "op " << op << " type " << type;
    }
  }
  for (int kind = dev::kSpecialLLFunctorFirst; kind < dev::kNumSpecialKinds; ++kind) {
    if (!dev::llFunctorKindBuilt(kind)) {
      EXPECT_EQ(dev::specialKernelFunction(kind), nullptr) << kind;
      continue;
    }
    ++built;
    EXPECT_NE(dev::specialKernelFunction(kind), nullptr) << "kind " << kind << " (op " << dev::llFunctorKindOp(kind)
                                                         << ", type " << dev::llFunctorKindType(kind) << ")";
  }
  // sum 4 (folded, without the three inlined), product 7, max 10, min 10, PreMulSum 7, SumPostDiv 6
  EXPECT_EQ(built, 44);
  // The kernels' own check of an item (a few comparisons) agrees with the host's choice everywhere.
  int fits = 0;
  for (int func : {dev::kFuncAllReduce, dev::kFuncReduce, dev::kFuncReduceScatter, dev::kFuncAllGather, dev::kFuncSendRecv})
    for (int algo : {dev::kAlgoRing, dev::kAlgoTree, dev::kAlgoDirect})
      for (int proto : {dev::kProtoLL, dev::kProtoSimple})
        for (int op = 0; op < dev::kNumRedOps; ++op)
          for (int type = 0; type < dev::kNumDataTypes; ++type) {
            const dev::DevWork w = kindItem(func, algo, proto, op, type);
            const int chosen = dev::specialKernelOf(w);
            for (int kind = dev::kSpecialLLFunctorFirst; kind < dev::kNumSpecialKinds; ++kind) {
              if (!dev::llFunctorKindBuilt(kind)) continue;
              ASSERT_EQ(dev::fitsLLFunctorKind(w, kind), chosen == kind)
                  << "func " << func << " algo " << algo << " proto " << proto << " op " << op << " type " << type;
              fits += chosen == kind;
            }
          }
  EXPECT_GT(fits, 0);
}

// planTasks keeps its per-channel lists between calls (per thread): nothing of one plan may show
// in the next, whatever the shapes, task mixes and protocol segments in between.
TEST(Planner, ReusedListsLeaveNothingBehindBetweenCalls) {
  auto plan = [](const std::vector<Task>& tasks, const PlanShape& s) {
    std::vector<PlannedLaunch> launches;
    EXPECT_EQ(planTasks(tasks, s, &launches), ncclSuccess);
    return launches;
  };
  auto same = [](const std::vector<PlannedLaunch>& a, const std::vector<PlannedLaunch>& b) {
    if (a.size() != b.size()) return false;
    for (size_t l = 0; l < a.size(); ++l) {
      if (a[l].proto != b[l].proto || a[l].channels != b[l].channels || a[l].works.size() != b[l].works.size())
        return false;
      for (size_t blk = 0; blk < a[l].works.size(); ++blk) {
        if (a[l].works[blk].size() != b[l].works[blk].size()) return false;
        for (size_t i = 0; i < a[l].works[blk].size(); ++i)
          if (std::memcmp(&a[l].works[blk][i], &b[l].works[blk][i], sizeof(dev::DevWork)) != 0) return false;
      }
    }
    return true;
  };
  const PlanShape wide = ringShape(0, 2, 32), narrow = ringShape(1, 4, 3);
  // Two protocol segments (small LL, big Simple, small LL again) and point-to-point at the end.
  const std::vector<Task> mix = {allReduce(64, dev::kFloat32), allReduce(64 << 20, dev::kFloat32),
                                 allReduce(96, dev::kInt32), p2p(TaskKind::kSend, 1, 1 << 20),
                                 p2p(TaskKind::kRecv, 1, 1 << 20)};
  const auto first = plan(mix, wide);
  ASSERT_GE(first.size(), 2u);
  const auto narrowFirst = plan({allReduce(64 << 20, dev::kFloat32), p2p(TaskKind::kSend, 3, 4096),
                                 p2p(TaskKind::kRecv, 2, 4096)}, narrow);
  std::vector<Task> many;  // more items per channel than one launch carries
  for (int i = 0; i < 3 * dev::kMaxWorksPerChannel; ++i) many.push_back(allReduce(1 << 20, dev::kFloat32));
  const auto manyFirst = plan(many, wide);
  EXPECT_GT(manyFirst.size(), 1u);
  EXPECT_TRUE(same(plan(mix, wide), first));
  EXPECT_TRUE(same(plan({allReduce(64 << 20, dev::kFloat32), p2p(TaskKind::kSend, 3, 4096),
                         p2p(TaskKind::kRecv, 2, 4096)}, narrow), narrowFirst));
  EXPECT_TRUE(same(plan(many, wide), manyFirst));
  EXPECT_TRUE(same(plan(mix, wide), first));
}
