// ncclConfig_t as clients built against any NCCL header hand it over (reference/nccl-api.md §4.1):
// size/magic/version handling, per-field validation, defaults, and environment overrides.
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/config.h"
#include "core/log.h"
#include "test_env.h"

namespace weft::core {
namespace {

using test::ScopedEnv;

// Clears every variable that could override a config, so the machine's settings cannot leak in.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"NCCL_COMM_BLOCKING", "NCCL_CGA_CLUSTER_SIZE", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS",
                             "NCCL_COMM_SPLIT_SHARE_RESOURCES", "NCCL_COLLNET_ENABLE",
                             "NCCL_COMM_SHRINK_SHARE_RESOURCES", "NCCL_NVLS_NCHANNELS",
                             "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE",
                             "NCCL_CTA_POLICY", "NCCL_NET", "NCCL_CONF_FILE", "NCCL_DEBUG",
                             "NCCL_GRAPH_MIXING_SUPPORT"}) {
      env_.unset(name);
    }
    env_.set("HOME", "/nonexistent-weft-test-home");
  }

  Status parse(const ncclConfig_t* c, CommConfig* out) { return parseConfig(c, "ncclCommInitRankConfig", out); }

  // Expects `c` to be rejected with a warning that names `field`.
  void expectRejected(const ncclConfig_t& c, const char* field) {
    CommConfig out;
    log::clearLastError();
    EXPECT_EQ(parse(&c, &out), ncclInvalidArgument) << field;
    EXPECT_NE(std::string(log::lastErrorOfThread()).find(field), std::string::npos)
        << "warning should name " << field << ": " << log::lastErrorOfThread();
  }

  ScopedEnv env_;
};

void expectDefaults(const CommConfig& c) {
  EXPECT_TRUE(c.blocking);
  EXPECT_EQ(c.cgaClusterSize, 4);
  EXPECT_EQ(c.minCTAs, 1);
  EXPECT_EQ(c.maxCTAs, kMaxChannels);
  EXPECT_EQ(c.netName, "");
  EXPECT_FALSE(c.splitShare);
  EXPECT_EQ(c.trafficClass, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(c.commName, "");
  EXPECT_FALSE(c.collnetEnable);
  EXPECT_EQ(c.ctaPolicy, NCCL_CTA_POLICY_DEFAULT);
  EXPECT_FALSE(c.shrinkShare);
  EXPECT_EQ(c.nvlsCTAs, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(c.nChannelsPerNetPeer, NCCL_CONFIG_UNDEF_INT);
  EXPECT_FALSE(c.nvlinkCentricSched);
  EXPECT_EQ(c.graphUsageMode, 2);
}

TEST_F(ConfigTest, NullConfigGivesDefaults) {
  CommConfig out;
  out.maxCTAs = 3;  // must be overwritten
  ASSERT_EQ(parse(nullptr, &out), ncclSuccess);
  expectDefaults(out);
}

TEST_F(ConfigTest, InitializerGivesDefaults) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  expectDefaults(out);
}

TEST_F(ConfigTest, EveryFieldIsRead) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  c.cgaClusterSize = 2;
  c.minCTAs = 4;
  c.maxCTAs = 16;
  c.netName = "Socket";
  c.splitShare = 1;
  c.trafficClass = 106;
  c.commName = "dp-group";
  c.collnetEnable = 1;
  c.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  c.shrinkShare = 1;
  c.nvlsCTAs = 8;
  c.nChannelsPerNetPeer = 2;
  c.nvlinkCentricSched = 1;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_FALSE(out.blocking);
  EXPECT_EQ(out.cgaClusterSize, 2);
  EXPECT_EQ(out.minCTAs, 4);
  EXPECT_EQ(out.maxCTAs, 16);
  EXPECT_EQ(out.netName, "Socket");
  EXPECT_TRUE(out.splitShare);
  EXPECT_EQ(out.trafficClass, 106);
  EXPECT_EQ(out.commName, "dp-group");
  EXPECT_TRUE(out.collnetEnable);
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_ZERO);
  EXPECT_TRUE(out.shrinkShare);
  EXPECT_EQ(out.nvlsCTAs, 8);
  EXPECT_EQ(out.nChannelsPerNetPeer, 2);
  EXPECT_TRUE(out.nvlinkCentricSched);
}

