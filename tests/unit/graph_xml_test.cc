// XML reader/writer and NCCL-schema import/export: malformed input, escaping, lossless round trips
// of every fixture, unknown content kept, description errors, fusing and replication.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "graph/topo_xml.h"
#include "graph_test_util.h"

namespace weft::graph {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* const kFixtures[] = {"h200x2_vm.xml", "dgx_h100.xml", "dgx_a100.xml", "pcie_4gpu_2switch.xml",
                                 "two_socket_4gpu_nvlink_pairs.xml", "dgx1_v100.xml"};

TEST(GraphXml, ParsesElementsAttributesAndSkipsTheRest) {
  XmlNode root;
  ASSERT_EQ(parseXml("<?xml version=\"1.0\"?>\n<!-- a comment -->\n<a x=\"1\" y='two'>text<b/>\n"
                     "  <!-- inner --><c z=\"&lt;&amp;&gt;&quot;\"></c></a>\n",
                     &root),
            ncclSuccess);
  EXPECT_EQ(root.name, "a");
  ASSERT_EQ(root.attrs.size(), 2u);
  EXPECT_EQ(root.attrOr("x", ""), "1");
  EXPECT_EQ(root.attrOr("y", ""), "two");
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_EQ(root.children[0].name, "b");
  EXPECT_EQ(root.children[1].attrOr("z", ""), "<&>\"");
  EXPECT_EQ(root.intAttr("x", -1), 1);
  EXPECT_EQ(root.intAttr("y", -1), -1);  // not a number
  EXPECT_EQ(root.intAttr("missing", 7), 7);
}

TEST(GraphXml, RejectsMalformedInput) {
  const char* const bad[] = {
      "",                                  // no root
      "<a>",                               // not closed
      "<a></b>",                           // mismatched
      "<a x=1/>",                          // unquoted value
      "<a x=\"1\" x=\"2\"/>",              // attribute twice
      "<a x=\"&bogus;\"/>",                // unknown entity
      "<a x=\"<\"/>",                      // '<' in a value
      "<a/><b/>",                          // two roots
      "<a><!-- never closed </a>",         // comment runs off the end
      "<a x=\"1",                          // value runs off the end
  };
  for (const char* text : bad) {
    XmlNode root;
    EXPECT_EQ(parseXml(text, &root), ncclInvalidArgument) << text;
  }
  // Nesting deeper than the reader allows.
  std::string deep;
  for (int i = 0; i < 100; i++) deep += "<a>";
  for (int i = 0; i < 100; i++) deep += "</a>";
  XmlNode root;
  EXPECT_EQ(parseXml(deep, &root), ncclInvalidArgument);
}

TEST(GraphXml, WriterEscapesAndReadsBack) {
  XmlNode n("system");
  n.setAttr("version", "1");
  XmlNode& c = n.addChild("cpu");
  c.setAttr("odd", "a&b<c>\"d\"");
  std::string text = writeXml(n);
  EXPECT_EQ(text, "<system version=\"1\">\n  <cpu odd=\"a&amp;b&lt;c&gt;&quot;d&quot;\"/>\n</system>\n");
  XmlNode back;
  ASSERT_EQ(parseXml(text, &back), ncclSuccess);
  EXPECT_EQ(back, n);
}

// Load, dump: the text comes back byte for byte (the fixtures are in NCCL's dump layout), and the
// second load builds the same graphs.
TEST(GraphXml, FixturesRoundTripLosslessly) {
  for (const char* name : kFixtures) {
    std::string text = readFile(testing::fixturePath(name));
    Topology t;
    ASSERT_EQ(parseTopologyXml(text, &t), ncclSuccess) << name;
    std::string dumped = dumpTopologyXml(t);
    EXPECT_EQ(dumped, text) << name;
    Topology again;
    ASSERT_EQ(parseTopologyXml(dumped, &again), ncclSuccess) << name;
    EXPECT_EQ(again.system, t.system);
    ASSERT_EQ(again.hosts.size(), t.hosts.size());
    for (size_t h = 0; h < t.hosts.size(); h++) {
      ASSERT_EQ(again.hosts[h].nodes.size(), t.hosts[h].nodes.size());
      for (size_t n = 0; n < t.hosts[h].nodes.size(); n++) {
        const Node& a = t.hosts[h].nodes[n];
        const Node& b = again.hosts[h].nodes[n];
        EXPECT_EQ(a.type, b.type);
        EXPECT_EQ(a.id, b.id);
        ASSERT_EQ(a.links.size(), b.links.size());
        for (size_t l = 0; l < a.links.size(); l++) {
          EXPECT_EQ(a.links[l].peer, b.links[l].peer);
          EXPECT_EQ(a.links[l].bw, b.links[l].bw);
        }
      }
    }
  }
}

TEST(GraphXml, WritesAndReadsFiles) {
  Topology t = testing::loadFixture("dgx_h100.xml");
  std::string path = std::string(WEFT_BINARY_DIR) + "/graph_xml_test_dump.xml";
  ASSERT_EQ(writeTopologyXmlFile(t, path), ncclSuccess);
  Topology back;
  ASSERT_EQ(loadTopologyXml(path, &back), ncclSuccess);
  EXPECT_EQ(back.system, t.system);
  remove(path.c_str());
  EXPECT_EQ(loadTopologyXml(path, &back), ncclSystemError);  // gone
  EXPECT_EQ(writeTopologyXmlFile(t, "/nonexistent-dir/x.xml"), ncclSystemError);
}

TEST(GraphXml, KeepsUnknownContent) {
  const char* text =
      "<system version=\"1\" vendor_note=\"kept\">\n"
      "  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\" future=\"x\">\n"
      "    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
      "      <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\" mlopart_hint=\"3\">\n"
      "        <telemetry watts=\"700\"/>\n"
      "      </gpu>\n"
      "    </pci>\n"
      "    <pcilink target=\"0000:02:00.0\"/>\n"
      "  </cpu>\n"
      "</system>\n";
  Topology t;
  ASSERT_EQ(parseTopologyXml(text, &t), ncclSuccess);
  EXPECT_EQ(dumpTopologyXml(t), text);
  EXPECT_EQ(t.nRanks(), 1);
}

TEST(GraphXml, DescriptionErrorsNameTheProblem) {
  Topology t;
  // Wrong root.
  EXPECT_EQ(parseTopologyXml("<graphs/>", &t), ncclInvalidArgument);
  // A <pci> without busid.
  EXPECT_EQ(parseTopologyXml("<system><cpu numaid=\"0\"><pci class=\"0x030200\"><gpu rank=\"0\"/></pci></cpu></system>", &t),
            ncclInvalidArgument);
  // One rank on two GPUs.
  EXPECT_EQ(parseTopologyXml("<system><cpu numaid=\"0\">"
                             "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"90\" rank=\"0\"/></pci>"
                             "<pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"1\" sm=\"90\" rank=\"0\"/></pci>"
                             "</cpu></system>",
                             &t),
            ncclInvalidUsage);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("rank 0 is on two GPUs"), std::string::npos);
  // Two network ports with one device index.
  EXPECT_EQ(parseTopologyXml("<system><cpu numaid=\"0\"><nic><net name=\"a\" dev=\"0\"/><net name=\"b\" dev=\"0\"/>"
                             "</nic></cpu></system>",
                             &t),
            ncclInvalidArgument);
  // A GPU without a rank is described but not part of the graph.
  ASSERT_EQ(parseTopologyXml("<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\">"
                             "<gpu dev=\"0\" sm=\"90\"/></pci></cpu></system>",
                             &t),
            ncclSuccess);
  EXPECT_EQ(t.nRanks(), 0);
  EXPECT_TRUE(t.hosts[0].gpus.empty());
}

