// The error catalogue (user-pains matrix row 20): each way a caller can get an argument or a call
// sequence wrong, the code it gets and the sentence ncclGetLastError gives, kept in a golden file
// (tests/unit/data/error-catalogue.txt) so that a change to any of them is seen in review. Each
// entry must fail, with a sentence that names the function, and no two entries may share a
// sentence. Addresses are written as 0x? (they differ per run).
//   Regenerate after an intended change: WEFT_UPDATE_GOLDEN=1 weft_unit_tests --gtest_filter='ErrorCatalogue.*'
// Calls that need a GPU or peers (dead ranks, mismatched calls, bad buffers) have catalogues of
// their own in tests/gpu (fault_test, misuse_test, register_test).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"
#include "core/communicator.h"
#include "core/log.h"
#include "nccl.h"

namespace weft {
namespace {

struct Entry {
  const char* name;      // what the caller did wrong
  const char* function;  // the entry point; its name must open the sentence or appear in it
  std::function<ncclResult_t()> call;
};

std::string normalized(const std::string& text) {
  return std::regex_replace(text, std::regex("0x[0-9a-fA-F]+"), "0x?");
}

std::string goldenPath() { return std::string(WEFT_SOURCE_DIR) + "/tests/unit/data/error-catalogue.txt"; }

TEST(ErrorCatalogue, EveryMisuseHasItsCodeAndSentence) {
  ncclComm comm;  // a stand-in: created, two ranks, no GPU (nothing below reaches a kernel)
  comm.rank = 0;
  comm.nRanks = 2;
  ncclComm wide;  // 64 ranks: counts that overflow once multiplied by the ranks
  wide.rank = 0;
  wide.nRanks = 64;
  ncclComm destroyed;
  destroyed.magic = ncclComm::kDeadMagic;
  ncclUniqueId zeroId{};
  ncclUniqueId someId{};  // well formed, naming a root nobody runs (nothing below gets that far)
  bootstrap::UniqueIdInfo info;
  info.jobKey = 42;
  info.root = bootstrap::SocketAddress::loopback(AF_INET);
  info.root.setPort(9);
  bootstrap::encodeUniqueId(info, &someId);
  int n = 0;
  float buf[64] = {};
  ncclComm_t out = nullptr;
  ncclRedOp_t op;
  const auto badType = (ncclDataType_t)99;
  const auto badOp = (ncclRedOp_t)77;
  ncclConfig_t badConfig = NCCL_CONFIG_INITIALIZER;
  badConfig.magic = 0x1234;
  ncclConfig_t badBlocking = NCCL_CONFIG_INITIALIZER;
  badBlocking.blocking = 5;
  int excluded[1] = {7};

  const std::vector<Entry> entries = {
      {"unique id: NULL", "ncclGetUniqueId", [&] { return ncclGetUniqueId(nullptr); }},
      {"init: NULL comm", "ncclCommInitRank", [&] { return ncclCommInitRank(nullptr, 2, someId, 0); }},
      {"init: nranks 0", "ncclCommInitRank", [&] { return ncclCommInitRank(&out, 0, someId, 0); }},
      {"init: rank past nranks", "ncclCommInitRank", [&] { return ncclCommInitRank(&out, 2, someId, 2); }},
      {"init: rank negative", "ncclCommInitRank", [&] { return ncclCommInitRank(&out, 2, someId, -1); }},
      {"init: id of zeros", "ncclCommInitRank", [&] { return ncclCommInitRank(&out, 2, zeroId, 0); }},
      {"init config: bad magic", "ncclCommInitRankConfig",
       [&] { return ncclCommInitRankConfig(&out, 2, someId, 0, &badConfig); }},
      {"init config: blocking 5", "ncclCommInitRankConfig",
       [&] { return ncclCommInitRankConfig(&out, 2, someId, 0, &badBlocking); }},
      {"init all: NULL comms", "ncclCommInitAll", [&] { return ncclCommInitAll(nullptr, 2, nullptr); }},
      {"init all: ndev 0", "ncclCommInitAll", [&] { return ncclCommInitAll(&out, 0, nullptr); }},
      {"scalable: nId 0", "ncclCommInitRankScalable",
       [&] { return ncclCommInitRankScalable(&out, 2, 0, 0, &someId, nullptr); }},
      {"count: NULL comm", "ncclCommCount", [&] { return ncclCommCount(nullptr, &n); }},
      {"count: NULL out", "ncclCommCount", [&] { return ncclCommCount(&comm, nullptr); }},
      {"user rank: NULL out", "ncclCommUserRank", [&] { return ncclCommUserRank(&comm, nullptr); }},
      {"cu device: NULL out", "ncclCommCuDevice", [&] { return ncclCommCuDevice(&comm, nullptr); }},
      {"async error: NULL out", "ncclCommGetAsyncError", [&] { return ncclCommGetAsyncError(&comm, nullptr); }},
      {"destroyed comm", "ncclCommCount", [&] { return ncclCommCount(&destroyed, &n); }},
      {"all_reduce: NULL comm", "ncclAllReduce",
       [&] { return ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, nullptr, nullptr); }},
      {"all_reduce: datatype 99", "ncclAllReduce",
       [&] { return ncclAllReduce(buf, buf, 4, badType, ncclSum, &comm, nullptr); }},
      {"all_reduce: op 77", "ncclAllReduce",
       [&] { return ncclAllReduce(buf, buf, 4, ncclFloat32, badOp, &comm, nullptr); }},
      {"all_reduce: NULL sendbuff", "ncclAllReduce",
       [&] { return ncclAllReduce(nullptr, buf, 4, ncclFloat32, ncclSum, &comm, nullptr); }},
      {"all_reduce: overlap", "ncclAllReduce",
       [&] { return ncclAllReduce(buf, buf + 2, 8, ncclFloat32, ncclSum, &comm, nullptr); }},
      {"all_reduce: huge count", "ncclAllReduce",
       [&] { return ncclAllReduce(buf, buf, SIZE_MAX / 2, ncclFloat32, ncclSum, &comm, nullptr); }},
      {"all_gather: count x 64 ranks overflows", "ncclAllGather",
       [&] { return ncclAllGather(buf, buf + 32, SIZE_MAX >> 5, ncclFloat32, &wide, nullptr); }},
      {"broadcast: root 2 of 2", "ncclBroadcast",
       [&] { return ncclBroadcast(buf, buf, 4, ncclFloat32, 2, &comm, nullptr); }},
      {"reduce: root -1", "ncclReduce",
       [&] { return ncclReduce(buf, buf, 4, ncclFloat32, ncclSum, -1, &comm, nullptr); }},
      {"send: peer 5 of 2", "ncclSend", [&] { return ncclSend(buf, 4, ncclFloat32, 5, &comm, nullptr); }},
      {"recv: NULL recvbuff", "ncclRecv", [&] { return ncclRecv(nullptr, 4, ncclFloat32, 1, &comm, nullptr); }},
      {"group end without start", "ncclGroupEnd", [&] { return ncclGroupEnd(); }},
      {"premulsum: NULL op", "ncclRedOpCreatePreMulSum",
       [&] { return ncclRedOpCreatePreMulSum(nullptr, buf, ncclFloat32, ncclScalarHostImmediate, &comm); }},
      {"premulsum: residence 9", "ncclRedOpCreatePreMulSum",
       [&] { return ncclRedOpCreatePreMulSum(&op, buf, ncclFloat32, (ncclScalarResidence_t)9, &comm); }},
      {"redop destroy: built-in", "ncclRedOpDestroy", [&] { return ncclRedOpDestroy(ncclSum, &comm); }},
      {"redop destroy: unknown", "ncclRedOpDestroy", [&] { return ncclRedOpDestroy(badOp, &comm); }},
      {"split: NULL newcomm", "ncclCommSplit", [&] { return ncclCommSplit(&comm, 0, 0, nullptr, nullptr); }},
      {"split: color -5", "ncclCommSplit", [&] { return ncclCommSplit(&comm, -5, 0, &out, nullptr); }},
      {"shrink: rank 7 of 2", "ncclCommShrink",
       [&] { return ncclCommShrink(&comm, excluded, 1, &out, nullptr, NCCL_SHRINK_DEFAULT); }},
      {"register: NULL handle", "ncclCommRegister", [&] { return ncclCommRegister(&comm, buf, 64, nullptr); }},
      {"deregister: not a handle", "ncclCommDeregister", [&] { return ncclCommDeregister(&comm, buf); }},
      {"mem alloc: NULL ptr", "ncclMemAlloc", [&] { return ncclMemAlloc(nullptr, 64); }},
      {"window register: NULL win", "ncclCommWindowRegister",
       [&] { return ncclCommWindowRegister(&comm, buf, 64, nullptr, 0); }},
      {"window deregister: not a window", "ncclCommWindowDeregister",
       [&] { return ncclCommWindowDeregister(&comm, (ncclWindow_t)buf); }},
  };

  std::ostringstream catalogue;
  std::set<std::string> sentences;
  for (const Entry& e : entries) {
    log::clearLastError();
    const ncclResult_t code = e.call();
    const std::string said = normalized(ncclGetLastError(nullptr));
    EXPECT_NE(code, ncclSuccess) << e.name;
    EXPECT_FALSE(said.empty()) << e.name << ": no sentence";
    EXPECT_NE(said.find(e.function), std::string::npos)
        << e.name << ": the sentence does not name " << e.function << ": " << said;
    EXPECT_TRUE(sentences.insert(said).second) << e.name << ": the same sentence as another entry: " << said;
    catalogue << e.name << " | " << ncclGetErrorString(code) << " | " << said << "\n";
  }
  const std::string got = catalogue.str();
  if (getenv("WEFT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(goldenPath()) << got;
    GTEST_SKIP() << "wrote " << goldenPath();
  }
  std::ifstream in(goldenPath());
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str()) << "the catalogue changed; if that was meant, regenerate " << goldenPath()
                             << " with WEFT_UPDATE_GOLDEN=1 and review the difference";
}

}  // namespace
}  // namespace weft
