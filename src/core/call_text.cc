// The sentences about calls (call_check.h's pure functions), apart from the checker itself so that
// tools can print calls without the library's communicator code (weft-status).
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "core/call_check.h"
#include "device/abi.h"
#include "nccl.h"

namespace weft::core {
namespace {

const char* callName(uint8_t call) {
  static const char* const names[kNumCollCalls] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce",
                                                   "ncclAllGather", "ncclReduceScatter", "ncclAlltoAll",
                                                   "ncclGather", "ncclScatter"};
  return call < kNumCollCalls ? names[call] : "an unknown collective";
}

std::string typeName(uint8_t type) {
  static const char* const names[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                                      "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16",
                                      "ncclFloat8e4m3", "ncclFloat8e5m2"};
  if (type < sizeof(names) / sizeof(names[0])) return names[type];
  return "datatype " + std::to_string(type);
}

std::string opName(uint8_t op) {
  static const char* const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
  if (op == kUserRedOp) return "an op of ncclRedOpCreatePreMulSum";
  if (op < sizeof(names) / sizeof(names[0])) return names[op];
  return "op " + std::to_string(op);
}

}  // namespace

uint64_t callTypeBytes(uint8_t type) { return type < ncclNumTypes ? (uint64_t)dev::dataTypeBytes(type) : 0; }

std::string describeCall(const CallSignature& call) {
  std::string text = std::string(callName(call.call)) + "(count " + std::to_string(call.count) + ", " +
                     typeName(call.dataType);
  if (call.redOp != kNoRedOp) text += ", " + opName(call.redOp);
  if (call.root >= 0) text += ", root " + std::to_string(call.root);
  return text + ")";
}

std::string callDifference(const CallSignature& a, const CallSignature& b) {
  if (a.call != b.call) return "the collective";
  std::vector<const char*> parts;
  // Calls that only move data work in NCCL when the ranks' types differ but their byte counts
  // agree (ncclInt8 x 4n on one rank, ncclFloat32 x n on another): such calls are let through.
  const bool movesOnly = a.redOp == kNoRedOp && b.redOp == kNoRedOp;
  const uint64_t bytesA = a.count * callTypeBytes(a.dataType), bytesB = b.count * callTypeBytes(b.dataType);
  if (!movesOnly || bytesA != bytesB || bytesA == 0) {
    if (a.count != b.count) parts.push_back("the count");
    if (a.dataType != b.dataType) parts.push_back("the datatype");
  }
  if (a.redOp != b.redOp) parts.push_back("the reduction");
  if (a.root != b.root) parts.push_back("the root");
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += i + 1 == parts.size() ? " and " : ", ";
    text += parts[i];
  }
  return text;
}

std::string describeFinding(uint64_t seq, int rank, const CallSignature& mine, int peer, const CallSignature& theirs) {
  char head[128];
  snprintf(head, sizeof(head),
           "collective #%" PRIu64 " on this communicator differs between ranks: rank %d called ", seq, rank);
  const std::string what = callDifference(mine, theirs);
  return head + describeCall(mine) + ", rank " + std::to_string(peer) + " called " + describeCall(theirs) + " (" +
         what + (what.find(" and ") == std::string::npos ? " differs)" : " differ)");
}

std::string describeP2pFinding(uint64_t seq, int sender, const P2pSignature& sent, int receiver,
                               const P2pSignature& received) {
  auto call = [](const char* name, const P2pSignature& op) {
    const uint64_t bytes = op.count * callTypeBytes(op.dataType);
    return std::string(name) + "(count " + std::to_string(op.count) + ", " + typeName(op.dataType) + ", " +
           std::to_string(bytes) + (bytes == 1 ? " byte)" : " bytes)");
  };
  char head[160];
  snprintf(head, sizeof(head),
           "send #%" PRIu64 " from rank %d to rank %d and the receive that meets it differ in size: rank %d called ",
           seq, sender, receiver, sender);
  return head + call("ncclSend", sent) + ", rank " + std::to_string(receiver) + " called " +
         call("ncclRecv", received);
}

}  // namespace weft::core
