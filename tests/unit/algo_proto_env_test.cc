#include "graph/algo_proto_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "core/log.h"
#include "core/param.h"

using namespace weft;
using namespace weft::graph;

namespace {

constexpr uint8_t bit(int i) { return uint8_t(1u << i); }
constexpr int kBc = dev::kFuncBroadcast, kRd = dev::kFuncReduce, kAg = dev::kFuncAllGather,
              kRs = dev::kFuncReduceScatter, kAr = dev::kFuncAllReduce;

struct Masks {
  uint8_t m[kNumCollFuncs] = {0x5a, 0x5a, 0x5a, 0x5a, 0x5a};  // sentinel: parse must not touch on error
};

Masks allOnes(uint8_t all) {
  Masks x;
  for (uint8_t& v : x.m) v = all;
  return x;
}

Masks algos(const char* text, Status expect = ncclSuccess) {
  Masks x = allOnes(kAllAlgosMask);
  std::string why;
  EXPECT_EQ(parseAlgoList(text, x.m, &why), expect) << text << ": " << why;
  if (expect != ncclSuccess) EXPECT_FALSE(why.empty()) << "a rejection must say why";
  return x;
}

Masks protos(const char* text, Status expect = ncclSuccess) {
  Masks x = allOnes(kAllProtosMask);
  std::string why;
  EXPECT_EQ(parseProtoList(text, x.m, &why), expect) << text << ": " << why;
  return x;
}

}  // namespace

TEST(AlgoProtoEnv, NamesUseNcclNumbering) {
  EXPECT_STREQ(algoName(dev::kAlgoTree), "Tree");
  EXPECT_STREQ(algoName(dev::kAlgoRing), "Ring");
  EXPECT_STREQ(algoName(dev::kAlgoCollnetDirect), "CollNetDirect");
  EXPECT_STREQ(algoName(dev::kAlgoCollnetChain), "CollNetChain");
  EXPECT_STREQ(algoName(dev::kAlgoNvls), "NVLS");
  EXPECT_STREQ(algoName(dev::kAlgoNvlsTree), "NVLSTree");
  EXPECT_STREQ(algoName(dev::kAlgoPat), "PAT");
  EXPECT_STREQ(protoName(dev::kProtoLL), "LL");
  EXPECT_STREQ(protoName(dev::kProtoLL128), "LL128");
  EXPECT_STREQ(protoName(dev::kProtoSimple), "Simple");
  EXPECT_STREQ(collFuncName(dev::kFuncAllReduce), "AllReduce");
  EXPECT_STREQ(algoName(dev::kAlgoDirect), "Direct");  // weft's extension after NCCL's numbers
  EXPECT_STREQ(algoName(dev::kNumAlgos), "?");
}

TEST(AlgoProtoEnv, PlainListAppliesToEveryFunction) {
  Masks x = algos("Ring,Tree");
  for (int f = 0; f < kNumCollFuncs; ++f) EXPECT_EQ(x.m[f], bit(dev::kAlgoRing) | bit(dev::kAlgoTree));
  Masks p = protos("Simple");
  for (int f = 0; f < kNumCollFuncs; ++f) EXPECT_EQ(p.m[f], bit(dev::kProtoSimple));
}

TEST(AlgoProtoEnv, NamesAreCaseInsensitiveAndSpacesIgnored) {
  Masks x = algos(" rInG , nvlstree,collnetdirect ,COLLNETCHAIN,nvls,pat ");
  EXPECT_EQ(x.m[kAr], bit(dev::kAlgoRing) | bit(dev::kAlgoNvlsTree) | bit(dev::kAlgoCollnetDirect) |
                          bit(dev::kAlgoCollnetChain) | bit(dev::kAlgoNvls) | bit(dev::kAlgoPat));
  Masks p = protos("ll128,SIMPLE");
  EXPECT_EQ(p.m[kBc], bit(dev::kProtoLL128) | bit(dev::kProtoSimple));
}

TEST(AlgoProtoEnv, CaretExcludesTheNamedOnes) {
  Masks p = protos("^LL128");
  for (int f = 0; f < kNumCollFuncs; ++f) EXPECT_EQ(p.m[f], bit(dev::kProtoLL) | bit(dev::kProtoSimple));
  Masks x = algos("^tree,nvls");
  EXPECT_EQ(x.m[kAg], kAllAlgosMask & ~bit(dev::kAlgoTree) & ~bit(dev::kAlgoNvls));
  // "^" alone excludes nothing.
  Masks all = protos("^");
  EXPECT_EQ(all.m[kAr], kAllProtosMask);
}

