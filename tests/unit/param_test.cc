// Parameters: environment first, then NCCL_CONF_FILE (or ~/.nccl.conf, then /etc/nccl.conf), then
// the default; integers in decimal or hex; bad values warned about and replaced by the default.
#include <gtest/gtest.h>

#include <string>

#include "core/log.h"
#include "core/param.h"
#include "test_env.h"

namespace weft::param {
namespace {

using test::ScopedEnv;
using test::TempDir;

// Points NCCL_CONF_FILE at a fresh file and HOME at an empty folder, so the machine's own
// ~/.nccl.conf cannot leak into a test.
class ParamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.set("HOME", home_.path()).unset("NCCL_CONF_FILE").unset("WEFT_TEST_A").unset("WEFT_TEST_B");
  }
  void useConfFile(const std::string& text) {
    test::writeFile(conf_.file("nccl.conf"), text);
    env_.set("NCCL_CONF_FILE", conf_.file("nccl.conf"));
  }
  TempDir home_, conf_;
  ScopedEnv env_;
};

TEST_F(ParamTest, DefaultWhenUnset) {
  EXPECT_EQ(getInt("WEFT_TEST_A", 17), 17);
  EXPECT_EQ(getStr("WEFT_TEST_B", "dflt"), "dflt");
  EXPECT_FALSE(lookup("WEFT_TEST_A").has_value());
}

TEST_F(ParamTest, EnvironmentIntegers) {
  env_.set("WEFT_TEST_A", "42");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 42);
  env_.set("WEFT_TEST_A", "0x10");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 16);
  env_.set("WEFT_TEST_A", "-2");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), -2);
  env_.set("WEFT_TEST_A", "9000000000");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 9000000000LL) << "64-bit values";
}

TEST_F(ParamTest, EmptyValueMeansDefault) {
  env_.set("WEFT_TEST_A", "");
  log::clearLastError();
  EXPECT_EQ(getInt("WEFT_TEST_A", 5), 5);
  EXPECT_STREQ(log::lastErrorOfThread(), "") << "an empty value is not an error";
}

TEST_F(ParamTest, InvalidIntegersWarnAndUseDefault) {
  for (const char* bad : {"abc", "12abc", "1.5", "0x", "99999999999999999999999"}) {
    env_.set("WEFT_TEST_A", bad);
    log::clearLastError();
    EXPECT_EQ(getInt("WEFT_TEST_A", 7), 7) << "value '" << bad << "'";
    const std::string warning = log::lastErrorOfThread();
    EXPECT_NE(warning.find("WEFT_TEST_A"), std::string::npos) << "the warning names the variable: " << warning;
    EXPECT_NE(warning.find(bad), std::string::npos) << "the warning quotes the value: " << warning;
  }
}

TEST_F(ParamTest, InvalidValueWarnsOnceAndHonoursEachCallersDefault) {
  env_.set("WEFT_TEST_A", "junk");
  log::clearLastError();
  EXPECT_EQ(getInt("WEFT_TEST_A", 7), 7);
  log::clearLastError();
  // A second reader with another default gets its own default, not the first reader's.
  EXPECT_EQ(getInt("WEFT_TEST_A", 9), 9);
  EXPECT_STREQ(log::lastErrorOfThread(), "") << "the warning is given once";
}

TEST_F(ParamTest, UnsetValueHonoursEachCallersDefault) {
  EXPECT_EQ(getInt("WEFT_TEST_A", 1), 1);
  EXPECT_EQ(getInt("WEFT_TEST_A", 2), 2);
  EXPECT_EQ(getStr("WEFT_TEST_B", "x"), "x");
  EXPECT_EQ(getStr("WEFT_TEST_B", "y"), "y");
}

TEST_F(ParamTest, ValuesAreCachedUntilReset) {
  env_.set("WEFT_TEST_A", "1");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 1);
  setenv("WEFT_TEST_A", "2", 1);
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 1) << "read once, as NCCL does";
  resetForTesting();
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 2);
}

TEST_F(ParamTest, IntParamHandle) {
  constexpr IntParam kParam{"WEFT_TEST_A", 4 << 20};
  EXPECT_EQ(kParam.get(), 4 << 20);
  env_.set("WEFT_TEST_A", "65536");
  EXPECT_EQ(kParam.get(), 65536);
}

TEST_F(ParamTest, ConfFileIsUsedWhenEnvironmentIsSilent) {
  useConfFile("# comment\nWEFT_TEST_A=123\n  WEFT_TEST_B = spaced value  \n");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 123);
  EXPECT_EQ(getStr("WEFT_TEST_B", ""), "spaced value");
  EXPECT_EQ(lookup("WEFT_TEST_A").value_or(""), "123");
}

TEST_F(ParamTest, EnvironmentBeatsConfFile) {
  useConfFile("WEFT_TEST_A=123\n");
  env_.set("WEFT_TEST_A", "456");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 456);
}

TEST_F(ParamTest, InvalidValueInConfFileWarnsWithSource) {
  useConfFile("WEFT_TEST_A=twelve\n");
  log::clearLastError();
  EXPECT_EQ(getInt("WEFT_TEST_A", 3), 3);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("configuration file"), std::string::npos)
      << log::lastErrorOfThread();
}

TEST_F(ParamTest, HomeConfIsReadWithoutNcclConfFile) {
  test::writeFile(home_.file(".nccl.conf"), "WEFT_TEST_A=77\n");
  env_.set("HOME", home_.path());  // re-reads files
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 77);
}

TEST_F(ParamTest, NcclConfFileReplacesHomeConf) {
  test::writeFile(home_.file(".nccl.conf"), "WEFT_TEST_A=77\nWEFT_TEST_B=home\n");
  useConfFile("WEFT_TEST_A=88\n");
  EXPECT_EQ(getInt("WEFT_TEST_A", 0), 88);
  EXPECT_EQ(getStr("WEFT_TEST_B", "unset"), "unset") << "~/.nccl.conf is not read when NCCL_CONF_FILE is set";
}

TEST_F(ParamTest, MissingConfFileIsNotAnError) {
  env_.set("NCCL_CONF_FILE", conf_.file("does-not-exist.conf"));
  EXPECT_EQ(getInt("WEFT_TEST_A", 5), 5);
}

TEST(ParamConfLine, Parsing) {
  std::string k, v;
  EXPECT_TRUE(parseConfLine("NCCL_DEBUG=INFO", &k, &v));
  EXPECT_EQ(k, "NCCL_DEBUG");
  EXPECT_EQ(v, "INFO");
  EXPECT_TRUE(parseConfLine("  NCCL_IB_HCA = =mlx5_0:1 \r", &k, &v));
  EXPECT_EQ(k, "NCCL_IB_HCA");
  EXPECT_EQ(v, "=mlx5_0:1") << "only the first '=' separates; NCCL's exact-match prefix survives";
  EXPECT_TRUE(parseConfLine("EMPTY=", &k, &v));
  EXPECT_EQ(v, "");
  EXPECT_FALSE(parseConfLine("# NCCL_DEBUG=INFO", &k, &v));
  EXPECT_FALSE(parseConfLine("   ", &k, &v));
  EXPECT_FALSE(parseConfLine("no equals sign", &k, &v));
  EXPECT_FALSE(parseConfLine("=value", &k, &v));
  EXPECT_FALSE(parseConfLine(" =value", &k, &v));
}

}  // namespace
}  // namespace weft::param
