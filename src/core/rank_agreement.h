// Settings every rank of a communicator must share. Each rank derives its peers' connection
// layouts and point-to-point plans from its own values, so ranks started with different
// environments (NCCL_BUFFSIZE, NCCL_WEFT_P2P_SIMPLE_NCHANNELS, ...) would write into each other's
// memory at the wrong places or wait for transfers that never come. Creation compares them once
// and fails with the first difference, named, on every rank.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "device/abi.h"

struct ncclComm;

namespace weft::core {

struct SharedSettings {
  uint32_t magic = 0;  // kSharedSettingsMagic: the bytes came from this code
  int32_t nChannels = 0;
  int32_t p2pChannels = 0;
  int32_t p2pOnlyChannels = 0;
  int32_t protoStepBytes[dev::kNumProtos] = {};
  int32_t treesConnected = 0;
  int32_t p2pMaxChannels = 0;
  uint64_t p2pChannelBytes = 0;
  int32_t runtimeConnect = 0;
  int32_t p2pLLBytes = 0;
};

constexpr uint32_t kSharedSettingsMagic = 0x77534554;  // "wSET"

SharedSettings sharedSettingsOf(const ncclComm* comm);

// "" when `theirs` (from rank `theirRank`) matches `mine`; else the first difference, as
// "<setting>: <mine> here, <theirs> at rank <r>".
std::string settingsDifference(const SharedSettings& mine, const SharedSettings& theirs, int theirRank);

// Gathers every rank's settings through the bootstrap and fails with ncclInvalidUsage, naming
// the setting and the rank, when any differs from this rank's.
[[nodiscard]] Status checkRanksAgree(ncclComm* comm);

}  // namespace weft::core
