// Golden tests on machines without an NVSwitch: a 4-GPU PCIe server with two PCIe switches, a
// two-socket server with an NVLink-bridged GPU pair per socket, and a DGX-1 (V100 hybrid cube mesh,
// pairwise NVLinks). Expectations are derived in the comments from the machines' facts and the
// search rules summarised in graph_golden_nvswitch_test.cc.
#include <gtest/gtest.h>

#include "graph/transport_choice.h"
#include "graph_test_util.h"

namespace weft::graph {
namespace {

using testing::expectValidRing;
using testing::expectValidTree;
using testing::loadFixture;
using testing::rankNetPath;
using testing::rankPath;

std::vector<int> chainOf(const TreeChannel& t) {
  std::vector<int> out{t.root};
  while (t.links[out.back()].down[0] >= 0) {
    // Inside one host the chain continues on down[0].
    out.push_back(t.links[out.back()].down[0]);
  }
  return out;
}

// --- 4 x A100 PCIe behind two Gen4 switches (GPUs 0,1 and the 100 GbE NIC on switch A; GPUs 2,3
// on switch B), one Intel Ice Lake CPU. ---
TEST(GraphGoldenPcie, PathsAndTransports) {
  Topology t = loadFixture("pcie_4gpu_2switch.xml");
  // Same switch: GPU -> switch -> GPU.
  EXPECT_EQ(rankPath(t, 0, 1).type, PathType::Pix);
  EXPECT_EQ(rankPath(t, 0, 1).count(), 2);
  EXPECT_NEAR(rankPath(t, 0, 1).bw, 24.0, 1e-6);  // Gen4 x16
  // Other switch: up to the CPU's root complex and down again.
  EXPECT_EQ(rankPath(t, 0, 2).type, PathType::Phb);
  EXPECT_EQ(rankPath(t, 0, 2).count(), 4);
  EXPECT_EQ(rankPath(t, 3, 1).type, PathType::Phb);
  EXPECT_EQ(rankPath(t, 2, 3).type, PathType::Pix);
  // NIC on switch A: PIX from GPUs 0,1 (with GPU Direct RDMA); GPUs 2,3 go through the CPU.
  EXPECT_EQ(rankNetPath(t, 0, 0).type, PathType::Pix);
  EXPECT_NEAR(rankNetPath(t, 0, 0).bw, 12.5, 1e-6);
  EXPECT_EQ(rankNetPath(t, 2, 0).type, PathType::Phb);
  EXPECT_EQ(rankNetPath(t, 2, 0).count(), 5);
  // Intel host: P2P up to PXB, so only within a switch; across switches shared memory.
  const TransportKind P = TransportKind::P2p, S = TransportKind::Shm;
  const TransportKind expect[4][4] = {{P, P, S, S}, {P, P, S, S}, {S, S, P, P}, {S, S, P, P}};
  for (int a = 0; a < 4; a++) {
    for (int b = 0; b < 4; b++) EXPECT_EQ(chooseTransport(t, a, b, TopoOptions{}), expect[a][b]) << a << "->" << b;
  }
}

TEST(GraphGoldenPcie, SettingsChangeTransports) {
  TopoOptions phb;
  phb.p2pLevel = PathType::Phb;  // NCCL_P2P_LEVEL=PHB
  Topology t = loadFixture("pcie_4gpu_2switch.xml", 1, phb);
  EXPECT_EQ(chooseTransport(t, 0, 2, phb), TransportKind::P2p);

  TopoOptions off;
  off.p2pLevel = PathType::Loc;  // NCCL_P2P_DISABLE=1
  t = loadFixture("pcie_4gpu_2switch.xml", 1, off);
  EXPECT_EQ(chooseTransport(t, 0, 1, off), TransportKind::Shm);

  off.shmDisable = true;  // and NCCL_SHM_DISABLE=1: nothing left but the network
  t = loadFixture("pcie_4gpu_2switch.xml", 1, off);
  EXPECT_EQ(chooseTransport(t, 0, 1, off), TransportKind::Net);
  EXPECT_EQ(rankPath(t, 0, 1).type, PathType::Net);
}

TEST(GraphGoldenPcie, RingsTreesChannels) {
  Topology t = loadFixture("pcie_4gpu_2switch.xml");
  ChannelPlan p = planChannels(t, TopoOptions{});
  // No ring stays within one switch, so the ring needs PHB: 0 -> 1 (PIX) -> 2 (PHB) -> 3 (PIX) -> 0
  // (PHB). Crossing an Intel root complex costs 1.2x on PCIe, so GPU 1's 24 GB/s link carries one
  // 20 GB/s channel (24 = 1.2 x 20) and nothing more; 2 x 10 would only tie. One channel of 20.
  EXPECT_EQ(p.ringSearch.nChannels, 1);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwIntra, 20.0);
  EXPECT_EQ(p.ringSearch.typeIntra, PathType::Phb);
  EXPECT_EQ(p.ringSearch.rings[0].order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.treeSearch.nChannels, 1);
  EXPECT_DOUBLE_EQ(p.treeSearch.bwIntra, 20.0);
  EXPECT_EQ(chainOf(p.treeSearch.trees[0]), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.nChannels, 2);
}

TEST(GraphGoldenPcie, TwoNodesOneNic) {
  Topology t = loadFixture("pcie_4gpu_2switch.xml", 2);
  ChannelPlan p = planChannels(t, TopoOptions{});
  // One 100 GbE NIC (12.5 GB/s) per host: the first Ampere inter speed below it is 12; one channel.
  // GPU 0 receives (PIX); the ring needs PHB inside, and the exit from GPU 3 goes through the CPU.
  ASSERT_EQ(p.ringSearch.nChannels, 1);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwInter, 12.0);
  EXPECT_EQ(p.ringSearch.rings[0].order, testing::iota(0, 8));
  expectValidRing(t, p.ringSearch.rings[0]);
  EXPECT_EQ(p.nChannels, 2);
  for (const TreeChannel& tr : p.trees) expectValidTree(t, tr);
  EXPECT_EQ(p.trees[0].root, 0);
  EXPECT_EQ(p.trees[1].root, 4);
}

