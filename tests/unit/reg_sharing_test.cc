// The registration-sharing messages of zero-copy point-to-point (transport/p2p/reg_sharing.h):
// every field a peer sends is checked before anything is mapped. The transfers themselves run on
// a GPU (tests/gpu/zero_copy_test.cc); the device protocol's words are pinned here.
#include "transport/p2p/reg_sharing.h"

#include <gtest/gtest.h>

#include <cstring>

#include "device/abi.h"
#include "transport/p2p/conn_layout.h"

namespace weft::transport::p2p {
namespace {

RegShareMsg goodShare(runtime::MemKind kind) {
  RegShareMsg m;
  std::memset(&m, 0, sizeof(m));
  m.magic = kRegShareMagic;
  m.kind = (uint32_t)RegShareKind::kShare;
  m.token = 0x7765000000000001ull;
  m.begin = 0x7f0000200000ull;
  m.bytes = 1 << 20;
  m.desc.magic = runtime::kIpcMemDescMagic;
  m.desc.kind = (uint32_t)kind;
  m.desc.allocBytes = 2 << 20;
  m.desc.offset = 4096;
  m.desc.bytes = 1 << 20;
  m.desc.ownerPid = 1234;
  m.desc.ownerDevice = 0;
  return m;
}

const char* refusal(const RegShareMsg& m, bool withFd, size_t bytes = sizeof(RegShareMsg)) {
  RegShareMsg out;
  const char* why = nullptr;
  return checkRegShareMsg(&m, bytes, withFd, &out, &why) ? nullptr : why;
}

TEST(RegSharing, WellFormedMessagesPass) {
  EXPECT_EQ(refusal(goodShare(runtime::MemKind::kCuMemFd), true), nullptr);
  EXPECT_EQ(refusal(goodShare(runtime::MemKind::kLegacyCudaIpc), false), nullptr);
  RegShareMsg w = goodShare(runtime::MemKind::kNone);
  w.kind = (uint32_t)RegShareKind::kWithdraw;
  EXPECT_EQ(refusal(w, false), nullptr) << "a withdrawal carries no descriptor";
}

TEST(RegSharing, EveryBadFieldIsRefused) {
  const RegShareMsg good = goodShare(runtime::MemKind::kCuMemFd);
  EXPECT_NE(refusal(good, true, sizeof(RegShareMsg) - 1), nullptr);
  RegShareMsg m = good;
  m.magic ^= 1;
  EXPECT_NE(refusal(m, true), nullptr);
  m = good;
  m.kind = 7;
  EXPECT_NE(refusal(m, true), nullptr);
  m = good;
  m.token = 0;
  EXPECT_NE(refusal(m, true), nullptr);
  m = good;
  m.bytes = m.desc.bytes + 1;
  EXPECT_NE(refusal(m, true), nullptr) << "the range must be what the descriptor maps";
  m = good;
  m.desc.offset = m.desc.allocBytes;
  EXPECT_NE(refusal(m, true), nullptr) << "a region past its allocation";
  m = good;
  m.desc.magic = 0;
  EXPECT_NE(refusal(m, true), nullptr);
  EXPECT_NE(refusal(good, false), nullptr) << "cuMem memory needs its fd";
  EXPECT_NE(refusal(goodShare(runtime::MemKind::kLegacyCudaIpc), true), nullptr) << "legacy memory has no fd";
  m = good;
  m.kind = (uint32_t)RegShareKind::kWithdraw;
  EXPECT_NE(refusal(m, true), nullptr) << "a withdrawal with an fd";
}

// The device protocol writes words after head and tail (device/algo/p2p_direct.cuh); they must
// stay inside the counter lines the transport lays out.
TEST(RegSharing, OfferAndMarkerWordsFitTheCounterLines) {
  for (int w : {dev::kOfferSeqWord, dev::kOfferTokenWord, dev::kOfferOffsetWord, dev::kOfferBytesWord, dev::kMarkerWord,
                dev::kDirectCountWord}) {
    EXPECT_GT(w, 0) << "word 0 is head or tail itself";
    EXPECT_LT(w, dev::kCounterLineWords);
    EXPECT_LE((size_t)(w + 1) * 8, kHeadOffset - kTailOffset);
    EXPECT_LE(kHeadOffset + (size_t)(w + 1) * 8, kCounterBlockBytes);
  }
}

}  // namespace
}  // namespace weft::transport::p2p