TEST_F(ConfigTest, BadMagicIsInvalidArgument) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.magic = 0;
  CommConfig out;
  log::clearLastError();
  EXPECT_EQ(parse(&c, &out), ncclInvalidArgument);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("NCCL_CONFIG_INITIALIZER"), std::string::npos);
  // An uninitialised stack struct is the usual cause.
  ncclConfig_t garbage;
  memset(&garbage, 0xA5, sizeof(garbage));
  garbage.size = sizeof(garbage);
  EXPECT_EQ(parse(&garbage, &out), ncclInvalidArgument);
}

TEST_F(ConfigTest, SizeTooSmallForTheHeaderIsInvalidArgument) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  CommConfig out;
  for (size_t size : {0, 8, 15}) {
    c.size = size;
    EXPECT_EQ(parse(&c, &out), ncclInvalidArgument) << "size " << size;
  }
}

// A 48-byte struct (the 2.18-2.26 layout, through trafficClass). Only `size` bytes may be read: the
// caller's object ends there, and whatever follows in memory is not part of it. The version is left
// current so that version gating cannot hide a read past `size`.
TEST_F(ConfigTest, SmallerOlderStructReadsOnlyItsBytes) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.size = 48;
  c.blocking = 0;
  c.maxCTAs = 8;
  c.splitShare = 1;
  // Past byte 48: invalid values that must be ignored.
  c.commName = "must not be read";
  c.collnetEnable = 7;
  c.CTAPolicy = 99;
  c.nvlsCTAs = -5;
  c.nChannelsPerNetPeer = 1000;
  c.nvlinkCentricSched = 3;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_FALSE(out.blocking);
  EXPECT_EQ(out.maxCTAs, 8);
  EXPECT_TRUE(out.splitShare);
  EXPECT_EQ(out.commName, "");
  EXPECT_FALSE(out.collnetEnable);
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_DEFAULT);
  EXPECT_EQ(out.nvlsCTAs, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(out.nChannelsPerNetPeer, NCCL_CONFIG_UNDEF_INT);
  EXPECT_FALSE(out.nvlinkCentricSched);
}

// A struct from a newer header (2.30: 96 bytes) carries fields weft does not know; they are ignored,
// all but graphUsageMode (2.29), which weft reads.
TEST_F(ConfigTest, LargerNewerStructIsAccepted) {
  struct NewerConfig {
    ncclConfig_t known;
    int graphUsageMode, numRmaCtx, maxP2pPeers, graphStreamOrdering;
  } newer = {NCCL_CONFIG_INITIALIZER, 2, 1, 4, 1};
  static_assert(sizeof(NewerConfig) == 96, "2.30 layout");
  newer.known.size = sizeof(newer);
  newer.known.version = NCCL_VERSION(2, 30, 7);
  newer.known.minCTAs = 2;
  CommConfig out;
  ASSERT_EQ(parse(&newer.known, &out), ncclSuccess);
  EXPECT_EQ(out.minCTAs, 2);
  EXPECT_EQ(out.graphUsageMode, 2);
}

// The 2.29 layout (88 bytes): graphUsageMode at byte 80, read when the caller's version and size
// have it, validated, overridden by NCCL_GRAPH_MIXING_SUPPORT, inherited by children.
struct Config229 {
  ncclConfig_t known;
  int graphUsageMode, numRmaCtx;
};
static_assert(sizeof(Config229) == 88 && offsetof(Config229, graphUsageMode) == 80, "2.29 layout");

