// Settings parsing (NCCL_P2P_LEVEL and friends), the cross-rank transport agreement check, and the
// channel floor of communicators with host-memory hops.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/comm_topology.h"
#include "core/param.h"
#include "graph/transport_choice.h"
#include "transport/net/net_plugin.h"
#include "graph_test_util.h"
#include "test_env.h"

namespace weft::graph {
namespace {

TEST(GraphOptions, PathLevelSyntax) {
  PathType t;
  ASSERT_TRUE(parsePathLevel("PXB", &t));
  EXPECT_EQ(t, PathType::Pxb);
  ASSERT_TRUE(parsePathLevel("NVL", &t));
  EXPECT_EQ(t, PathType::Nvl);
  ASSERT_TRUE(parsePathLevel("SYS", &t));
  EXPECT_EQ(t, PathType::Sys);
  // The old numbers: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS, 5 and above SYS.
  const PathType old[] = {PathType::Loc, PathType::Pix, PathType::Pxb, PathType::Phb, PathType::Sys, PathType::Sys};
  for (int i = 0; i < 6; i++) {
    ASSERT_TRUE(parsePathLevel(std::to_string(i), &t));
    EXPECT_EQ(t, old[i]) << i;
  }
  ASSERT_TRUE(parsePathLevel("9", &t));
  EXPECT_EQ(t, PathType::Sys);
  EXPECT_FALSE(parsePathLevel("NET", &t));  // not a P2P level
  EXPECT_FALSE(parsePathLevel("pxb", &t));
  EXPECT_FALSE(parsePathLevel("", &t));
}

class GraphOptionsEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_CROSS_NIC", "NCCL_PXN_DISABLE",
                          "NCCL_MAX_NCHANNELS", "NCCL_NET_GDR_LEVEL"})
      unsetenv(v);
    param::resetForTesting();
  }
};