TEST(GraphXml, BusIdsAreCanonical) {
  EXPECT_EQ(canonicalBusId("00000000:07:00.0"), "0000:07:00.0");
  EXPECT_EQ(canonicalBusId("0000:1A:00.1"), "0000:1a:00.1");
  EXPECT_EQ(busIdToInt64("0000:1a:00.0"), 0x1a000);
  // A virtual NVLink peer keeps its (odd) form through the integer round trip, as in NCCL's dumps.
  EXPECT_EQ(canonicalBusId("fffffff:ff:ff.0"), "fffffff:ff:ff.0");
}

TEST(GraphXml, FuseKeepsExistingAttributesAndAddsTheRest) {
  XmlNode a, b;
  ASSERT_EQ(parseXml("<system version=\"1\"><cpu host_hash=\"0x1\" numaid=\"0\" arch=\"x86_64\">"
                     "<pci busid=\"0000:01:00.0\" link_speed=\"16.0 GT/s PCIe\"><gpu dev=\"0\" rank=\"0\"/></pci>"
                     "</cpu></system>",
                     &a),
            ncclSuccess);
  ASSERT_EQ(parseXml("<system version=\"1\"><cpu host_hash=\"0x1\" numaid=\"0\" affinity=\"ff\">"
                     "<pci busid=\"0000:01:00.0\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"/>"
                     "<pci busid=\"0000:02:00.0\"><gpu dev=\"1\" rank=\"1\"/></pci></cpu>"
                     "<cpu host_hash=\"0x1\" numaid=\"1\"/></system>",
                     &b),
            ncclSuccess);
  fuseSystemXml(&a, b);
  ASSERT_EQ(a.children.size(), 2u);  // numaid 1 appended
  const XmlNode& cpu = a.children[0];
  EXPECT_EQ(cpu.attrOr("affinity", ""), "ff");  // added
  ASSERT_EQ(cpu.children.size(), 2u);            // 0000:02:00.0 appended
  EXPECT_EQ(cpu.children[0].attrOr("link_speed", ""), "16.0 GT/s PCIe");  // ours wins
  EXPECT_EQ(cpu.children[0].attrOr("link_width", ""), "16");               // added
  EXPECT_EQ(cpu.children[1].child("gpu")->attrOr("rank", ""), "1");
}

TEST(GraphXml, ReplicateHostsShiftsRanksAndHashes) {
  Topology one = testing::loadFixture("h200x2_vm.xml");
  Topology three;
  ASSERT_EQ(buildTopology(replicateHosts(one.system, 3), &three), ncclSuccess);
  ASSERT_EQ(three.hosts.size(), 3u);
  ASSERT_EQ(three.nRanks(), 6);
  for (int r = 0; r < 6; r++) {
    EXPECT_EQ(three.ranks[r].host, r / 2);
    EXPECT_EQ(three.ranks[r].gpu, r % 2);
  }
  EXPECT_NE(three.hosts[0].hostHash, three.hosts[1].hostHash);
  EXPECT_EQ(three.hostOrder(), (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace weft::graph