Config229 config229(int graphUsageMode) {
  Config229 c = {NCCL_CONFIG_INITIALIZER, graphUsageMode, 1};
  c.known.size = sizeof(c);
  c.known.version = NCCL_VERSION(2, 29, 2);
  return c;
}

TEST_F(ConfigTest, GraphUsageModeIsReadFromNewerStructs) {
  for (int mode : {0, 1, 2}) {
    Config229 c = config229(mode);
    CommConfig out;
    ASSERT_EQ(parse(&c.known, &out), ncclSuccess) << mode;
    EXPECT_EQ(out.graphUsageMode, mode);
  }
  Config229 undefined = config229(NCCL_CONFIG_UNDEF_INT);
  CommConfig out;
  ASSERT_EQ(parse(&undefined.known, &out), ncclSuccess);
  EXPECT_EQ(out.graphUsageMode, 2);
}

TEST_F(ConfigTest, GraphUsageModeNeedsTheVersionAndTheSize) {
  Config229 older = config229(1);
  older.known.version = NCCL_VERSION(2, 28, 9);  // the bytes say 1, the version predates the field
  CommConfig out;
  ASSERT_EQ(parse(&older.known, &out), ncclSuccess);
  EXPECT_EQ(out.graphUsageMode, 2);
  Config229 shorter = config229(1);
  shorter.known.size = 80;  // a 2.29 version but a 2.28-sized object: byte 80 is not the caller's
  ASSERT_EQ(parse(&shorter.known, &out), ncclSuccess);
  EXPECT_EQ(out.graphUsageMode, 2);
}

TEST_F(ConfigTest, GraphUsageModeIsValidated) {
  for (int bad : {-1, 3, 100}) {
    Config229 c = config229(bad);
    CommConfig out;
    log::clearLastError();
    EXPECT_EQ(parse(&c.known, &out), ncclInvalidArgument) << bad;
    EXPECT_NE(std::string(log::lastErrorOfThread()).find("graphUsageMode"), std::string::npos);
  }
}

TEST_F(ConfigTest, GraphMixingSupportOverridesGraphUsageMode) {
  Config229 mixed = config229(2);
  CommConfig out;
  env_.set("NCCL_GRAPH_MIXING_SUPPORT", "0");
  ASSERT_EQ(parse(&mixed.known, &out), ncclSuccess);
  EXPECT_EQ(out.graphUsageMode, 1);
  ASSERT_EQ(parse(nullptr, &out), ncclSuccess);
  EXPECT_EQ(out.graphUsageMode, 1);
  env_.set("NCCL_GRAPH_MIXING_SUPPORT", "1");
  Config229 single = config229(1);
  ASSERT_EQ(parse(&single.known, &out), ncclSuccess);
  EXPECT_EQ(out.graphUsageMode, 2);
}

TEST_F(ConfigTest, ChildInheritsGraphUsageMode) {
  CommConfig parent;
  parent.graphUsageMode = 1;
  CommConfig child;
  ASSERT_EQ(parseChildConfig(nullptr, parent, "ncclCommSplit", &child), ncclSuccess);
  EXPECT_EQ(child.graphUsageMode, 1);
  Config229 mixed = config229(2);
  ASSERT_EQ(parseChildConfig(&mixed.known, parent, "ncclCommSplit", &child), ncclSuccess);
  EXPECT_EQ(child.graphUsageMode, 2);
}

