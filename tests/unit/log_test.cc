// NCCL_DEBUG / NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE parsing, the shape of the lines users grep, and
// the last-error text behind ncclGetLastError.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <thread>

#include "core/communicator.h"
#include "core/library.h"
#include "core/log.h"
#include "test_env.h"

namespace weft::log {
namespace {

using test::ScopedEnv;
using test::TempDir;

std::string shortHostName() {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  std::string h = host;
  return h.substr(0, h.find('.'));
}

TEST(LogParse, Levels) {
  EXPECT_EQ(parseLevel(nullptr), Level::None);
  EXPECT_EQ(parseLevel(""), Level::None);
  EXPECT_EQ(parseLevel("VERSION"), Level::Version);
  EXPECT_EQ(parseLevel("WARN"), Level::Warn);
  EXPECT_EQ(parseLevel("INFO"), Level::Info);
  EXPECT_EQ(parseLevel("ABORT"), Level::Abort);
  EXPECT_EQ(parseLevel("TRACE"), Level::Trace);
  EXPECT_EQ(parseLevel("info"), Level::Info) << "NCCL compares case-insensitively";
  EXPECT_EQ(parseLevel("Warn"), Level::Warn);
  EXPECT_EQ(parseLevel("VERBOSE"), Level::None) << "unknown levels mean no logging";
  EXPECT_EQ(parseLevel("INFOX"), Level::None);
  // Numbering is NCCL's ncclDebugLogLevel, which plugins receive.
  EXPECT_EQ((int)Level::None, 0);
  EXPECT_EQ((int)Level::Version, 1);
  EXPECT_EQ((int)Level::Warn, 2);
  EXPECT_EQ((int)Level::Info, 3);
  EXPECT_EQ((int)Level::Abort, 4);
  EXPECT_EQ((int)Level::Trace, 5);
}

TEST(LogParse, SubsystemBitsAreNcclNumbering) {
  EXPECT_EQ(kInit, 0x1u);
  EXPECT_EQ(kColl, 0x2u);
  EXPECT_EQ(kNet, 0x10u);
  EXPECT_EQ(kEnv, 0x80u);
  EXPECT_EQ(kBootstrap, 0x1000u);
  EXPECT_EQ(kRas, 0x8000u);
  EXPECT_EQ(kAllocHost, 0x20000u);
}

TEST(LogParse, SubsystemLists) {
  const Subsys kDefault = kInit | kBootstrap | kEnv;
  EXPECT_EQ(parseSubsys(nullptr), kDefault);
  EXPECT_EQ(parseSubsys(""), kDefault);
  EXPECT_EQ(parseSubsys("INIT"), kInit);
  EXPECT_EQ(parseSubsys("INIT,NET"), kInit | kNet);
  EXPECT_EQ(parseSubsys("coll,p2p,SHM"), kColl | kP2p | kShm);
  EXPECT_EQ(parseSubsys("GRAPH,TUNING,ENV,ALLOC,CALL,PROXY,NVLS,BOOTSTRAP,REG,PROFILE,RAS,DESTROY,ALLOC_HOST"),
            kGraph | kTuning | kEnv | kAlloc | kCall | kProxy | kNvls | kBootstrap | kReg | kProfile | kRas |
                kDestroy | kAllocHost);
  EXPECT_EQ(parseSubsys("ALL"), kAll);
  EXPECT_EQ(parseSubsys("INIT,ALL"), kAll);
}

TEST(LogParse, SubsystemNegation) {
  EXPECT_EQ(parseSubsys("^COLL"), ~kColl);
  EXPECT_EQ(parseSubsys("^COLL,NET"), ~(kColl | kNet));
  EXPECT_EQ(parseSubsys("^ALL"), 0u);
  EXPECT_TRUE(parseSubsys("^COLL") & kInit);
  EXPECT_FALSE(parseSubsys("^COLL") & kColl);
}

TEST(LogParse, UnknownSubsystemsAreIgnored) {
  EXPECT_EQ(parseSubsys("INIT,BOGUS"), kInit);
  EXPECT_EQ(parseSubsys("BOGUS"), 0u);
  EXPECT_EQ(parseSubsys("^BOGUS"), kAll);
  EXPECT_EQ(parseSubsys("INIT,,NET"), kInit | kNet) << "empty items are skipped";
  EXPECT_EQ(parseSubsys("ALLOC"), kAlloc) << "ALLOC must not match ALLOC_HOST or vice versa";
}

TEST(LogParse, TimestampLevels) {
  EXPECT_EQ(parseTimestampLevels(nullptr), 1u << (int)Level::Warn);
  EXPECT_EQ(parseTimestampLevels("INFO"), 1u << (int)Level::Info);
  EXPECT_EQ(parseTimestampLevels("WARN,INFO"), (1u << (int)Level::Warn) | (1u << (int)Level::Info));
  EXPECT_EQ(parseTimestampLevels("ALL"), ~0u);
  EXPECT_EQ(parseTimestampLevels("^WARN"), ~(1u << (int)Level::Warn));
}

TEST(LogParse, FileNameExpansion) {
  EXPECT_EQ(expandFileName("/tmp/nccl.%h.%p.log", "node7", 4242), "/tmp/nccl.node7.4242.log");
  EXPECT_EQ(expandFileName("%p-%p", "h", 1), "1-1");
  EXPECT_EQ(expandFileName("plain", "h", 1), "plain");
  EXPECT_EQ(expandFileName("100%%", "h", 1), "100%");
  EXPECT_EQ(expandFileName("a%xb", "h", 1), "a%xb") << "unknown escapes stay as written";
  EXPECT_EQ(expandFileName("end%", "h", 1), "end%") << "a trailing % must not read past the end";
}

TEST(LogEnabled, LevelsAndSubsystems) {
  ScopedEnv env;
  env.set("NCCL_DEBUG", "INFO").set("NCCL_DEBUG_SUBSYS", "NET").unset("NCCL_DEBUG_FILE");
  EXPECT_TRUE(enabled(Level::Info, kNet));
  EXPECT_FALSE(enabled(Level::Info, kColl)) << "subsystem not selected";
  EXPECT_FALSE(enabled(Level::Trace, kNet)) << "above the level";
  EXPECT_TRUE(enabled(Level::Warn, kColl)) << "warnings ignore the subsystem mask";
  EXPECT_TRUE(enabled(Level::Version, kInit));

  env.set("NCCL_DEBUG", "WARN");
  EXPECT_FALSE(enabled(Level::Info, kNet));
  EXPECT_TRUE(enabled(Level::Warn, kNet));

  env.unset("NCCL_DEBUG");
  EXPECT_FALSE(enabled(Level::Warn, kAll)) << "no NCCL_DEBUG, no output";
  EXPECT_FALSE(enabled(Level::Version, kAll));
}

TEST(LogEnabled, DefaultSubsystemsWhenUnset) {
  ScopedEnv env;
  env.set("NCCL_DEBUG", "INFO").unset("NCCL_DEBUG_SUBSYS").unset("NCCL_DEBUG_FILE");
  EXPECT_TRUE(enabled(Level::Info, kInit));
  EXPECT_TRUE(enabled(Level::Info, kBootstrap));
  EXPECT_TRUE(enabled(Level::Info, kEnv));
  EXPECT_FALSE(enabled(Level::Info, kColl));
  EXPECT_FALSE(enabled(Level::Info, kNet));
}

TEST(LogEnabled, ResetRereadsEnvironment) {
  ScopedEnv env;
  env.set("NCCL_DEBUG", "WARN").unset("NCCL_DEBUG_FILE");
  EXPECT_FALSE(enabled(Level::Info, kInit));
  setenv("NCCL_DEBUG", "INFO", 1);
  param::resetForTesting();
  EXPECT_FALSE(enabled(Level::Info, kInit)) << "settings are read once";
  reset();  // what ncclResetDebugInit does
  EXPECT_TRUE(enabled(Level::Info, kInit));
}

// Reads the log file written for this process by NCCL_DEBUG_FILE=<dir>/weft.%h.%p.
class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("weft." + shortHostName() + "." + std::to_string(getpid()));
    env_.set("NCCL_DEBUG_FILE", dir_.file("weft.%h.%p"))
        .set("NCCL_DEBUG", "INFO")
        .set("NCCL_DEBUG_SUBSYS", "INIT,NET")
        .unset("NCCL_DEBUG_TIMESTAMP_LEVELS")
        .unset("NCCL_DEBUG_TIMESTAMP_FORMAT");
  }
  std::string contents() const { return test::readFile(path_); }

