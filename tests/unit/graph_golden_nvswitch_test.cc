// Golden tests on NVSwitch machines: our 2xH200 VM, DGX H100, DGX A100, alone and as clusters.
// Every expectation is derived in the comments from the machine's facts and the search rules
// (search.h): a channel reserves its bandwidth on every link it crosses; the highest per-channel
// bandwidth from the architecture's list that gives the most in total wins, lower ones only while
// they are more than 0.49 of it; on Hopper+ channels of >= 50 GB/s (or few channels) are doubled at
// half bandwidth; trees are searched for exactly the ring count; the plan doubles that.
#include <gtest/gtest.h>

#include "graph/transport_choice.h"
#include "graph_test_util.h"

namespace weft::graph {
namespace {

using testing::expectValidRing;
using testing::expectValidTree;
using testing::iota;
using testing::loadFixture;
using testing::rankNetPath;
using testing::rankPath;

void expectAllTransports(const Topology& t, TransportKind kind) {
  for (int a = 0; a < t.nRanks(); a++) {
    for (int b = 0; b < t.nRanks(); b++) {
      if (a != b) EXPECT_EQ(chooseTransport(t, a, b, TopoOptions{}), kind) << a << "->" << b;
    }
  }
}

std::vector<int> chainOf(const TreeChannel& t) {
  std::vector<int> out{t.root};
  while (t.links[out.back()].down[0] >= 0) out.push_back(t.links[out.back()].down[0]);
  return out;
}

// --- 2xH200 VM: 18 NVLinks per GPU into the (hidden) NVSwitch fabric, one 10 Gb/s virtio NIC. ---
// NCCL 2.28.9 on this machine logs: GPU/0-60 -> GPU/0-70 (2/370.8/NVL), -> NET/0-0 (3/1.2/PHB);
// "Pattern 4 ... nChannels 12, bw 30", "Pattern 1 ... nChannels 12, bw 60", "24 coll channels".
TEST(GraphGoldenH200, PathsAndTransports) {
  Topology t = loadFixture("h200x2_vm.xml");
  // GPU -> NVSwitch -> GPU, 18 links x 20.6 GB/s (SM90 NVLink).
  EXPECT_EQ(rankPath(t, 0, 1).type, PathType::Nvl);
  EXPECT_EQ(rankPath(t, 0, 1).count(), 2);
  EXPECT_NEAR(rankPath(t, 0, 1).bw, 370.8, 1e-6);
  // The virtio NIC hangs off the CPU: GPU -> CPU -> NIC -> NET, without GPU Direct RDMA.
  EXPECT_EQ(rankNetPath(t, 0, 0).type, PathType::Phb);
  EXPECT_EQ(rankNetPath(t, 0, 0).count(), 3);
  EXPECT_NEAR(rankNetPath(t, 0, 0).bw, 1.25, 1e-6);
  // NVL is within the P2P level (PXB by default on an Intel host).
  expectAllTransports(t, TransportKind::P2p);
}

TEST(GraphGoldenH200, RingsTreesChannels) {
  Topology t = loadFixture("h200x2_vm.xml");
  ChannelPlan p = planChannels(t, TopoOptions{});
  // Ring: 0 -> 1 -> 0 crosses GPU0->NVS->GPU1 and back; at 60 GB/s 6 channels fit in 370.8 (7 would
  // not); 50 and 40 give no more in total, 30 is half. Hopper doubles 60 GB/s channels: 12 x 30.
  EXPECT_EQ(p.ringSearch.nChannels, 12);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwIntra, 30.0);
  EXPECT_EQ(p.ringSearch.typeIntra, PathType::Nvl);
  for (const RingChannel& r : p.ringSearch.rings) EXPECT_EQ(r.order, (std::vector<int>{0, 1}));
  // Tree: exactly 12 chains; a chain 0 -> 1 uses one direction only, so 6 chains of 60 go 0 -> 1 and,
  // once GPU0's uplink is full, 6 go 1 -> 0.
  EXPECT_EQ(p.treeSearch.nChannels, 12);
  EXPECT_DOUBLE_EQ(p.treeSearch.bwIntra, 60.0);
  for (int c = 0; c < 12; c++) {
    EXPECT_EQ(chainOf(p.treeSearch.trees[c]), c < 6 ? (std::vector<int>{0, 1}) : (std::vector<int>{1, 0})) << c;
  }
  // Plan: twice the 12 searched channels.
  EXPECT_EQ(p.nChannels, 24);
  for (int c = 0; c < 24; c++) {
    EXPECT_EQ(p.rings[c].order, (std::vector<int>{0, 1}));
    EXPECT_EQ(chainOf(p.trees[c]), chainOf(p.treeSearch.trees[c % 12]));
  }
}

// --- DGX H100: 8 GPUs x 18 NVLinks into 4 NVSwitches; each GPU shares a Gen5 PCIe switch with a
// 400 Gb/s ConnectX-7; GPUs 0-3 on socket 0, 4-7 on socket 1 (Sapphire Rapids). ---
TEST(GraphGoldenDgxH100, Paths) {
  Topology t = loadFixture("dgx_h100.xml");
  for (int a = 0; a < 8; a++) {
    for (int b = 0; b < 8; b++) {
      if (a == b) continue;
      EXPECT_EQ(rankPath(t, a, b).type, PathType::Nvl);
      EXPECT_NEAR(rankPath(t, a, b).bw, 370.8, 1e-6);
    }
    for (int n = 0; n < 8; n++) {
      const Path& p = rankNetPath(t, a, n);
      if (n == a) {
        // GPU -> switch -> NIC -> NET: one switch; Gen5 x16 (48) is narrower than the NIC (50).
        EXPECT_EQ(p.type, PathType::Pix);
        EXPECT_EQ(p.count(), 3);
      } else {
        // The direct route crosses the CPU; through the NIC's own GPU over NVLink is better (PXN):
        // GPU -> NVS -> GPU n -> switch -> NIC -> NET.
        EXPECT_EQ(p.type, PathType::Pxn);
        EXPECT_EQ(p.count(), 5);
      }
      EXPECT_NEAR(p.bw, 48.0, 1e-6);
    }
  }
  expectAllTransports(t, TransportKind::P2p);
}

TEST(GraphGoldenDgxH100, PxnDisabledFallsBackToCpuPaths) {
  TopoOptions o;
  o.pxnDisable = true;
  Topology t = loadFixture("dgx_h100.xml", 1, o);
  // Same socket: through the host bridge; other socket: across UPI.
  EXPECT_EQ(rankNetPath(t, 0, 1).type, PathType::Phb);
  EXPECT_EQ(rankNetPath(t, 0, 4).type, PathType::Sys);
  EXPECT_EQ(rankNetPath(t, 0, 0).type, PathType::Pix);
}

TEST(GraphGoldenDgxH100, SingleNode) {
  Topology t = loadFixture("dgx_h100.xml");
  ChannelPlan p = planChannels(t, TopoOptions{});
  // On a switch every order is equal; ties go to the next GPU index: ring 0..7. Each channel uses
  // every GPU's 370.8 GB/s uplink once: 6 x 60, doubled to 12 x 30 as on the H200 VM.
  EXPECT_EQ(p.ringSearch.nChannels, 12);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwIntra, 30.0);
  for (const RingChannel& r : p.ringSearch.rings) EXPECT_EQ(r.order, iota(0, 8));
  // 12 chains 0 -> .. -> 7: GPUs 0-6 send on every chain, so 12 s <= 370.8: 30 is the first speed
  // of the list (60, 50, 40, 30) that fits.
  EXPECT_EQ(p.treeSearch.nChannels, 12);
  EXPECT_DOUBLE_EQ(p.treeSearch.bwIntra, 30.0);
  for (const TreeChannel& tr : p.treeSearch.trees) EXPECT_EQ(chainOf(tr), iota(0, 8));
  EXPECT_EQ(p.nChannels, 24);
}