// Fields newer than the caller's declared version take their defaults, whatever the bytes say.
TEST_F(ConfigTest, VersionGatingGivesDefaultsForLaterFields) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.version = NCCL_VERSION(2, 17, 0);  // 21700
  ASSERT_EQ(c.version, 21700u);
  c.blocking = 0;           // 2.14: kept
  c.cgaClusterSize = 2;     // 2.17: kept
  c.minCTAs = 3;            // 2.17: kept
  c.maxCTAs = 5;            // 2.17: kept
  c.netName = "IB";         // 2.17: kept
  c.splitShare = 1;         // 2.18: default
  c.trafficClass = 5;       // 2.25: default
  c.commName = "x";         // 2.27: default
  c.collnetEnable = 42;     // 2.27: default, so even an invalid value passes
  c.CTAPolicy = 2;          // 2.27: default
  c.shrinkShare = 1;        // 2.27: default
  c.nvlsCTAs = 3;           // 2.27: default
  c.nChannelsPerNetPeer = 4;  // 2.28: default
  c.nvlinkCentricSched = 1;   // 2.28: default
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_FALSE(out.blocking);
  EXPECT_EQ(out.cgaClusterSize, 2);
  EXPECT_EQ(out.minCTAs, 3);
  EXPECT_EQ(out.maxCTAs, 5);
  EXPECT_EQ(out.netName, "IB");
  EXPECT_FALSE(out.splitShare);
  EXPECT_EQ(out.trafficClass, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(out.commName, "");
  EXPECT_FALSE(out.collnetEnable);
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_DEFAULT);
  EXPECT_FALSE(out.shrinkShare);
  EXPECT_EQ(out.nvlsCTAs, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(out.nChannelsPerNetPeer, NCCL_CONFIG_UNDEF_INT);
  EXPECT_FALSE(out.nvlinkCentricSched);
}

TEST_F(ConfigTest, VersionGatingBoundaries) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.version = NCCL_VERSION(2, 27, 0);
  c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;  // 2.27: kept
  c.nvlinkCentricSched = 1;                  // 2.28: default
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_EFFICIENCY);
  EXPECT_FALSE(out.nvlinkCentricSched);

  c.version = NCCL_VERSION(2, 13, 0);  // before configs had blocking
  c.blocking = 0;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_TRUE(out.blocking);
}

TEST_F(ConfigTest, ValidationOfEachField) {
  const ncclConfig_t base = NCCL_CONFIG_INITIALIZER;
  ncclConfig_t c;
  c = base; c.blocking = 2;              expectRejected(c, "blocking");
  c = base; c.blocking = -1;             expectRejected(c, "blocking");
  c = base; c.cgaClusterSize = -1;       expectRejected(c, "cgaClusterSize");
  c = base; c.minCTAs = 0;               expectRejected(c, "minCTAs");
  c = base; c.maxCTAs = -3;              expectRejected(c, "maxCTAs");
  c = base; c.minCTAs = 8; c.maxCTAs = 4; expectRejected(c, "minCTAs");
  c = base; c.splitShare = 2;            expectRejected(c, "splitShare");
  c = base; c.shrinkShare = -1;          expectRejected(c, "shrinkShare");
  c = base; c.collnetEnable = 2;         expectRejected(c, "collnetEnable");
  c = base; c.CTAPolicy = 4;             expectRejected(c, "CTAPolicy");
  c = base; c.CTAPolicy = -1;            expectRejected(c, "CTAPolicy");
  c = base; c.nvlsCTAs = 0;              expectRejected(c, "nvlsCTAs");
  c = base; c.nChannelsPerNetPeer = 0;   expectRejected(c, "nChannelsPerNetPeer");
  c = base; c.nChannelsPerNetPeer = 65;  expectRejected(c, "nChannelsPerNetPeer");
  c = base; c.nvlinkCentricSched = 2;    expectRejected(c, "nvlinkCentricSched");
}

TEST_F(ConfigTest, LimitsAreClampedNotRejected) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.cgaClusterSize = 16;  // NCCL accepts it and limits it to 8
  c.minCTAs = 100;
  c.maxCTAs = 200;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_EQ(out.cgaClusterSize, 8);
  EXPECT_EQ(out.minCTAs, kMaxChannels);
  EXPECT_EQ(out.maxCTAs, kMaxChannels);
  c = NCCL_CONFIG_INITIALIZER;
  c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_EQ(out.ctaPolicy, 3);
}

// --- environment overrides ---------------------------------------------------------------------