  TempDir dir_;
  ScopedEnv env_;
  std::string path_;
};

TEST_F(LogFileTest, InfoLineShape) {
  setThreadDevice(3);
  WEFT_INFO(kNet, "hello %d from the test", 42);
  setThreadDevice(-1);
  const std::string text = contents();
  ASSERT_FALSE(text.empty()) << "nothing written to " << path_ << " (%h/%p expansion or file output broken)";
  // host:pid:tid [dev] NCCL INFO message
  const std::string expected = shortHostName() + ":" + std::to_string(getpid()) + ":" +
                               std::to_string((int)syscall(SYS_gettid)) + " [3] NCCL INFO hello 42 from the test\n";
  EXPECT_EQ(text, expected);
}

TEST_F(LogFileTest, FilteredLinesAreNotWritten) {
  WEFT_INFO(kColl, "collective noise");
  WEFT_TRACE(kNet, "trace noise");
  WEFT_INFO(kInit, "kept");
  const std::string text = contents();
  EXPECT_EQ(text.find("noise"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL INFO kept"), std::string::npos) << text;
}

TEST_F(LogFileTest, WarnLineShapeHasTimestampAndLocation) {
  WEFT_WARN("disk %s is on fire", "sda");
  const std::string text = contents();
  // By default (NCCL 2.26+) warnings carry a "[%F %T] " timestamp.
  const std::regex shape("\\[\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}\\] " + shortHostName() + ":" +
                         std::to_string(getpid()) + ":\\d+ \\[-?\\d+\\] log_test\\.cc:\\d+ NCCL WARN disk sda is on fire\n");
  EXPECT_TRUE(std::regex_match(text, shape)) << "got: " << text;
}

TEST_F(LogFileTest, TimestampLevelsAndFormat) {
  env_.set("NCCL_DEBUG_TIMESTAMP_LEVELS", "INFO").set("NCCL_DEBUG_TIMESTAMP_FORMAT", "<%Y> ");
  WEFT_INFO(kInit, "stamped");
  WEFT_WARN("not stamped");
  const std::string text = contents();
  EXPECT_TRUE(std::regex_search(text, std::regex("^<\\d{4}> \\S+ \\[-?\\d+\\] NCCL INFO stamped\n"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("\n[^<\\[]\\S* \\[-?\\d+\\] \\S+ NCCL WARN not stamped\n"))) << text;
}

TEST_F(LogFileTest, FileSettingsComeFromConfFileToo) {
  // NCCL_DEBUG itself may come from NCCL_CONF_FILE.
  TempDir confDir;
  test::writeFile(confDir.file("nccl.conf"), "NCCL_DEBUG=INFO\nNCCL_DEBUG_SUBSYS=ENV\n");
  env_.unset("NCCL_DEBUG").unset("NCCL_DEBUG_SUBSYS").set("NCCL_CONF_FILE", confDir.file("nccl.conf"));
  WEFT_INFO(kEnv, "from the conf file");
  EXPECT_NE(contents().find("NCCL INFO from the conf file"), std::string::npos);
}

TEST(LogFile, NoFileWithoutDebugLevel) {
  TempDir dir;
  ScopedEnv env;
  env.unset("NCCL_DEBUG").set("NCCL_DEBUG_FILE", dir.file("never.%p"));
  WEFT_WARN("a warning nobody asked to see");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "NCCL_DEBUG unset must not create the file";
}

// --- last error --------------------------------------------------------------------------------

TEST(LastError, WarnSetsTextOfThisThread) {
  ScopedEnv env;
  env.unset("NCCL_DEBUG");
  clearLastError();
  WEFT_WARN("peer rank %d on host %s closed the connection", 3, "gpu7");
  EXPECT_STREQ(lastErrorOfThread(), "peer rank 3 on host gpu7 closed the connection");
  EXPECT_STREQ(ncclGetLastError(nullptr), "peer rank 3 on host gpu7 closed the connection");
  WEFT_INFO(kAll, "info lines do not touch it");
  EXPECT_STREQ(lastErrorOfThread(), "peer rank 3 on host gpu7 closed the connection");
}

TEST(LastError, OtherThreadsKeepTheirOwn) {
  ScopedEnv env;
  env.unset("NCCL_DEBUG");
  clearLastError();
  WEFT_WARN("main thread problem");
  std::string otherSawAsOwnBefore, otherOwnAfter;
  std::thread other([&] {
    otherSawAsOwnBefore = lastErrorOfThread();
    WEFT_WARN("worker thread problem");
    otherOwnAfter = lastErrorOfThread();
  });
  other.join();
  EXPECT_EQ(otherSawAsOwnBefore, "") << "a new thread must not see another thread's error as its own";
  EXPECT_EQ(otherOwnAfter, "worker thread problem");
  EXPECT_STREQ(lastErrorOfThread(), "main thread problem") << "the worker's warning replaced ours";
  EXPECT_STREQ(ncclGetLastError(nullptr), "main thread problem");
  EXPECT_STREQ(lastErrorOfProcess(), "worker thread problem") << "process-wide: the newest";
}

TEST(LastError, ThreadWithoutErrorFallsBackToNewestInProcess) {
  ScopedEnv env;
  env.unset("NCCL_DEBUG");
  WEFT_WARN("something failed in the main thread");
  std::string seen;
  std::thread other([&] { seen = ncclGetLastError(nullptr); });
  other.join();
  EXPECT_EQ(seen, "something failed in the main thread");
}

TEST(LastError, CommunicatorTextComesFirst) {
  ScopedEnv env;
  env.unset("NCCL_DEBUG");
  WEFT_WARN("thread text");
  ncclComm comm;
  EXPECT_STREQ(core::lastErrorText(&comm), "thread text") << "empty communicator text falls back";
  comm.setLastError("rank 1 timed out");
  EXPECT_STREQ(core::lastErrorText(&comm), "rank 1 timed out");
  EXPECT_STREQ(ncclGetLastError(&comm), "rank 1 timed out");
  comm.magic = ncclComm::kDeadMagic;
  EXPECT_STREQ(core::lastErrorText(&comm), "thread text") << "a destroyed handle is not read";
}

TEST(LastError, LongTextIsTruncatedNotOverflowed) {
  ScopedEnv env;
  env.unset("NCCL_DEBUG");
  std::string longText(5000, 'x');
  WEFT_WARN("%s", longText.c_str());
  const size_t n = strlen(lastErrorOfThread());
  EXPECT_GT(n, 500u);
  EXPECT_LT(n, 1024u);
  ncclComm comm;
  comm.setLastError(longText.c_str());
  char copy[2048];
  comm.copyLastError(copy, sizeof(copy));
  EXPECT_LT(strlen(copy), 1024u);
}

}  // namespace
}  // namespace weft::log
