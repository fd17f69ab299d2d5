#include "core/rank_agreement.h"

#include <gtest/gtest.h>

using weft::core::SharedSettings;
using weft::core::settingsDifference;

namespace {
SharedSettings typical() {
  SharedSettings s;
  s.magic = weft::core::kSharedSettingsMagic;
  s.nChannels = 32;
  s.p2pChannels = 4;
  s.p2pOnlyChannels = 24;
  s.protoStepBytes[weft::dev::kProtoLL] = 64 << 10;
  s.protoStepBytes[weft::dev::kProtoLL128] = 614400;
  s.protoStepBytes[weft::dev::kProtoSimple] = 512 << 10;
  s.treesConnected = 1;
  s.p2pMaxChannels = 24;
  s.p2pChannelBytes = 128 << 10;
  s.runtimeConnect = 1;
  s.p2pLLBytes = 16384;
  return s;
}
}  // namespace

TEST(RankAgreement, EqualSettingsAgree) { EXPECT_EQ(settingsDifference(typical(), typical(), 3), ""); }

TEST(RankAgreement, EveryDifferenceIsNamedWithBothValuesAndTheRank) {
  const SharedSettings mine = typical();
  struct Case {
    void (*change)(SharedSettings*);
    const char* expected;
  } cases[] = {
      {[](SharedSettings* s) { s->nChannels = 16; }, "channels (NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS / config): 32 here, 16 at rank 5"},
      {[](SharedSettings* s) { s->p2pChannels = 2; }, "NCCL_WEFT_P2P_NCHANNELS: 4 here, 2 at rank 5"},
      {[](SharedSettings* s) { s->p2pOnlyChannels = 0; }, "NCCL_WEFT_P2P_SIMPLE_NCHANNELS: 24 here, 0 at rank 5"},
      {[](SharedSettings* s) { s->protoStepBytes[weft::dev::kProtoSimple] = 256 << 10; },
       "NCCL_BUFFSIZE: 4194304 here, 2097152 at rank 5"},
      {[](SharedSettings* s) { s->protoStepBytes[weft::dev::kProtoLL] = 128 << 10; },
       "NCCL_LL_BUFFSIZE: 524288 here, 1048576 at rank 5"},
      {[](SharedSettings* s) { s->treesConnected = 0; }, "tree connections (NCCL_ALGO): 1 here, 0 at rank 5"},
      {[](SharedSettings* s) { s->p2pMaxChannels = 32; }, "NCCL_WEFT_P2P_MAX_CHANNELS: 24 here, 32 at rank 5"},
      {[](SharedSettings* s) { s->p2pChannelBytes = 0; }, "NCCL_WEFT_P2P_CHANNEL_BYTES: 131072 here, 0 at rank 5"},
      {[](SharedSettings* s) { s->runtimeConnect = 0; }, "NCCL_RUNTIME_CONNECT: 1 here, 0 at rank 5"},
      {[](SharedSettings* s) { s->p2pLLBytes = 0; }, "NCCL_P2P_LL_THRESHOLD: 16384 here, 0 at rank 5"},
  };
  for (const Case& c : cases) {
    SharedSettings theirs = typical();
    c.change(&theirs);
    EXPECT_EQ(settingsDifference(mine, theirs, 5), c.expected);
  }
}

TEST(RankAgreement, BytesFromElsewhereAreRefused) {
  SharedSettings theirs = typical();
  theirs.magic = 0;
  EXPECT_NE(settingsDifference(typical(), theirs, 1).find("not weft's"), std::string::npos);
}