TEST_F(ConfigTest, CommBlockingOverridesConfig) {
  env_.set("NCCL_COMM_BLOCKING", "0");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 1;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_FALSE(out.blocking);
  ASSERT_EQ(parse(nullptr, &out), ncclSuccess);
  EXPECT_FALSE(out.blocking) << "also without a config";
}

TEST_F(ConfigTest, CtaPolicyFromEnvironment) {
  CommConfig out;
  env_.set("NCCL_CTA_POLICY", "EFFICIENCY|ZERO");
  ASSERT_EQ(parse(nullptr, &out), ncclSuccess);
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO);
  env_.set("NCCL_CTA_POLICY", "efficiency");
  ASSERT_EQ(parse(nullptr, &out), ncclSuccess);
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_EFFICIENCY);
  env_.set("NCCL_CTA_POLICY", "2");  // legacy numbers
  ASSERT_EQ(parse(nullptr, &out), ncclSuccess);
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_ZERO);
  env_.set("NCCL_CTA_POLICY", "FASTEST");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  ASSERT_EQ(parse(&c, &out), ncclSuccess) << "an unreadable policy is ignored, not an error";
  EXPECT_EQ(out.ctaPolicy, NCCL_CTA_POLICY_EFFICIENCY);
}

TEST_F(ConfigTest, ParseCtaPolicySyntax) {
  EXPECT_EQ(parseCtaPolicy("DEFAULT"), 0);
  EXPECT_EQ(parseCtaPolicy("EFFICIENCY"), 1);
  EXPECT_EQ(parseCtaPolicy("ZERO"), 2);
  EXPECT_EQ(parseCtaPolicy("ZERO|EFFICIENCY"), 3);
  EXPECT_EQ(parseCtaPolicy("DEFAULT|ZERO"), 2);
  EXPECT_EQ(parseCtaPolicy("0"), 0);
  EXPECT_EQ(parseCtaPolicy("1"), 1);
  EXPECT_EQ(parseCtaPolicy("3"), -1);
  EXPECT_EQ(parseCtaPolicy(""), -1);
  EXPECT_EQ(parseCtaPolicy("BOGUS"), -1);
}

TEST_F(ConfigTest, NumericOverrides) {
  env_.set("NCCL_MIN_CTAS", "2")
      .set("NCCL_MAX_CTAS", "6")
      .set("NCCL_CGA_CLUSTER_SIZE", "1")
      .set("NCCL_NVLS_NCHANNELS", "12")
      .set("NCCL_NCHANNELS_PER_NET_PEER", "3")
      .set("NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", "1")
      .set("NCCL_COMM_SPLIT_SHARE_RESOURCES", "1")
      .set("NCCL_COMM_SHRINK_SHARE_RESOURCES", "1")
      .set("NCCL_COLLNET_ENABLE", "1")
      .set("NCCL_NET", "Socket");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.minCTAs = 1;
  c.maxCTAs = 32;
  c.netName = "IB";
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_EQ(out.minCTAs, 2);
  EXPECT_EQ(out.maxCTAs, 6);
  EXPECT_EQ(out.cgaClusterSize, 1);
  EXPECT_EQ(out.nvlsCTAs, 12);
  EXPECT_EQ(out.nChannelsPerNetPeer, 3);
  EXPECT_TRUE(out.nvlinkCentricSched);
  EXPECT_TRUE(out.splitShare);
  EXPECT_TRUE(out.shrinkShare);
  EXPECT_TRUE(out.collnetEnable);
  EXPECT_EQ(out.netName, "Socket") << "NCCL_NET beats config->netName";
}