TEST(AlgoProtoEnv, PerFunctionEntriesLeaveUnlistedFunctionsAlone) {
  Masks x = algos("allreduce:tree,ring;allgather:ring");
  EXPECT_EQ(x.m[kAr], bit(dev::kAlgoTree) | bit(dev::kAlgoRing));
  EXPECT_EQ(x.m[kAg], bit(dev::kAlgoRing));
  EXPECT_EQ(x.m[kBc], kAllAlgosMask);
  EXPECT_EQ(x.m[kRd], kAllAlgosMask);
  EXPECT_EQ(x.m[kRs], kAllAlgosMask);

  Masks y = algos("allreduce:^tree");  // the documented example
  EXPECT_EQ(y.m[kAr], kAllAlgosMask & ~bit(dev::kAlgoTree));
  EXPECT_EQ(y.m[kRs], kAllAlgosMask);
}

TEST(AlgoProtoEnv, LeadingDefaultThenPerFunctionOverrides) {
  // NCCL's documented examples.
  Masks x = algos("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring");
  EXPECT_EQ(x.m[kAr], bit(dev::kAlgoTree) | bit(dev::kAlgoCollnetDirect));
  EXPECT_EQ(x.m[kBc], bit(dev::kAlgoRing));
  EXPECT_EQ(x.m[kRd], bit(dev::kAlgoRing) | bit(dev::kAlgoCollnetDirect));
  EXPECT_EQ(x.m[kAg], bit(dev::kAlgoRing) | bit(dev::kAlgoCollnetDirect));

  Masks p = protos("LL,Simple;allreduce:^LL");
  EXPECT_EQ(p.m[kAr], bit(dev::kProtoLL128) | bit(dev::kProtoSimple));
  EXPECT_EQ(p.m[kAg], bit(dev::kProtoLL) | bit(dev::kProtoSimple));

  Masks q = protos("^LL128;allreduce:LL128");
  EXPECT_EQ(q.m[kAr], bit(dev::kProtoLL128));
  EXPECT_EQ(q.m[kRs], bit(dev::kProtoLL) | bit(dev::kProtoSimple));

  // A later entry for the same function wins; function names are case-insensitive.
  Masks r = algos("AllReduce:tree;ALLREDUCE:ring");
  EXPECT_EQ(r.m[kAr], bit(dev::kAlgoRing));
}

TEST(AlgoProtoEnv, EmptyPiecesAreSkipped) {
  Masks x = algos("ring,,tree,;");
  EXPECT_EQ(x.m[kAr], bit(dev::kAlgoRing) | bit(dev::kAlgoTree));
  Masks blank = algos("   ");
  EXPECT_EQ(blank.m[kAr], kAllAlgosMask) << "blank text changes nothing";
  Masks y = algos(";;allreduce:ring");
  EXPECT_EQ(y.m[kAr], bit(dev::kAlgoRing));
  EXPECT_EQ(y.m[kBc], kAllAlgosMask);
}

TEST(AlgoProtoEnv, BadInputIsRejectedAndLeavesMasksUntouched) {
  const char* bad[] = {
      "ring,bogus",                 // unknown algorithm
      "allreduce:tree;ring",        // a prefix-less entry after the first
      "allreduc:tree",              // unknown function
      "sendrecv:ring",              // not one of NCCL_ALGO's five functions
      "allreduce:",                 // empty list
      "allreduce:tree:ring",        // two ':'
      ":tree",                      // empty function name
      "Collnet",                    // the pre-2.14 name is not accepted any more
      "LL",                         // a protocol where an algorithm is expected
  };
  for (const char* text : bad) {
    Masks x;  // sentinel values
    std::string why;
    EXPECT_EQ(parseAlgoList(text, x.m, &why), ncclInvalidUsage) << text;
    EXPECT_FALSE(why.empty()) << text;
    for (int f = 0; f < kNumCollFuncs; ++f) EXPECT_EQ(x.m[f], 0x5a) << text << " modified masks";
  }
  std::string why;
  Masks p;
  EXPECT_EQ(parseProtoList("LL,LL256", p.m, &why), ncclInvalidUsage);
  EXPECT_NE(why.find("LL256"), std::string::npos) << "the message names the bad token: " << why;
  EXPECT_NE(why.find("Simple"), std::string::npos) << "and lists the valid ones: " << why;
}

