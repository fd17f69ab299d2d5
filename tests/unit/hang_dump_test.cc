// The hang dump's text and name (core/hang_dump.h); the GPU fault test reads real ones.
#include "core/hang_dump.h"

#include <gtest/gtest.h>

#include "core/call_check.h"
#include "ledger_test_util.h"

using namespace weft::core;

namespace {

HangFacts sampleFacts() {
  HangFacts f;
  f.reason = "rank 1: this communicator's work (up to operation #9) has not finished for 4 s (NCCL_TIMEOUT)";
  f.when = "2026-12-07 12:00:00 UTC";
  f.hostName = "node7";
  f.pid = 4242;
  f.rank = 1;
  f.nRanks = 3;
  f.cudaDev = 0;
  f.nChannels = 8;
  f.busId = "0000:19:00.0";
  f.commHash = 0xabcdef0123456789ULL;
  f.operations = 9;
  f.collectives = 9;
  f.recentCalls = {{8, weft::test::allReduceCall(256)}, {9, weft::test::allReduceCall(1024)}};
  f.settings = {"NCCL_PROTO=Simple", "NCCL_TIMEOUT=4"};
  f.hostStatus = "communicator abcdef0123456789: 3 of its ranks' pages on this host\n  behind: rank 2 ...\n";
  return f;
}

}  // namespace

TEST(HangDump, TheTextHoldsTheReasonTheLatestCallsSettingsAndTheHostsView) {
  HangFacts f = sampleFacts();
  std::string text = formatHangDump(f);
  for (const std::string& want :
       {std::string("where: node7, pid 4242, CUDA device 0 (0000:19:00.0)"),
        std::string("communicator abcdef0123456789: rank 1 of 3, 8 channels"), "reason: " + f.reason,
        std::string("operations asked for: 9, of which collectives: 9"),
        "collective #9: " + describeCall(weft::test::allReduceCall(1024)),
        std::string("no kernel of a CUDA graph replay was running"), std::string("\n    NCCL_TIMEOUT=4"),
        std::string("the ranks of this host (as weft-status prints them):\n") + f.hostStatus}) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
  }
  EXPECT_LT(text.find("collective #8"), text.find("collective #9")) << "oldest first";

  f.replayChannels = {0, 3};
  f.settings.clear();
  text = formatHangDump(f);
  EXPECT_NE(text.find("a CUDA graph replay's kernel was still running on channels 0, 3\n"), std::string::npos) << text;
  f.replayChannels = {0, 1, 2, 3, 5, 7, 8};
  text = formatHangDump(f);
  EXPECT_NE(text.find("running on channels 0-3, 5, 7-8\n"), std::string::npos) << text;
  f.replayChannels = {4};
  EXPECT_NE(formatHangDump(f).find("running on channel 4\n"), std::string::npos);
  EXPECT_NE(text.find("(no NCCL_* variable set)"), std::string::npos) << text;
}

TEST(HangDump, OneFilePerCommunicatorRankAndProcess) {
  const HangFacts f = sampleFacts();
  EXPECT_EQ(hangDumpPath("/tmp", f), "/tmp/weft-hang-abcdef0123456789-r1-p4242.txt");
  EXPECT_EQ(hangDumpPath("/var/log/", f), "/var/log/weft-hang-abcdef0123456789-r1-p4242.txt");
}
