// The public header's ABI, value by value, against NCCL 2.28.9 (reference/nccl-api.md §2-4).
// Most checks are static_asserts, so a wrong value stops the build; the rest are runtime checks of
// initializer contents and macro arithmetic.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "nccl.h"

namespace {

// --- Versions -------------------------------------------------------------------------------
static_assert(NCCL_MAJOR == 2 && NCCL_MINOR == 28 && NCCL_PATCH == 9, "NCCL API level must be 2.28.9");
static_assert(NCCL_VERSION_CODE == 22809, "NCCL_VERSION_CODE");
static_assert(NCCL_VERSION(2, 28, 9) == NCCL_VERSION_CODE, "NCCL_VERSION of our own release");
// Up to 2.8 the packing was X*1000 + Y*100 + Z; from 2.9 on it is X*10000 + Y*100 + Z.
static_assert(NCCL_VERSION(2, 8, 4) == 2804, "legacy branch");
static_assert(NCCL_VERSION(2, 8, 0) == 2800, "legacy branch, last minor");
static_assert(NCCL_VERSION(1, 3, 0) == 1300, "legacy branch, major 1");
static_assert(NCCL_VERSION(2, 9, 0) == 20900, "first release with the new packing");
static_assert(NCCL_VERSION(2, 14, 3) == 21403, "new packing");
static_assert(NCCL_VERSION(2, 30, 7) == 23007, "new packing");
static_assert(NCCL_VERSION(3, 0, 0) == 30000, "major 3 uses the new packing");
static_assert(NCCL_VERSION(3, 1, 0) == 30100, "major 3 with a small minor uses the new packing");

TEST(Abi, SuffixIsEmptyString) {
  EXPECT_STREQ(NCCL_SUFFIX, "");
  EXPECT_EQ(sizeof(NCCL_SUFFIX), 1u);
}

// --- Constants ------------------------------------------------------------------------------
static_assert(NCCL_UNIQUE_ID_BYTES == 128, "NCCL_UNIQUE_ID_BYTES");
static_assert(NCCL_SPLIT_NOCOLOR == -1, "NCCL_SPLIT_NOCOLOR");
static_assert(NCCL_CONFIG_UNDEF_INT == INT_MIN, "NCCL_CONFIG_UNDEF_INT");
static_assert(NCCL_WIN_DEFAULT == 0x00 && NCCL_WIN_COLL_SYMMETRIC == 0x01, "window flags");
static_assert(NCCL_WIN_REQUIRED_ALIGNMENT == 4096, "window alignment");
static_assert(NCCL_CTA_POLICY_DEFAULT == 0x00 && NCCL_CTA_POLICY_EFFICIENCY == 0x01 &&
              NCCL_CTA_POLICY_ZERO == 0x02, "CTA policies");
static_assert(NCCL_SHRINK_DEFAULT == 0x00 && NCCL_SHRINK_ABORT == 0x01, "shrink flags");
static_assert(NCCL_REVOKE_DEFAULT == 0x00, "revoke flags");

TEST(Abi, PointerAndFloatConstants) {
  // NULL (not nullptr: the header is C), so compare rather than EXPECT_EQ a pointer type.
  EXPECT_TRUE(NCCL_CONFIG_UNDEF_PTR == nullptr);
  EXPECT_TRUE(NCCL_COMM_NULL == nullptr);
  // A float literal, not a double: the initializer stores it in a float field.
  static_assert(std::is_same<decltype(NCCL_UNDEF_FLOAT), float>::value, "NCCL_UNDEF_FLOAT is a float");
  EXPECT_EQ(NCCL_UNDEF_FLOAT, -1.0f);
}

// --- Enums ----------------------------------------------------------------------------------
static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 &&
              ncclInternalError == 3 && ncclInvalidArgument == 4 && ncclInvalidUsage == 5 &&
              ncclRemoteError == 6 && ncclInProgress == 7 && ncclNumResults == 8, "ncclResult_t");
static_assert(sizeof(ncclResult_t) == 4, "ncclResult_t is int-sized");

static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4 &&
              ncclNumOps == 5, "ncclRedOp_t");
static_assert(ncclMaxRedOp == 0x7fffffff, "ncclMaxRedOp");
static_assert(ncclNumOps_dummy == 5 && sizeof(ncclRedOp_dummy_t) == 4, "ncclRedOp_dummy_t");
static_assert(sizeof(ncclRedOp_t) == 4, "ncclRedOp_t is int-sized");

static_assert(ncclInt8 == 0 && ncclChar == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclInt == 2 &&
              ncclUint32 == 3 && ncclInt64 == 4 && ncclUint64 == 5 && ncclFloat16 == 6 &&
              ncclHalf == 6 && ncclFloat32 == 7 && ncclFloat == 7 && ncclFloat64 == 8 &&
              ncclDouble == 8 && ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 && ncclFloat8e5m2 == 11 &&
              ncclNumTypes == 12, "ncclDataType_t");