TEST(AlgoProtoEnv, BadSettingIsWarnedAndIgnoredTheOtherStillApplies) {
  log::clearLastError();
  AlgoProtoMasks m = parseAlgoProtoSettings("ring,warp", "^LL");
  for (int f = 0; f < kNumCollFuncs; ++f) {
    EXPECT_EQ(m.algo[f], kAllAlgosMask) << "a bad NCCL_ALGO is ignored";
    EXPECT_EQ(m.proto[f], bit(dev::kProtoLL128) | bit(dev::kProtoSimple)) << "NCCL_PROTO still applies";
  }
  const char* warned = log::lastErrorOfThread();
  ASSERT_NE(warned, nullptr);
  EXPECT_NE(std::strstr(warned, "NCCL_ALGO"), nullptr) << warned;
  EXPECT_NE(std::strstr(warned, "warp"), nullptr) << warned;

  AlgoProtoMasks unset = parseAlgoProtoSettings(nullptr, nullptr);
  EXPECT_TRUE(unset.allows(kAr, dev::kAlgoTree, dev::kProtoLL128));
}

// A function whose protocols NCCL_PROTO set has them "named": the tuner may then use one it would
// not pick on its own (LL128 in weft for now), as NCCL treats an explicit LL128.
TEST(AlgoProtoEnv, ProtoNamedMarksTheFunctionsASettingCovers) {
  AlgoProtoMasks perFunc = parseAlgoProtoSettings(nullptr, "allreduce:LL128,Simple");
  for (int f = 0; f < kNumCollFuncs; ++f) EXPECT_EQ(perFunc.protoNamed[f], f == kAr) << f;
  AlgoProtoMasks global = parseAlgoProtoSettings(nullptr, "^LL;broadcast:Simple");
  for (int f = 0; f < kNumCollFuncs; ++f) EXPECT_TRUE(global.protoNamed[f]) << f;
  EXPECT_EQ(global.proto[kBc], bit(dev::kProtoSimple));
  AlgoProtoMasks algoOnly = parseAlgoProtoSettings("ring", nullptr);
  AlgoProtoMasks bad = parseAlgoProtoSettings(nullptr, "LL,LL256");
  for (int f = 0; f < kNumCollFuncs; ++f) {
    EXPECT_FALSE(algoOnly.protoNamed[f]) << "NCCL_ALGO names no protocol";
    EXPECT_FALSE(bad.protoNamed[f]) << "an ignored NCCL_PROTO names nothing";
  }
}

TEST(AlgoProtoEnv, AllowsCombinesBothMasks) {
  AlgoProtoMasks m = parseAlgoProtoSettings("allreduce:tree", "allreduce:simple");
  EXPECT_TRUE(m.allows(kAr, dev::kAlgoTree, dev::kProtoSimple));
  EXPECT_FALSE(m.allows(kAr, dev::kAlgoRing, dev::kProtoSimple));
  EXPECT_FALSE(m.allows(kAr, dev::kAlgoTree, dev::kProtoLL));
  EXPECT_TRUE(m.allows(kAg, dev::kAlgoRing, dev::kProtoLL));
  EXPECT_FALSE(m.allows(dev::kFuncSendRecv, dev::kAlgoRing, dev::kProtoLL)) << "out of range";
  EXPECT_FALSE(m.allows(kAr, dev::kNumAlgos, dev::kProtoLL));
}

TEST(AlgoProtoEnv, ReadsTheEnvironment) {
  setenv("NCCL_ALGO", "allgather:ring", 1);
  setenv("NCCL_PROTO", "^LL128", 1);
  param::resetForTesting();
  AlgoProtoMasks m = algoProtoMasksFromEnv();
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  param::resetForTesting();
  EXPECT_EQ(m.algo[kAg], bit(dev::kAlgoRing));
  EXPECT_EQ(m.algo[kAr], kAllAlgosMask);
  EXPECT_EQ(m.proto[kBc], bit(dev::kProtoLL) | bit(dev::kProtoSimple));

  AlgoProtoMasks none = algoProtoMasksFromEnv();
  EXPECT_EQ(none.algo[kAg], kAllAlgosMask);
  EXPECT_EQ(none.proto[kBc], kAllProtosMask);
}

TEST(AlgoProtoEnv, MaskStrings) {
  EXPECT_EQ(algoMaskString(bit(dev::kAlgoTree) | bit(dev::kAlgoRing)), "Tree,Ring");
  EXPECT_EQ(protoMaskString(bit(dev::kProtoSimple)), "Simple");
  EXPECT_EQ(protoMaskString(0), "none");
}
