#include "graph/rank_record.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/log.h"
#include "graph/topo_xml.h"

namespace weft::graph {

namespace {

constexpr uint32_t kMagic = 0x52525457;  // "WTRR"
constexpr uint16_t kVersion = 1;
constexpr size_t kBusIdBytes = 32;

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
  return buf;
}

// Calls f on every <gpu> element with the bus id of its <pci> parent.
template <typename F>
void forEachGpu(XmlNode* node, const std::string& busId, F&& f) {
  for (XmlNode& c : node->children) {
    if (c.name == "gpu") f(&c, busId);
    else forEachGpu(&c, c.name == "pci" ? canonicalBusId(c.attrOr("busid", "")) : busId, f);
  }
}

}  // namespace

std::vector<uint8_t> encodeRankRecord(const RankRecord& rec) {
  std::vector<uint8_t> out(kRankRecordHeaderBytes + rec.systemXml.size(), 0);
  uint8_t* p = out.data();
  put32(p, kMagic);
  p[4] = (uint8_t)kVersion;
  p[5] = (uint8_t)(kVersion >> 8);
  put32(p + 8, (uint32_t)rec.rank);
  put32(p + 12, (uint32_t)rec.nRanks);
  put64(p + 16, rec.hostHash);
  memcpy(p + 24, rec.busId.data(), std::min(rec.busId.size(), kBusIdBytes - 1));
  put32(p + 56, (uint32_t)rec.systemXml.size());
  memcpy(p + kRankRecordHeaderBytes, rec.systemXml.data(), rec.systemXml.size());
  return out;
}

Status decodeRankRecord(const uint8_t* data, size_t size, RankRecord* out) {
  if (data == nullptr || size < kRankRecordHeaderBytes) {
    WEFT_WARN("topology record of %zu bytes is shorter than its %zu-byte header", size, kRankRecordHeaderBytes);
    return ncclInternalError;
  }
  if (get32(data) != kMagic) {
    WEFT_WARN("topology record has a bad magic 0x%08x; the peer is not weft or its data was corrupted", get32(data));
    return ncclInternalError;
  }
  uint16_t version = (uint16_t)(data[4] | (data[5] << 8));
  int rank = (int)get32(data + 8);
  int nRanks = (int)get32(data + 12);
  if (version != kVersion) {
    WEFT_WARN("topology record from rank %d has version %u, this library reads %u; mix of weft versions?", rank,
              (unsigned)version, (unsigned)kVersion);
    return ncclInvalidUsage;
  }
  if (nRanks <= 0 || rank < 0 || rank >= nRanks) {
    WEFT_WARN("topology record claims rank %d of %d", rank, nRanks);
    return ncclInternalError;
  }
  const char* bus = (const char*)data + 24;
  size_t busLen = strnlen(bus, kBusIdBytes);
  if (busLen == kBusIdBytes) {
    WEFT_WARN("topology record from rank %d: unterminated bus id", rank);
    return ncclInternalError;
  }
  size_t xmlLen = get32(data + 56);
  if (xmlLen > kRankRecordMaxXmlBytes || xmlLen > size - kRankRecordHeaderBytes) {
    WEFT_WARN("topology record from rank %d: description of %zu bytes does not fit the %zu bytes received", rank,
              xmlLen, size - kRankRecordHeaderBytes);
    return ncclInternalError;
  }
  RankRecord r;
  r.rank = rank;
  r.nRanks = nRanks;
  r.hostHash = get64(data + 16);
  r.busId.assign(bus, busLen);
  r.systemXml.assign((const char*)data + kRankRecordHeaderBytes, xmlLen);
  *out = std::move(r);
  return ncclSuccess;
}

Status mergeRankRecords(const std::vector<RankRecord>& records, Topology* out) {
  int n = (int)records.size();
  for (int r = 0; r < n; r++) {
    if (records[r].rank != r || records[r].nRanks != n) {
      WEFT_WARN("topology record in slot %d says rank %d of %d, expected rank %d of %d", r, records[r].rank,
                records[r].nRanks, r, n);
      return ncclInternalError;
    }
  }
  // Hosts in order of their lowest rank.
  std::vector<uint64_t> hosts;
  for (const RankRecord& rec : records) {
    bool known = false;
    for (uint64_t h : hosts) known |= h == rec.hostHash;
    if (!known) hosts.push_back(rec.hostHash);
  }
  XmlNode system("system");
  system.setAttr("version", "1");
  for (uint64_t host : hosts) {
    XmlNode fused("system");
    std::vector<int> ranks;
    for (const RankRecord& rec : records) {
      if (rec.hostHash != host) continue;
      for (int other : ranks) {
        if (canonicalBusId(records[other].busId) == canonicalBusId(rec.busId)) {
          WEFT_WARN("ranks %d and %d both use GPU %s on host %llx; give each rank its own GPU", other, rec.rank,
                    canonicalBusId(rec.busId).c_str(), (unsigned long long)host);
          return ncclInvalidUsage;
        }
      }
      ranks.push_back(rec.rank);
      XmlNode mine;
      Status s = parseXml(rec.systemXml, &mine);
      if (isError(s)) {
        WEFT_WARN("the topology description from rank %d could not be read", rec.rank);
        return s;
      }
      fuseSystemXml(&fused, mine);
    }
    // Every GPU carries the rank that uses it, and only that one.
    std::vector<char> found(ranks.size(), 0);
    forEachGpu(&fused, std::string(), [&](XmlNode* gpu, const std::string& busId) {
      gpu->removeAttr("rank");
      for (size_t i = 0; i < ranks.size(); i++) {
        if (canonicalBusId(records[ranks[i]].busId) == busId) {
          gpu->setAttr("rank", std::to_string(ranks[i]));
          found[i] = 1;
        }
      }
    });
    for (size_t i = 0; i < ranks.size(); i++) {
      if (!found[i]) {
        WEFT_WARN("rank %d uses GPU %s, which its topology description does not contain", ranks[i],
                  records[ranks[i]].busId.c_str());
        return ncclInternalError;
      }
    }
    for (XmlNode& c : fused.children) {
      if (c.name == "cpu") c.setAttr("host_hash", hex(host));
      system.children.push_back(std::move(c));
    }
  }
  return buildTopology(std::move(system), out);
}

}  // namespace weft::graph