TEST(GraphGoldenDgxH100, TwoNodesRailAligned) {
  Topology t = loadFixture("dgx_h100.xml", 2);
  EXPECT_EQ(chooseTransport(t, 0, 8, TopoOptions{}), TransportKind::Net);
  EXPECT_EQ(chooseTransport(t, 3, 5, TopoOptions{}), TransportKind::P2p);
  ChannelPlan p = planChannels(t, TopoOptions{});
  // Rings enter and leave each host through the same NIC (rail c for channel c). NIC c's own GPU c
  // receives (PIX); the last GPU sends through GPU c (PXN), as no other GPU is within PIX of NIC c.
  // At 48 GB/s each NIC carries one channel but every channel also uses each GPU's NVSwitch uplink
  // once, so only 7 fit (336 GB/s); at 45, all 8 NICs (360 GB/s). 45 < 50 with 8 channels: no
  // doubling on Hopper.
  EXPECT_EQ(p.ringSearch.nChannels, 8);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwInter, 45.0);
  EXPECT_EQ(p.ringSearch.typeInter, PathType::Pxn);
  for (int c = 0; c < 8; c++) {
    const RingChannel& r = p.ringSearch.rings[c];
    expectValidRing(t, r);
    std::vector<int> expect;
    for (int host = 0; host < 2; host++) {
      for (int i = 0; i < 8; i++) expect.push_back(8 * host + (c + i) % 8);
    }
    EXPECT_EQ(r.order, expect) << "channel " << c;
    EXPECT_EQ(r.netIn, (std::vector<int>{c, c}));
    EXPECT_EQ(r.netOut, (std::vector<int>{c, c}));
  }
  // Trees: 8 chains, head c on NIC c in both directions (PIX): 48 fits the NIC (50) and each GPU
  // uplink carries 7 chains (7 x 48 = 336).
  EXPECT_EQ(p.treeSearch.nChannels, 8);
  EXPECT_DOUBLE_EQ(p.treeSearch.bwInter, 48.0);
  EXPECT_EQ(p.treeSearch.typeInter, PathType::Pix);
  // 8 channels doubled; the Hopper cross-host doubling needs ring channels faster than 45.
  EXPECT_EQ(p.nChannels, 16);
  for (int c = 0; c < 16; c++) {
    expectValidTree(t, p.trees[c]);
    const TreeChannel& tr = p.trees[c];
    int head0 = c % 8, head1 = 8 + c % 8;
    // First half: host 0 is the root; second half: the other binary tree, host 1 is the root.
    EXPECT_EQ(tr.root, c < 8 ? head0 : head1);
    EXPECT_EQ(tr.links[c < 8 ? head1 : head0].up, c < 8 ? head0 : head1);
    EXPECT_EQ(tr.net, (std::vector<int>{c % 8, c % 8}));
  }
}