// A bad environment value must not make every communicator in the job fail; NCCL ignores it.
TEST_F(ConfigTest, OutOfRangeEnvironmentIsIgnored) {
  env_.set("NCCL_COMM_BLOCKING", "2")
      .set("NCCL_MIN_CTAS", "0")
      .set("NCCL_MAX_CTAS", "-4")
      .set("NCCL_CGA_CLUSTER_SIZE", "-1")
      .set("NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", "5")
      .set("NCCL_NCHANNELS_PER_NET_PEER", "0")
      .set("NCCL_NVLS_NCHANNELS", "0");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  c.minCTAs = 2;
  c.maxCTAs = 8;
  c.cgaClusterSize = 2;
  c.nvlinkCentricSched = 1;
  c.nChannelsPerNetPeer = 4;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_FALSE(out.blocking);
  EXPECT_EQ(out.minCTAs, 2);
  EXPECT_EQ(out.maxCTAs, 8);
  EXPECT_EQ(out.cgaClusterSize, 2);
  EXPECT_TRUE(out.nvlinkCentricSched);
  EXPECT_EQ(out.nChannelsPerNetPeer, 4);
  EXPECT_EQ(out.nvlsCTAs, NCCL_CONFIG_UNDEF_INT) << "<= 0 means automatic";
}

TEST_F(ConfigTest, UnparsableEnvironmentIsIgnored) {
  env_.set("NCCL_MAX_CTAS", "lots").set("NCCL_COMM_BLOCKING", "yes");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.maxCTAs = 12;
  c.blocking = 0;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_EQ(out.maxCTAs, 12);
  EXPECT_FALSE(out.blocking);
}

TEST_F(ConfigTest, EnvironmentConflictsAreResolvedLikeNccl) {
  env_.set("NCCL_MAX_CTAS", "2").set("NCCL_CGA_CLUSTER_SIZE", "12");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.minCTAs = 4;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess) << "env max below config min: min follows max";
  EXPECT_EQ(out.maxCTAs, 2);
  EXPECT_EQ(out.minCTAs, 2);
  EXPECT_EQ(out.cgaClusterSize, 8);
}

TEST_F(ConfigTest, SwitchesFromEnvironmentTreatOtherValuesAsOff) {
  env_.set("NCCL_COLLNET_ENABLE", "7").set("NCCL_COMM_SPLIT_SHARE_RESOURCES", "3");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.collnetEnable = 1;
  c.splitShare = 1;
  CommConfig out;
  ASSERT_EQ(parse(&c, &out), ncclSuccess);
  EXPECT_FALSE(out.collnetEnable);
  EXPECT_FALSE(out.splitShare);
}

// --- split/shrink: undefined fields come from the parent ------------------------------------

TEST_F(ConfigTest, ChildInheritsParentForUndefinedFields) {
  CommConfig parent;
  parent.blocking = false;
  parent.maxCTAs = 8;
  parent.commName = "parent";
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.minCTAs = 2;
  CommConfig child;
  ASSERT_EQ(parseChildConfig(&c, parent, "ncclCommSplit", &child), ncclSuccess);
  EXPECT_FALSE(child.blocking);
  EXPECT_EQ(child.maxCTAs, 8);
  EXPECT_EQ(child.minCTAs, 2);
  EXPECT_EQ(child.commName, "parent");

  CommConfig fromNull;
  ASSERT_EQ(parseChildConfig(nullptr, parent, "ncclCommSplit", &fromNull), ncclSuccess);
  EXPECT_FALSE(fromNull.blocking);
  EXPECT_EQ(fromNull.maxCTAs, 8);

  env_.set("NCCL_COMM_BLOCKING", "1");
  ASSERT_EQ(parseChildConfig(nullptr, parent, "ncclCommSplit", &fromNull), ncclSuccess);
  EXPECT_TRUE(fromNull.blocking) << "the environment applies to children too";
}

TEST_F(ConfigTest, ChildConfigIsValidated) {
  CommConfig parent, child;
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 9;
  EXPECT_EQ(parseChildConfig(&c, parent, "ncclCommSplit", &child), ncclInvalidArgument);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("ncclCommSplit"), std::string::npos)
      << "the warning names the entry point";
}

}  // namespace
}  // namespace weft::core