static_assert(sizeof(ncclDataType_t) == 4, "ncclDataType_t is int-sized");

static_assert(ncclScalarDevice == 0 && ncclScalarHostImmediate == 1, "ncclScalarResidence_t");
static_assert(sizeof(ncclScalarResidence_t) == 4, "ncclScalarResidence_t is int-sized");

// --- Handles and ids ------------------------------------------------------------------------
static_assert(std::is_same<ncclComm_t, ncclComm*>::value, "ncclComm_t is a pointer to struct ncclComm");
static_assert(std::is_same<ncclWindow_t, ncclWindow_vidmem*>::value, "ncclWindow_t");
static_assert(sizeof(ncclUniqueId) == 128 && alignof(ncclUniqueId) == 1, "ncclUniqueId: 128 bytes, align 1");
static_assert(offsetof(ncclUniqueId, internal) == 0 && sizeof(ncclUniqueId::internal) == 128, "ncclUniqueId");
static_assert(std::is_trivially_copyable<ncclUniqueId>::value, "passed by value across the ABI");

// --- ncclConfig_t (2.28: ncclConfig_v22800, 80 bytes) -----------------------------------------
static_assert(std::is_same<ncclConfig_t, ncclConfig_v22800>::value, "struct tag ncclConfig_v22800");
static_assert(sizeof(ncclConfig_t) == 80 && alignof(ncclConfig_t) == 8, "ncclConfig_t size/align");
#define WEFT_FIELD(type, field, offset)                                                         \
  static_assert(offsetof(ncclConfig_t, field) == (offset), "ncclConfig_t::" #field " offset"); \
  static_assert(std::is_same<decltype(ncclConfig_t::field), type>::value, "ncclConfig_t::" #field " type")
WEFT_FIELD(size_t, size, 0);
WEFT_FIELD(unsigned int, magic, 8);
WEFT_FIELD(unsigned int, version, 12);
WEFT_FIELD(int, blocking, 16);
WEFT_FIELD(int, cgaClusterSize, 20);
WEFT_FIELD(int, minCTAs, 24);
WEFT_FIELD(int, maxCTAs, 28);
WEFT_FIELD(const char*, netName, 32);
WEFT_FIELD(int, splitShare, 40);
WEFT_FIELD(int, trafficClass, 44);
WEFT_FIELD(const char*, commName, 48);
WEFT_FIELD(int, collnetEnable, 56);
WEFT_FIELD(int, CTAPolicy, 60);
WEFT_FIELD(int, shrinkShare, 64);
WEFT_FIELD(int, nvlsCTAs, 68);
WEFT_FIELD(int, nChannelsPerNetPeer, 72);
WEFT_FIELD(int, nvlinkCentricSched, 76);
#undef WEFT_FIELD

TEST(Abi, ConfigInitializerContents) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, 80u);
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, 22809u);
  for (int v : {c.blocking, c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.splitShare, c.trafficClass,
                c.collnetEnable, c.CTAPolicy, c.shrinkShare, c.nvlsCTAs, c.nChannelsPerNetPeer,
                c.nvlinkCentricSched}) {
    EXPECT_EQ(v, INT_MIN);
  }
  EXPECT_EQ(c.netName, nullptr);
  EXPECT_EQ(c.commName, nullptr);
}

TEST(Abi, ConfigInitializerIsValidInC89StyleAggregate) {
  // The initializer must also work for arrays and members (brace-enclosed, no designators).
  ncclConfig_t many[2] = {NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_INITIALIZER};
  struct Holder { int tag; ncclConfig_t config; } h = {7, NCCL_CONFIG_INITIALIZER};
  EXPECT_EQ(many[1].magic, 0xcafebeefu);
  EXPECT_EQ(h.config.size, sizeof(ncclConfig_t));
  EXPECT_EQ(h.tag, 7);
}

// --- ncclSimInfo_t (ncclSimInfo_v22200, 24 bytes) ---------------------------------------------
static_assert(std::is_same<ncclSimInfo_t, ncclSimInfo_v22200>::value, "struct tag ncclSimInfo_v22200");
static_assert(sizeof(ncclSimInfo_t) == 24 && alignof(ncclSimInfo_t) == 8, "ncclSimInfo_t size/align");
static_assert(offsetof(ncclSimInfo_t, size) == 0 && offsetof(ncclSimInfo_t, magic) == 8 &&
              offsetof(ncclSimInfo_t, version) == 12 && offsetof(ncclSimInfo_t, estimatedTime) == 16,
              "ncclSimInfo_t offsets");
