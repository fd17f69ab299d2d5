// Detection against fake sysfs trees (tests/unit/data/sysfs): our 2xH200 VM, whose flat PCI bus,
// missing link files, missing NUMA node and virtio NIC must all be handled, and a box with a real
// PCIe switch, NUMA node and two-port NIC. Also the sysfs helpers on their own.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/cpu_affinity.h"
#include "graph/detect.h"
#include "graph/detect_sysfs.h"
#include "graph/topo_xml.h"
#include "graph_test_util.h"

namespace weft::graph {
namespace {

using testing::dataPath;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

DetectInputs h200Inputs() {
  DetectInputs in;
  in.sysfsRoot = dataPath("sysfs/h200x2");
  in.cpuInfoPath = dataPath("sysfs/h200x2/cpuinfo");
  in.machine = "x86_64";
  in.hostHash = 0x5a1d3c0ffee0b0b0ULL;
  in.gpus = {{"0000:00:06.0", 0, 0, 90, true}, {"0000:00:07.0", 1, 1, 90, true}};
  // What NVML reports in the VM: 18 links each to a remote it cannot name (the NVSwitch fabric).
  for (const char* bus : {"0000:00:06.0", "0000:00:07.0"}) {
    DetectGpuLinks l;
    l.busId = bus;
    l.nvlinks.push_back(DetectNvLink{"fffffff:ff:ff.0", "0x068000", 18});
    in.links.push_back(l);
  }
  DetectNet eth;
  eth.name = "eth0";
  eth.pciPath = in.sysfsRoot + "/devices/pci0000:00/0000:00:03.0/virtio2";
  eth.dev = 0;
  eth.speedMbps = 10000;
  eth.port = 0;
  eth.maxConn = 65536;
  in.nets.push_back(eth);
  return in;
}

// Detection on the fake VM reproduces the description NCCL 2.28.9 builds there (the fixture was
// written from NCCL's log on the machine): GPUs on the root bus with their own Gen5 link speed,
// numaid -1 without affinity, the virtio NIC attached to the CPU.
TEST(GraphDetect, H200VmMatchesFixture) {
  XmlNode sys;
  ASSERT_EQ(detectSystemXml(h200Inputs(), &sys), ncclSuccess);
  EXPECT_EQ(writeXml(sys), readFile(testing::fixturePath("h200x2_vm.xml")));
  EXPECT_EQ(core::gpuCpuMap(sys, "0000:00:06.0"), "") << "no NUMA node: communicators leave CPU affinity alone";
  Topology t;
  ASSERT_EQ(detectTopology(h200Inputs(), &t), ncclSuccess);
  EXPECT_EQ(t.nRanks(), 2);
  EXPECT_GE(t.hosts[0].nvs, 0);
}

TEST(GraphDetect, SwitchBoxWalksUpTheTree) {
  DetectInputs in;
  in.sysfsRoot = dataPath("sysfs/switch_box");
  in.cpuInfoPath = dataPath("sysfs/switch_box/cpuinfo");
  in.machine = "x86_64";
  in.hostHash = 0x1234;
  in.gpus = {{"0000:13:00.0", 0, 0, 90, true}};
  for (int port = 0; port < 2; port++) {
    DetectNet n;
    n.name = "mlx5_" + std::to_string(port);
    n.dev = port;
    n.pciPath = in.sysfsRoot + "/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:01.0/0000:14:00." +
                std::to_string(port);
    n.speedMbps = 200000;
    n.port = 1;
    n.guid = 0xabc0 + port;
    n.maxConn = 131072;
    n.gdr = true;
    in.nets.push_back(n);
  }
  XmlNode sys;
  ASSERT_EQ(detectSystemXml(in, &sys), ncclSuccess);
  // The root port is part of the CPU; the switch is its upstream port 11:00.0; downstream ports are
  // skipped. The GPU runs at the Gen4 speed of its switch port (its own link could do Gen5); the
  // NIC's x8 is narrower than its port. Both NIC functions share one <pci> (function 0) and <nic>.
  const char* expected =
      "<system version=\"1\">\n"
      "  <cpu host_hash=\"0x1234\" numaid=\"1\" affinity=\"00000000,ffff0000\" arch=\"x86_64\" vendor=\"AuthenticAMD\" "
      "familyid=\"25\" modelid=\"1\">\n"
      "    <pci busid=\"0000:11:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc010\" subsystem_vendor=\"0x1000\" "
      "subsystem_device=\"0xa064\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
      "      <pci busid=\"0000:13:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" subsystem_vendor=\"0x10de\" "
      "subsystem_device=\"0x16c1\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
      "        <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"/>\n"
      "      </pci>\n"
      "      <pci busid=\"0000:14:00.0\" class=\"0x020700\" vendor=\"0x15b3\" device=\"0x101b\" subsystem_vendor=\"0x15b3\" "
      "subsystem_device=\"0x0007\" link_speed=\"16.0 GT/s PCIe\" link_width=\"8\">\n"
      "        <nic>\n"
      "          <net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" port=\"1\" latency=\"0.000000\" guid=\"0xabc0\" "
      "maxconn=\"131072\" gdr=\"1\"/>\n"
      "          <net name=\"mlx5_1\" dev=\"1\" speed=\"200000\" port=\"1\" latency=\"0.000000\" guid=\"0xabc1\" "
      "maxconn=\"131072\" gdr=\"1\"/>\n"
      "        </nic>\n"
      "      </pci>\n"
      "    </pci>\n"
      "  </cpu>\n"
      "</system>\n";
  EXPECT_EQ(writeXml(sys), expected);
  EXPECT_EQ(core::gpuCpuMap(sys, "0000:13:00.0"), "00000000,ffff0000") << "the CPUs a communicator is created on";
  Topology t;
  ASSERT_EQ(buildTopology(sys, &t), ncclSuccess);
  computePaths(&t, TopoOptions{});
  // GPU and NIC behind one switch: PIX; the NIC's x8 Gen4 link (12 GB/s) is the narrowest hop.
  const HostGraph& h = t.hosts[0];
  const Path& p = h.paths[h.gpus[0]][h.findNode(NodeType::Net, 0)];
  EXPECT_EQ(p.type, PathType::Pix);
  EXPECT_NEAR(p.bw, 12.0, 1e-6);
}

TEST(GraphDetect, MissingThingsAreEstimatedNotFatal) {
  DetectInputs in = h200Inputs();
  in.gpus.push_back({"0000:00:09.0", 2, 2, 90, true});  // not in the fake sysfs
  in.nets[0].pciPath.clear();                           // the plugin gave no path
  in.cpuInfoPath = "/nonexistent/cpuinfo";
  Topology t;
  ASSERT_EQ(detectTopology(in, &t), ncclSuccess);
  EXPECT_EQ(t.nRanks(), 3);
  const Node& g = t.gpuOfRank(2);
  // Unknown link: PCIe Gen3 x16 (12 GB/s) towards a CPU with numaid -1.
  const HostGraph& h = t.hostOfRank(2);
  ASSERT_FALSE(g.links.empty());
  EXPECT_NEAR(g.links.back().bw, 12.0, 1e-6);
  EXPECT_EQ(h.nodes[g.links.back().peer].type, NodeType::Cpu);
  EXPECT_EQ(h.nets.size(), 1u);
}

TEST(GraphDetect, TopoFileIsTheBase) {
  DetectInputs in = h200Inputs();
  in.topoFile = testing::fixturePath("h200x2_vm.xml");
  in.gpus[0].sm = 80;  // detection disagrees: the file wins
  XmlNode sys;
  ASSERT_EQ(detectSystemXml(in, &sys), ncclSuccess);
  EXPECT_EQ(writeXml(sys), readFile(testing::fixturePath("h200x2_vm.xml")));
  EXPECT_EQ(core::gpuCpuMap(sys, "0000:00:06.0"), "") << "no NUMA node: communicators leave CPU affinity alone";
  in.topoFile = "/nonexistent/topo.xml";
  EXPECT_EQ(detectSystemXml(in, &sys), ncclSystemError);
}

TEST(GraphSysfs, Helpers) {
  EXPECT_TRUE(isPciAddress("0000:00:06.0"));
  EXPECT_TRUE(isPciAddress("10000:af:1f.7"));
  EXPECT_FALSE(isPciAddress("pci0000:00"));
  EXPECT_FALSE(isPciAddress("virtio2"));
  EXPECT_FALSE(isPciAddress("0000:0g:00.0"));
  std::string trailing;
  EXPECT_EQ(pciChain("/sys/devices/pci0000:00/0000:00:03.0/virtio2", &trailing),
            (std::vector<std::string>{"0000:00:03.0"}));
  EXPECT_EQ(trailing, "virtio2");
  EXPECT_EQ(pciChain("/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0/0000:13:00.0", &trailing),
            (std::vector<std::string>{"0000:10:01.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0"}));
  EXPECT_EQ(trailing, "");
  CpuId id = parseCpuInfo("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n\n"
                          "processor\t: 1\nvendor_id\t: Other\n");
  EXPECT_EQ(id.vendor, "GenuineIntel");
  EXPECT_EQ(id.family, 6);
  EXPECT_EQ(id.model, 143);
  EXPECT_EQ(archName("aarch64"), "arm64");
  EXPECT_EQ(archName("ppc64le"), "ppc64");
  // A device found without the bus/pci/devices link, by walking devices/.
  std::string root = dataPath("sysfs/switch_box");
  EXPECT_NE(sysfsPciDevicePath(root, "0000:14:00.1").find("0000:12:01.0/0000:14:00.1"), std::string::npos);
  EXPECT_EQ(sysfsPciDevicePath(root, "0000:99:00.0"), "");
  PciAttrs vm = readPciAttrs(dataPath("sysfs/h200x2/devices/pci0000:00/0000:00:06.0"));
  EXPECT_EQ(vm.linkSpeed, "32.0 GT/s PCIe");  // the root complex above has no link files
  EXPECT_EQ(vm.numaNode, -1);
  EXPECT_EQ(numaCpuMap(root, 1), "00000000,ffff0000");
  EXPECT_EQ(numaCpuMap(root, 0), "");
}

}  // namespace
}  // namespace weft::graph