// --- Two sockets (Ice Lake, 10 GB/s UPI), A100 PCIe pairs bridged with NVLink (NV12) per socket,
// GPUs and one 200 Gb/s NIC per socket on root ports. ---
TEST(GraphGoldenTwoSocket, PathsAndTransports) {
  Topology t = loadFixture("two_socket_4gpu_nvlink_pairs.xml");
  EXPECT_EQ(rankPath(t, 0, 1).type, PathType::Nvl);
  EXPECT_EQ(rankPath(t, 0, 1).count(), 1);  // a bridge, no switch
  EXPECT_NEAR(rankPath(t, 0, 1).bw, 240.0, 1e-6);
  // Across sockets: GPU -> CPU0 -> CPU1 -> GPU, narrowed by UPI.
  EXPECT_EQ(rankPath(t, 0, 2).type, PathType::Sys);
  EXPECT_EQ(rankPath(t, 0, 2).count(), 3);
  EXPECT_NEAR(rankPath(t, 0, 2).bw, 10.0, 1e-6);
  // NICs on root ports: PHB to the own socket's (no GDR beyond P2C), SYS to the other.
  EXPECT_EQ(rankNetPath(t, 0, 0).type, PathType::Phb);
  EXPECT_EQ(rankNetPath(t, 0, 1).type, PathType::Sys);
  EXPECT_EQ(rankNetPath(t, 3, 1).type, PathType::Phb);
  const TransportKind P = TransportKind::P2p, S = TransportKind::Shm;
  const TransportKind expect[4][4] = {{P, P, S, S}, {P, P, S, S}, {S, S, P, P}, {S, S, P, P}};
  for (int a = 0; a < 4; a++) {
    for (int b = 0; b < 4; b++) EXPECT_EQ(chooseTransport(t, a, b, TopoOptions{}), expect[a][b]) << a << "->" << b;
  }
}

TEST(GraphGoldenTwoSocket, RingsTreesChannels) {
  Topology t = loadFixture("two_socket_4gpu_nvlink_pairs.xml");
  ChannelPlan p = planChannels(t, TopoOptions{});
  // Two NVLink islands joined by UPI: rings must have at least 2 channels (trees do better here and
  // share the count). A ring crosses UPI once each way: one 10 GB/s ring would saturate it, two
  // rings of 5 fit. Ring 0 1 2 3 (NVL, SYS, NVL, SYS).
  EXPECT_EQ(p.ringSearch.nChannels, 2);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwIntra, 5.0);
  EXPECT_EQ(p.ringSearch.typeIntra, PathType::Sys);
  for (const RingChannel& r : p.ringSearch.rings) EXPECT_EQ(r.order, (std::vector<int>{0, 1, 2, 3}));
  // A chain crosses UPI once, in one direction: two chains of 10 GB/s, one each way.
  EXPECT_EQ(p.treeSearch.nChannels, 2);
  EXPECT_DOUBLE_EQ(p.treeSearch.bwIntra, 10.0);
  EXPECT_EQ(chainOf(p.treeSearch.trees[0]), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(chainOf(p.treeSearch.trees[1]), (std::vector<int>{2, 3, 0, 1}));
  EXPECT_EQ(p.nChannels, 4);
}