static_assert(std::is_same<decltype(ncclSimInfo_t::estimatedTime), float>::value, "estimatedTime is float");

TEST(Abi, SimInfoInitializerContents) {
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(s.size, 24u);
  EXPECT_EQ(s.magic, 0x74685283u);
  EXPECT_EQ(s.version, 22809u);
  EXPECT_EQ(s.estimatedTime, -1.0f);
}

// --- Entry point signatures -------------------------------------------------------------------
// Parameter and return types as in NCCL's header (top-level const on parameters is not part of
// the type, exactly as for the C ABI).
#define WEFT_SIG(name, ...)                                                           \
  static_assert(std::is_same<decltype(&name), __VA_ARGS__>::value, #name " signature"); \
  static_assert(std::is_same<decltype(&p##name), __VA_ARGS__>::value, "p" #name " signature")
WEFT_SIG(ncclMemAlloc, ncclResult_t (*)(void**, size_t));
WEFT_SIG(ncclMemFree, ncclResult_t (*)(void*));
WEFT_SIG(ncclGetVersion, ncclResult_t (*)(int*));
WEFT_SIG(ncclGetUniqueId, ncclResult_t (*)(ncclUniqueId*));
WEFT_SIG(ncclCommInitRankConfig, ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*));
WEFT_SIG(ncclCommInitRank, ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int));
WEFT_SIG(ncclCommInitAll, ncclResult_t (*)(ncclComm_t*, int, const int*));
WEFT_SIG(ncclCommInitRankScalable, ncclResult_t (*)(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*));
WEFT_SIG(ncclCommFinalize, ncclResult_t (*)(ncclComm_t));
WEFT_SIG(ncclCommDestroy, ncclResult_t (*)(ncclComm_t));
WEFT_SIG(ncclCommAbort, ncclResult_t (*)(ncclComm_t));
WEFT_SIG(ncclCommRevoke, ncclResult_t (*)(ncclComm_t, int));
WEFT_SIG(ncclCommSplit, ncclResult_t (*)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*));
WEFT_SIG(ncclCommShrink, ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int));
WEFT_SIG(ncclGetErrorString, const char* (*)(ncclResult_t));
WEFT_SIG(ncclGetLastError, const char* (*)(ncclComm_t));
WEFT_SIG(ncclCommGetAsyncError, ncclResult_t (*)(ncclComm_t, ncclResult_t*));
WEFT_SIG(ncclCommCount, ncclResult_t (*)(ncclComm_t, int*));
WEFT_SIG(ncclCommCuDevice, ncclResult_t (*)(ncclComm_t, int*));
WEFT_SIG(ncclCommUserRank, ncclResult_t (*)(ncclComm_t, int*));
WEFT_SIG(ncclCommRegister, ncclResult_t (*)(ncclComm_t, void*, size_t, void**));
WEFT_SIG(ncclCommDeregister, ncclResult_t (*)(ncclComm_t, void*));
WEFT_SIG(ncclCommWindowRegister, ncclResult_t (*)(ncclComm_t, void*, size_t, ncclWindow_t*, int));
WEFT_SIG(ncclCommWindowDeregister, ncclResult_t (*)(ncclComm_t, ncclWindow_t));
WEFT_SIG(ncclRedOpCreatePreMulSum,
         ncclResult_t (*)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t));
WEFT_SIG(ncclRedOpDestroy, ncclResult_t (*)(ncclRedOp_t, ncclComm_t));
WEFT_SIG(ncclReduce, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                                      ncclComm_t, cudaStream_t));
WEFT_SIG(ncclBcast, ncclResult_t (*)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
WEFT_SIG(ncclBroadcast, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                                         cudaStream_t));
WEFT_SIG(ncclAllReduce, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                         ncclComm_t, cudaStream_t));
WEFT_SIG(ncclReduceScatter, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                             ncclComm_t, cudaStream_t));
WEFT_SIG(ncclAllGather, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t));
WEFT_SIG(ncclAlltoAll, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t));
WEFT_SIG(ncclGather, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
WEFT_SIG(ncclScatter, ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
WEFT_SIG(ncclSend, ncclResult_t (*)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
WEFT_SIG(ncclRecv, ncclResult_t (*)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
WEFT_SIG(ncclGroupStart, ncclResult_t (*)());
WEFT_SIG(ncclGroupEnd, ncclResult_t (*)());
WEFT_SIG(ncclGroupSimulateEnd, ncclResult_t (*)(ncclSimInfo_t*));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
WEFT_SIG(ncclResetDebugInit, void (*)());
#pragma GCC diagnostic pop
#undef WEFT_SIG

}  // namespace