TEST_F(GraphOptionsEnv, ReadsTheEnvironment) {
  param::resetForTesting();
  TopoOptions d = readTopoOptions();
  EXPECT_FALSE(d.p2pLevel.has_value());
  EXPECT_FALSE(d.shmDisable);
  EXPECT_EQ(d.crossNic, 2);

  setenv("NCCL_P2P_LEVEL", "PHB", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_CROSS_NIC", "0", 1);
  setenv("NCCL_PXN_DISABLE", "1", 1);
  setenv("NCCL_MAX_NCHANNELS", "8", 1);
  setenv("NCCL_NET_GDR_LEVEL", "2", 1);
  param::resetForTesting();
  TopoOptions o = readTopoOptions();
  EXPECT_EQ(o.p2pLevel, PathType::Phb);
  EXPECT_TRUE(o.shmDisable);
  EXPECT_EQ(o.crossNic, 0);
  EXPECT_TRUE(o.pxnDisable);
  EXPECT_EQ(o.maxChannels, 8);
  EXPECT_EQ(o.netGdrLevel, PathType::Pxb);

  // NCCL_P2P_DISABLE=1 wins over NCCL_P2P_LEVEL.
  setenv("NCCL_P2P_DISABLE", "1", 1);
  param::resetForTesting();
  EXPECT_EQ(readTopoOptions().p2pLevel, PathType::Loc);

  // Junk is ignored with a warning.
  unsetenv("NCCL_P2P_DISABLE");
  setenv("NCCL_P2P_LEVEL", "FAST", 1);
  param::resetForTesting();
  EXPECT_FALSE(readTopoOptions().p2pLevel.has_value());
}

TEST(GraphTransport, AmdHostsAllowP2pThroughTheCpuForTwoGpus) {
  // NCCL's default lets a pair of GPUs behind an AMD CPU use P2P through the root complex; the same
  // pair behind an Intel CPU uses shared memory.
  const char* xml =
      "<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\" vendor=\"%s\" familyid=\"25\" modelid=\"1\">"
      "<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\"/></pci>"
      "<pci busid=\"0000:41:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<gpu dev=\"1\" sm=\"80\" rank=\"1\" gdr=\"1\"/></pci></cpu></system>";
  for (const char* vendor : {"AuthenticAMD", "GenuineIntel"}) {
    char text[1024];
    snprintf(text, sizeof(text), xml, vendor);
    Topology t;
    ASSERT_EQ(parseTopologyXml(text, &t), ncclSuccess);
    computePaths(&t, TopoOptions{});
    EXPECT_EQ(testing::rankPath(t, 0, 1).type, PathType::Phb);
    EXPECT_EQ(chooseTransport(t, 0, 1, TopoOptions{}),
              std::string(vendor) == "AuthenticAMD" ? TransportKind::P2p : TransportKind::Shm)
        << vendor;
  }
}

// Every rank's row as the others receive it: only the entries toward its own host's ranks.
std::vector<LocalRow> localRows(const Topology& t, const HostGroups& groups, const std::vector<TopoOptions>& opts) {
  std::vector<LocalRow> rows(t.nRanks());
  for (int r = 0; r < t.nRanks(); r++) {
    std::vector<uint8_t> wire = encodeTransportRow(groups, r, transportRow(t, r, opts[r]));
    EXPECT_EQ(decodeTransportRow(groups, r, wire.data(), wire.size(), &rows[r]), ncclSuccess);
  }
  return rows;
}

TEST(GraphTransport, RowsCarryOnlyTheRanksOfTheSendersHost) {
  // Two hosts of four PCIe GPUs: rank 5's row travels as its entries for ranks 4-7.
  Topology t = testing::loadFixture("pcie_4gpu_2switch.xml", 2);
  const HostGroups groups = hostGroups(t);
  ASSERT_EQ(groups.ranks.size(), 2u);
  EXPECT_EQ(groups.ranks[1], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(groups.indexOf[6], 2);
  const TransportRow row = transportRow(t, 5, TopoOptions{});
  EXPECT_EQ(row[1], TransportKind::Net);
  std::vector<uint8_t> wire = encodeTransportRow(groups, 5, row);
  ASSERT_EQ(wire.size(), 4u);
  LocalRow back;
  ASSERT_EQ(decodeTransportRow(groups, 5, wire.data(), wire.size(), &back), ncclSuccess);
  EXPECT_EQ(back, LocalRow(row.begin() + 4, row.end()));
  EXPECT_EQ(decodeTransportRow(groups, 5, wire.data(), 3, &back), ncclInternalError);  // wrong size
  EXPECT_EQ(decodeTransportRow(groups, 8, wire.data(), 4, &back), ncclInternalError);  // not a rank
  wire[1] = 7;
  EXPECT_EQ(decodeTransportRow(groups, 5, wire.data(), wire.size(), &back), ncclInternalError);  // not a transport
  std::vector<TopoOptions> opts(8);
  EXPECT_EQ(verifyTransportAgreement(groups, localRows(t, groups, opts)), ncclSuccess);
}

TEST(GraphTransport, DisagreementNamesBothRanks) {
  // Rank 3 ran with NCCL_P2P_DISABLE=1, the others did not: it wants SHM where they want P2P.
  Topology t = testing::loadFixture("pcie_4gpu_2switch.xml");
  const HostGroups groups = hostGroups(t);
  std::vector<TopoOptions> opts(4);
  opts[3].p2pLevel = PathType::Loc;
  std::vector<LocalRow> rows = localRows(t, groups, opts);
  EXPECT_EQ(verifyTransportAgreement(groups, rows), ncclInvalidUsage);
  std::string msg = log::lastErrorOfThread();
  EXPECT_NE(msg.find("rank 2 would reach rank 3 through P2P but rank 3 would reach rank 2 through SHM"),
            std::string::npos)
      << msg;
  // All alike: fine.
  opts[3] = TopoOptions{};
  rows = localRows(t, groups, opts);
  EXPECT_EQ(verifyTransportAgreement(groups, rows), ncclSuccess);
  // A row of the wrong length.
  rows[1].pop_back();
  EXPECT_EQ(verifyTransportAgreement(groups, rows), ncclInternalError);
}

TEST(GraphTransport, NetBeatsSlowP2pInsideAHost) {
  // Two GPUs on different sockets (6 GB/s QPI between them), each next to its own 200 Gb/s NIC with
  // GPU Direct RDMA: NCCL sends through the NICs (25 GB/s) rather than across QPI.
  const char* text =
      "<system version=\"1\">"
      "<cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"79\">"
      "<pci busid=\"0000:10:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<pci busid=\"0000:11:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\"/></pci>"
      "<pci busid=\"0000:12:00.0\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"><nic>"
      "<net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" gdr=\"1\"/></nic></pci></pci></cpu>"
      "<cpu numaid=\"1\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"79\">"
      "<pci busid=\"0000:80:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<pci busid=\"0000:81:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<gpu dev=\"1\" sm=\"80\" rank=\"1\" gdr=\"1\"/></pci>"
      "<pci busid=\"0000:82:00.0\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"><nic>"
      "<net name=\"mlx5_1\" dev=\"1\" speed=\"200000\" gdr=\"1\"/></nic></pci></pci></cpu></system>";
  Topology t;
  ASSERT_EQ(parseTopologyXml(text, &t), ncclSuccess);
  computePaths(&t, TopoOptions{});
  EXPECT_EQ(chooseTransport(t, 0, 1, TopoOptions{}), TransportKind::Net);
  EXPECT_EQ(testing::rankPath(t, 0, 1).type, PathType::Net);
  TopoOptions noIntra;
  noIntra.netDisableIntra = true;  // NCCL_NET_DISABLE_INTRA=1
  computePaths(&t, noIntra);
  EXPECT_EQ(chooseTransport(t, 0, 1, noIntra), TransportKind::Shm);
}

// weft's own floor of 32 channels drops to the SHM floor when a pair goes through host memory (its
// pinned segments grow with every channel); the user's floor (NCCL_MIN_NCHANNELS, minCTAs) stays.
TEST(ShmChannels, OnlyWeftsOwnFloorDropsForHostMemoryHops) {
  EXPECT_EQ(core::channelFloor(32, 1, false, 16), 32) << "all pairs peer-to-peer: NVLink floor kept";
  EXPECT_EQ(core::channelFloor(32, 1, true, 16), 16);
  EXPECT_EQ(core::channelFloor(32, 4, true, 2), 4) << "never below the user's floor";
  EXPECT_EQ(core::channelFloor(24, 24, true, 16), 24) << "NCCL_MIN_NCHANNELS=24 is the user's: kept";
  EXPECT_EQ(core::channelFloor(8, 1, true, 16), 8) << "the SHM floor never raises the count";
  EXPECT_EQ(core::channelFloor(32, 1, true, 0), 1) << "a zero setting still builds one channel";
}

// Ranks on other hosts go through weft's socket transport when NCCL_NET is unset or "Socket" (any
// case) and no network plugin is loaded (none is, in this process: NCCL_NET_PLUGIN is unset and no
// libnccl-net.so is on the loader's path); a network weft does not have is refused with a reason
// that names the setting.
TEST(NetTransportSetting, SocketOrUnsetReachesOtherHosts) {
  std::string why;
  transport::NetChoice choice;
  EXPECT_TRUE(transport::netChoice("", &choice, &why));
  EXPECT_EQ(choice.plugin, nullptr);
  EXPECT_TRUE(transport::netChoice("socket", &choice, &why));
  EXPECT_EQ(choice.plugin, nullptr);
  EXPECT_FALSE(transport::netChoice("IB", &choice, &why));
  EXPECT_NE(why.find("NCCL_NET=IB"), std::string::npos) << why;
  EXPECT_NE(why.find("Socket"), std::string::npos) << why;
  EXPECT_NE(why.find("NCCL_NET_PLUGIN"), std::string::npos) << why;
}

}  // namespace
}  // namespace weft::graph