// --- DGX-1 (8 x V100, hybrid cube mesh: 6 NVLinks of 20 GB/s per GPU, to 4 peers, two of them
// doubled), Broadwell CPUs (6 GB/s QPI), GPU pairs and one EDR NIC per PLX switch. ---
TEST(GraphGoldenDgx1, Paths) {
  Topology t = loadFixture("dgx1_v100.xml");
  EXPECT_EQ(rankPath(t, 0, 1).type, PathType::Nvl);
  EXPECT_NEAR(rankPath(t, 0, 1).bw, 20.0, 1e-6);  // NV1
  EXPECT_NEAR(rankPath(t, 0, 3).bw, 40.0, 1e-6);  // NV2
  // No direct link: through one GPU over NVLink (NVB), as wide as its narrower hop.
  EXPECT_EQ(rankPath(t, 0, 5).type, PathType::Nvb);
  EXPECT_EQ(rankPath(t, 0, 5).count(), 2);
  EXPECT_NEAR(rankPath(t, 0, 5).bw, 20.0, 1e-6);
  EXPECT_NEAR(rankPath(t, 0, 7).bw, 40.0, 1e-6);  // 0 =NV2= 4 =NV2= 7
  // NICs: own switch PIX; the switch of an NVLink neighbour through that neighbour (PXN); a switch
  // reachable only over NVB goes across QPI (SYS, 6 GB/s).
  EXPECT_EQ(rankNetPath(t, 0, 0).type, PathType::Pix);
  EXPECT_EQ(rankNetPath(t, 0, 1).type, PathType::Pxn);  // GPUs 2,3 hold NIC 1; 0-2 is NV1
  EXPECT_EQ(rankNetPath(t, 0, 2).type, PathType::Pxn);  // GPU 4 holds NIC 2; 0-4 is NV2
  EXPECT_EQ(rankNetPath(t, 0, 3).type, PathType::Sys);
  EXPECT_NEAR(rankNetPath(t, 0, 3).bw, 6.0, 1e-6);
  // NVL and NVB are within PXB: P2P everywhere.
  for (int a = 0; a < 8; a++) {
    for (int b = 0; b < 8; b++) {
      if (a != b) EXPECT_EQ(chooseTransport(t, a, b, TopoOptions{}), TransportKind::P2p);
    }
  }
}

TEST(GraphGoldenDgx1, RingsTreesChannels) {
  Topology t = loadFixture("dgx1_v100.xml");
  ChannelPlan p = planChannels(t, TopoOptions{});
  // At 40 GB/s only doubled links qualify; they form the cycle 0-3-2-1-5-6-7-4, usable once per
  // direction: 2 channels (80). At 20 the doubled links carry two channels per direction (that cycle
  // twice each way) and the single links form a second cycle 0-1-3-7-5-4-6-2 (once each way):
  // 6 channels = 120 GB/s, every GPU's 6 links full. Channels prefer the link with most bandwidth
  // left, then the next GPU index, which gives these orders.
  ASSERT_EQ(p.ringSearch.nChannels, 6);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwIntra, 20.0);
  EXPECT_EQ(p.ringSearch.typeIntra, PathType::Nvl);
  const std::vector<std::vector<int>> rings = {{0, 3, 2, 1, 5, 6, 7, 4}, {0, 3, 2, 1, 5, 6, 7, 4},
                                               {0, 4, 7, 6, 5, 1, 2, 3}, {0, 4, 7, 6, 5, 1, 2, 3},
                                               {0, 1, 3, 7, 5, 4, 6, 2}, {0, 2, 6, 4, 5, 7, 3, 1}};
  for (int c = 0; c < 6; c++) EXPECT_EQ(p.ringSearch.rings[c].order, rings[c]) << c;
  // Trees, exactly 6: the same cycles opened into chains (a chain needs no closing hop) fit at 20.
  ASSERT_EQ(p.treeSearch.nChannels, 6);
  EXPECT_DOUBLE_EQ(p.treeSearch.bwIntra, 20.0);
  for (int c = 0; c < 6; c++) EXPECT_EQ(chainOf(p.treeSearch.trees[c]), rings[c]) << c;
  // 20 GB/s channels are not doubled (< 25); the plan doubles the 6 searched channels.
  EXPECT_EQ(p.nChannels, 12);
}

}  // namespace
}  // namespace weft::graph
