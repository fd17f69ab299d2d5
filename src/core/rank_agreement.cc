#include "core/rank_agreement.h"

#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/communicator.h"
#include "core/log.h"

namespace weft::core {

SharedSettings sharedSettingsOf(const ncclComm* comm) {
  SharedSettings s;
  s.magic = kSharedSettingsMagic;
  s.nChannels = comm->nChannels;
  s.p2pChannels = comm->p2pChannels;
  s.p2pOnlyChannels = comm->p2pOnlyChannels;
  for (int p = 0; p < dev::kNumProtos; ++p) s.protoStepBytes[p] = comm->protoStepBytes[p];
  s.treesConnected = comm->treesConnected ? 1 : 0;
  s.p2pMaxChannels = comm->p2pMaxChannels;
  s.p2pChannelBytes = comm->p2pChannelBytes;
  s.runtimeConnect = comm->runtimeConnect ? 1 : 0;
  s.p2pLLBytes = (int32_t)comm->p2pLLBytes;
  return s;
}

namespace {

std::string differs(const char* what, long long mine, long long theirs, int theirRank) {
  return std::string(what) + ": " + std::to_string(mine) + " here, " + std::to_string(theirs) + " at rank " +
         std::to_string(theirRank);
}

}  // namespace

std::string settingsDifference(const SharedSettings& mine, const SharedSettings& theirs, int theirRank) {
  if (theirs.magic != kSharedSettingsMagic)
    return "rank " + std::to_string(theirRank) + " sent settings that are not weft's (another library version?)";
  if (mine.nChannels != theirs.nChannels)
    return differs("channels (NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS / config)", mine.nChannels, theirs.nChannels,
                   theirRank);
  if (mine.p2pChannels != theirs.p2pChannels)
    return differs("NCCL_WEFT_P2P_NCHANNELS", mine.p2pChannels, theirs.p2pChannels, theirRank);
  if (mine.p2pOnlyChannels != theirs.p2pOnlyChannels)
    return differs("NCCL_WEFT_P2P_SIMPLE_NCHANNELS", mine.p2pOnlyChannels, theirs.p2pOnlyChannels, theirRank);
  static const char* const kStepSetting[dev::kNumProtos] = {"NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE",
                                                            "NCCL_BUFFSIZE"};
  for (int p = 0; p < dev::kNumProtos; ++p)
    if (mine.protoStepBytes[p] != theirs.protoStepBytes[p])
      return differs(kStepSetting[p], (long long)mine.protoStepBytes[p] * dev::kSteps,
                     (long long)theirs.protoStepBytes[p] * dev::kSteps, theirRank);
  if (mine.treesConnected != theirs.treesConnected)
    return differs("tree connections (NCCL_ALGO)", mine.treesConnected, theirs.treesConnected, theirRank);
  if (mine.p2pMaxChannels != theirs.p2pMaxChannels)
    return differs("NCCL_WEFT_P2P_MAX_CHANNELS", mine.p2pMaxChannels, theirs.p2pMaxChannels, theirRank);
  if (mine.p2pChannelBytes != theirs.p2pChannelBytes)
    return differs("NCCL_WEFT_P2P_CHANNEL_BYTES", (long long)mine.p2pChannelBytes, (long long)theirs.p2pChannelBytes,
                   theirRank);
  if (mine.runtimeConnect != theirs.runtimeConnect)
    return differs("NCCL_RUNTIME_CONNECT", mine.runtimeConnect, theirs.runtimeConnect, theirRank);
  if (mine.p2pLLBytes != theirs.p2pLLBytes)
    return differs("NCCL_P2P_LL_THRESHOLD", mine.p2pLLBytes, theirs.p2pLLBytes, theirRank);
  return "";
}

Status checkRanksAgree(ncclComm* comm) {
  if (comm->nRanks == 1) return ncclSuccess;
  std::vector<SharedSettings> all(comm->nRanks);
  all[comm->rank] = sharedSettingsOf(comm);
  WEFT_TRY(comm->bootstrap->allGather(all.data(), sizeof(SharedSettings)));
  for (int r = 0; r < comm->nRanks; ++r) {
    const std::string why = settingsDifference(all[comm->rank], all[r], r);
    if (why.empty()) continue;
    WEFT_WARN("communicator creation (rank %d of %d): the ranks do not share their settings; %s. Start every rank "
              "with the same environment and configuration", comm->rank, comm->nRanks, why.c_str());
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

}  // namespace weft::core