// --- DGX A100: 8 GPUs x 12 NVLinks (2 to each of 6 NVSwitches); four PCIe complexes, each a
// Broadcom Gen4 switch shown as two levels (GPU pair below one, NIC pair below the other). ---
TEST(GraphGoldenDgxA100, PathsFlattenBroadcomSwitch) {
  Topology t = loadFixture("dgx_a100.xml");
  EXPECT_EQ(rankPath(t, 0, 5).type, PathType::Nvl);
  EXPECT_NEAR(rankPath(t, 0, 5).bw, 240.0, 1e-6);
  // nvidia-smi would say PXB (two switch levels); the two-level Broadcom switch is one chip with
  // full bandwidth on every port, so it is flattened and GPU 0 sees both NICs of its complex as PIX.
  EXPECT_EQ(rankNetPath(t, 0, 0).type, PathType::Pix);
  EXPECT_EQ(rankNetPath(t, 0, 1).type, PathType::Pix);
  EXPECT_EQ(rankNetPath(t, 1, 0).type, PathType::Pix);
  EXPECT_NEAR(rankNetPath(t, 0, 0).bw, 24.0, 1e-6);  // Gen4 x16; the NIC has 25
  // Another complex's NIC: through that complex's GPU (PXN) instead of across the sockets.
  EXPECT_EQ(rankNetPath(t, 0, 5).type, PathType::Pxn);
  expectAllTransports(t, TransportKind::P2p);
}

