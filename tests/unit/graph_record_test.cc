// Per-rank topology records: wire form (and what a bad record gets), and the merge of all ranks'
// records into one Topology that every rank computes alike.
#include <gtest/gtest.h>

#include "graph/detect.h"
#include "graph/rank_record.h"
#include "graph/transport_choice.h"
#include "graph_test_util.h"

namespace weft::graph {
namespace {

using testing::dataPath;

// What rank `rank` of a job on `hosts` copies of our H200 VM would send: it detects its own host
// with only its own GPU (the other GPU of the VM is not its business).
RankRecord vmRecord(int rank, int nRanks, uint64_t hostHash, const std::string& busId) {
  DetectInputs in;
  in.sysfsRoot = dataPath("sysfs/h200x2");
  in.cpuInfoPath = dataPath("sysfs/h200x2/cpuinfo");
  in.machine = "x86_64";
  in.hostHash = hostHash;
  in.gpus = {{busId, rank, busId == "0000:00:06.0" ? 0 : 1, 90, true}};
  DetectGpuLinks l;
  l.busId = busId;
  l.nvlinks.push_back(DetectNvLink{"fffffff:ff:ff.0", "0x068000", 18});
  in.links.push_back(l);
  DetectNet eth;
  eth.name = "eth0";
  eth.pciPath = in.sysfsRoot + "/devices/pci0000:00/0000:00:03.0/virtio2";
  eth.speedMbps = 10000;
  in.nets.push_back(eth);
  XmlNode sys;
  EXPECT_EQ(detectSystemXml(in, &sys), ncclSuccess);
  RankRecord r;
  r.rank = rank;
  r.nRanks = nRanks;
  r.hostHash = hostHash;
  r.busId = busId;
  r.systemXml = writeXml(sys);
  return r;
}

TEST(GraphRecord, EncodeDecodeRoundTrip) {
  RankRecord r = vmRecord(1, 2, 0xfeedULL, "0000:00:07.0");
  std::vector<uint8_t> wire = encodeRankRecord(r);
  EXPECT_EQ(wire.size(), kRankRecordHeaderBytes + r.systemXml.size());
  // Fixed-size slots: trailing padding is allowed.
  wire.resize(wire.size() + 100, 0xee);
  RankRecord back;
  ASSERT_EQ(decodeRankRecord(wire.data(), wire.size(), &back), ncclSuccess);
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.nRanks, 2);
  EXPECT_EQ(back.hostHash, 0xfeedULL);
  EXPECT_EQ(back.busId, "0000:00:07.0");
  EXPECT_EQ(back.systemXml, r.systemXml);
}

TEST(GraphRecord, BadRecordsAreRejected) {
  RankRecord r = vmRecord(0, 2, 1, "0000:00:06.0");
  std::vector<uint8_t> good = encodeRankRecord(r);
  RankRecord out;
  EXPECT_EQ(decodeRankRecord(nullptr, 0, &out), ncclInternalError);
  EXPECT_EQ(decodeRankRecord(good.data(), kRankRecordHeaderBytes - 1, &out), ncclInternalError);  // short
  std::vector<uint8_t> bad = good;
  bad[0] ^= 0xff;  // magic
  EXPECT_EQ(decodeRankRecord(bad.data(), bad.size(), &out), ncclInternalError);
  bad = good;
  bad[4] = 9;  // version
  EXPECT_EQ(decodeRankRecord(bad.data(), bad.size(), &out), ncclInvalidUsage);
  bad = good;
  bad[8] = 5;  // rank 5 of 2
  EXPECT_EQ(decodeRankRecord(bad.data(), bad.size(), &out), ncclInternalError);
  bad = good;
  for (int i = 24; i < 56; i++) bad[i] = 'x';  // bus id without terminator
  EXPECT_EQ(decodeRankRecord(bad.data(), bad.size(), &out), ncclInternalError);
  // Description longer than what arrived.
  EXPECT_EQ(decodeRankRecord(good.data(), good.size() - 1, &out), ncclInternalError);
  bad = good;
  bad[59] = 0x7f;  // absurd length
  EXPECT_EQ(decodeRankRecord(bad.data(), bad.size(), &out), ncclInternalError);
}

TEST(GraphRecord, MergeFusesEachHostsRanks) {
  // Two VMs, two ranks each; every rank described only its own GPU.
  std::vector<RankRecord> recs = {vmRecord(0, 4, 0xa, "0000:00:06.0"), vmRecord(1, 4, 0xa, "0000:00:07.0"),
                                  vmRecord(2, 4, 0xb, "0000:00:06.0"), vmRecord(3, 4, 0xb, "0000:00:07.0")};
  Topology t;
  ASSERT_EQ(mergeRankRecords(recs, &t), ncclSuccess);
  ASSERT_EQ(t.hosts.size(), 2u);
  ASSERT_EQ(t.nRanks(), 4);
  for (int r = 0; r < 4; r++) EXPECT_EQ(t.ranks[r].host, r / 2);
  EXPECT_EQ(t.hosts[0].hostHash, 0xaULL);
  // Both GPUs of a host reach each other through the fused NVSwitch fabric.
  computePaths(&t, TopoOptions{});
  EXPECT_EQ(testing::rankPath(t, 0, 1).type, PathType::Nvl);
  EXPECT_EQ(testing::rankPath(t, 2, 3).type, PathType::Nvl);
  // Same records in, same topology out: what every rank computes.
  Topology again;
  ASSERT_EQ(mergeRankRecords(recs, &again), ncclSuccess);
  EXPECT_EQ(again.system, t.system);
  // And all ranks' transport rows agree.
  const HostGroups groups = hostGroups(t);
  std::vector<LocalRow> rows;
  for (int r = 0; r < 4; r++) {
    const TransportRow row = transportRow(t, r, TopoOptions{});
    EXPECT_EQ(row[2], r < 2 ? TransportKind::Net : TransportKind::P2p);
    rows.emplace_back();
    std::vector<uint8_t> wire = encodeTransportRow(groups, r, row);
    ASSERT_EQ(decodeTransportRow(groups, r, wire.data(), wire.size(), &rows.back()), ncclSuccess);
  }
  EXPECT_EQ(verifyTransportAgreement(groups, rows), ncclSuccess);
  EXPECT_EQ(rows[0], (LocalRow{TransportKind::P2p, TransportKind::P2p}));
}

TEST(GraphRecord, MergeRefusesInconsistentRecords) {
  Topology t;
  // Two ranks on one GPU of one host: an error naming both.
  std::vector<RankRecord> dup = {vmRecord(0, 2, 0xa, "0000:00:06.0"), vmRecord(1, 2, 0xa, "0000:00:06.0")};
  EXPECT_EQ(mergeRankRecords(dup, &t), ncclInvalidUsage);
  std::string msg = log::lastErrorOfThread();
  EXPECT_NE(msg.find("ranks 0 and 1"), std::string::npos) << msg;
  // Slot and rank disagree.
  std::vector<RankRecord> swapped = {vmRecord(1, 2, 0xa, "0000:00:07.0"), vmRecord(0, 2, 0xa, "0000:00:06.0")};
  EXPECT_EQ(mergeRankRecords(swapped, &t), ncclInternalError);
  // A rank whose description lacks its own GPU.
  std::vector<RankRecord> missing = {vmRecord(0, 2, 0xa, "0000:00:06.0"), vmRecord(1, 2, 0xb, "0000:00:07.0")};
  missing[1].busId = "0000:00:09.0";
  EXPECT_EQ(mergeRankRecords(missing, &t), ncclInternalError);
  // Unreadable description.
  std::vector<RankRecord> garbage = {vmRecord(0, 1, 0xa, "0000:00:06.0")};
  garbage[0].systemXml = "<system><cpu";
  EXPECT_EQ(mergeRankRecords(garbage, &t), ncclInvalidArgument);
}

}  // namespace
}  // namespace weft::graph
