// What each rank contributes to the communicator's topology, and how all ranks' contributions are
// merged into one Topology. Every rank detects its own host (detectSystemXml with its GPU), sends a
// RankRecord through the bootstrap all-gather, and merges the records it receives; since the merge is
// a pure function of the records, every rank ends with the same Topology.
//
// Wire form: a 64-byte header, then the description as XML text.
//   offset 0  u32 magic 0x52525457 ("WTRR" little-endian)   4  u16 version (1)   6  u16 0
//          8  i32 rank    12  i32 nRanks    16  u64 host hash    24  char[32] bus id (NUL-padded)
//         56  u32 XML length    60  u32 0
// Integers are little-endian. Trailing bytes after the XML are allowed (fixed-size slots).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/topology.h"

namespace weft::graph {

constexpr size_t kRankRecordHeaderBytes = 64;
constexpr size_t kRankRecordMaxXmlBytes = 16u << 20;

struct RankRecord {
  int rank = -1;
  int nRanks = 0;
  uint64_t hostHash = 0;
  std::string busId;      // the GPU this rank uses
  std::string systemXml;  // the rank's description of its host (writeXml of detectSystemXml's result)
};

std::vector<uint8_t> encodeRankRecord(const RankRecord& rec);

// Checks everything before use (magic, version, ranges, lengths); a bad record is an error that
// names the sender when the header is readable.
[[nodiscard]] Status decodeRankRecord(const uint8_t* data, size_t size, RankRecord* out);

// records[r] must be rank r's. Records with one host hash are one host: their descriptions are
// fused, each GPU gets the rank that uses it (and no other), and two ranks on one GPU are an error
// naming both ranks. The hosts' descriptions together make the Topology's description.
[[nodiscard]] Status mergeRankRecords(const std::vector<RankRecord>& records, Topology* out);

}  // namespace weft::graph