TEST(GraphGoldenDgxA100, SingleAndTwoNodes) {
  Topology one = loadFixture("dgx_a100.xml");
  ChannelPlan p = planChannels(one, TopoOptions{});
  // 240 GB/s uplinks, Ampere speeds 40, 30, 20...: 6 x 40 = 240 uses them fully; Ampere doubles any
  // channel of >= 25 GB/s: 12 x 20. Trees: 12 chains need 12 s <= 240 on GPUs 0-6: 20.
  EXPECT_EQ(p.ringSearch.nChannels, 12);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwIntra, 20.0);
  for (const RingChannel& r : p.ringSearch.rings) EXPECT_EQ(r.order, iota(0, 8));
  EXPECT_EQ(p.treeSearch.nChannels, 12);
  EXPECT_DOUBLE_EQ(p.treeSearch.bwIntra, 20.0);
  EXPECT_EQ(p.nChannels, 24);

  Topology two = loadFixture("dgx_a100.xml", 2);
  ChannelPlan q = planChannels(two, TopoOptions{});
  // Across hosts each channel enters through NIC c and leaves through it too. PCIe Gen4 x16 (24)
  // bounds every GPU<->NIC path, so channels run at 24 (first inter speed <= 24), one per NIC; the
  // GPU sharing the switch with NIC c ends the ring so the exit stays PIX (no PXN needed).
  EXPECT_EQ(q.ringSearch.nChannels, 8);
  EXPECT_DOUBLE_EQ(q.ringSearch.bwInter, 24.0);
  EXPECT_EQ(q.ringSearch.typeInter, PathType::Pix);
  for (int c = 0; c < 8; c++) {
    const RingChannel& r = q.ringSearch.rings[c];
    expectValidRing(two, r);
    int partner = c ^ 1;  // the other GPU of NIC c's complex
    EXPECT_EQ(r.order[0], c);
    EXPECT_EQ(r.order[7], partner);
    EXPECT_EQ(r.order[8], 8 + c);
    EXPECT_EQ(r.netIn, (std::vector<int>{c, c}));
    EXPECT_EQ(r.netOut, (std::vector<int>{c, c}));
  }
  EXPECT_EQ(q.treeSearch.nChannels, 8);
  EXPECT_EQ(q.nChannels, 16);  // Ampere: no cross-host doubling
}

// Clusters of the same machines: every host searches alike, rings stay rail-aligned and the channel
// count does not depend on the number of hosts.
TEST(GraphGoldenCluster, DgxH100EightNodesIs64Ranks) {
  Topology t = loadFixture("dgx_h100.xml", 8);
  ASSERT_EQ(t.nRanks(), 64);
  ChannelPlan p = planChannels(t, TopoOptions{});
  EXPECT_EQ(p.nChannels, 16);
  for (int c = 0; c < p.nChannels; c++) {
    expectValidRing(t, p.rings[c]);
    expectValidTree(t, p.trees[c]);
    for (int h = 0; h < 8; h++) {
      EXPECT_EQ(p.rings[c].netIn[h], c % 8);
      EXPECT_EQ(p.rings[c].netOut[h], c % 8);
    }
  }
}

TEST(GraphGoldenCluster, H200VmsOverSockets) {
  // Two VMs: the only way out is the 10 Gb/s virtio NIC (1.25 GB/s, PHB from both GPUs). Hopper inter
  // speeds down to 1.2: one channel per host fits the NIC; ring 0 1 2 3, trees head 0 and head 2.
  Topology t = loadFixture("h200x2_vm.xml", 2);
  ChannelPlan p = planChannels(t, TopoOptions{});
  ASSERT_EQ(p.ringSearch.nChannels, 1);
  EXPECT_DOUBLE_EQ(p.ringSearch.bwInter, 1.2);
  EXPECT_EQ(p.ringSearch.rings[0].order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.nChannels, 2);
  EXPECT_EQ(p.trees[0].root, 0);
  EXPECT_EQ(p.trees[0].links[2].up, 0);
  EXPECT_EQ(p.trees[1].root, 2);
  EXPECT_EQ(p.trees[1].links[0].up, 2);
  EXPECT_EQ(chooseTransport(t, 1, 2, TopoOptions{}), TransportKind::Net);
}

}  // namespace
}  // namespace weft::graph
