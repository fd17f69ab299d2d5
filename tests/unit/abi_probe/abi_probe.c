/* Prints, one "name value" per line, everything about nccl.h that a compiled client depends on:
 * type sizes and alignments, field offsets, enum and macro values, initializer contents.
 * It is built twice, once against NVIDIA's nccl.h and once against weft's; a ctest compares the
 * two outputs line by line. Plain C on purpose: C clients must see the same layout as C++ ones. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#if defined(WEFT_PROBE_EXPECT_WEFT) && !defined(WEFT_VERSION_STRING)
#error "abi_probe: expected weft's nccl.h but found another one on the include path"
#endif
#if defined(WEFT_PROBE_EXPECT_NVIDIA) && defined(WEFT_VERSION_STRING)
#error "abi_probe: expected NVIDIA's nccl.h but found weft's on the include path"
#endif

#define INT(expr) printf("%-48s %lld\n", #expr, (long long)(expr))
#define SIZE(type) printf("sizeof(%s) %zu alignof %zu\n", #type, sizeof(type), (size_t)_Alignof(type))
#define FIELD(type, field)                                                                     \
  printf("%s.%s offset %zu size %zu\n", #type, #field, offsetof(type, field), \
         sizeof(((type*)0)->field))

/* Floats are printed exactly (hex) so that -1.0f and -1.0 would differ only by type size. */
static void printFloat(const char* name, float f, size_t size) {
  printf("%-48s %a (size %zu)\n", name, (double)f, size);
}

static void printConfig(const char* label, const ncclConfig_t* c) {
  printf("%s.size %zu\n", label, c->size);
  printf("%s.magic 0x%x\n", label, c->magic);
  printf("%s.version %u\n", label, c->version);
  printf("%s.ints %d %d %d %d %d %d %d %d %d %d %d %d\n", label, c->blocking, c->cgaClusterSize,
         c->minCTAs, c->maxCTAs, c->splitShare, c->trafficClass, c->collnetEnable, c->CTAPolicy,
         c->shrinkShare, c->nvlsCTAs, c->nChannelsPerNetPeer, c->nvlinkCentricSched);
  printf("%s.pointers %d %d\n", label, c->netName == NULL, c->commName == NULL);
}

int main(void) {
  /* Versions. */
  INT(NCCL_MAJOR);
  INT(NCCL_MINOR);
  INT(NCCL_PATCH);
  printf("NCCL_SUFFIX \"%s\" size %zu\n", NCCL_SUFFIX, sizeof(NCCL_SUFFIX));
  INT(NCCL_VERSION_CODE);
  INT(NCCL_VERSION(2, 8, 4));
  INT(NCCL_VERSION(2, 8, 0));
  INT(NCCL_VERSION(1, 9, 9));
  INT(NCCL_VERSION(2, 9, 0));
  INT(NCCL_VERSION(2, 28, 9));
  INT(NCCL_VERSION(3, 0, 0));
  INT(NCCL_VERSION(3, 2, 1));

  /* Constants and flags. */
  INT(NCCL_UNIQUE_ID_BYTES);
  INT(NCCL_SPLIT_NOCOLOR);
  INT(NCCL_CONFIG_UNDEF_INT);
  printf("NCCL_CONFIG_UNDEF_PTR is-null %d\n", NCCL_CONFIG_UNDEF_PTR == NULL);
  printf("NCCL_COMM_NULL is-null %d\n", NCCL_COMM_NULL == NULL);
  printFloat("NCCL_UNDEF_FLOAT", NCCL_UNDEF_FLOAT, sizeof(NCCL_UNDEF_FLOAT));
  INT(NCCL_WIN_DEFAULT);
  INT(NCCL_WIN_COLL_SYMMETRIC);
  INT(NCCL_WIN_REQUIRED_ALIGNMENT);
  INT(NCCL_CTA_POLICY_DEFAULT);
  INT(NCCL_CTA_POLICY_EFFICIENCY);
  INT(NCCL_CTA_POLICY_ZERO);
  INT(NCCL_SHRINK_DEFAULT);
  INT(NCCL_SHRINK_ABORT);
  INT(NCCL_REVOKE_DEFAULT);

  /* Enums. */
  INT(ncclSuccess);
  INT(ncclUnhandledCudaError);
  INT(ncclSystemError);
  INT(ncclInternalError);
  INT(ncclInvalidArgument);
  INT(ncclInvalidUsage);
  INT(ncclRemoteError);
  INT(ncclInProgress);
  INT(ncclNumResults);
  INT(ncclNumOps_dummy);
  INT(ncclSum);
  INT(ncclProd);
  INT(ncclMax);
  INT(ncclMin);
  INT(ncclAvg);
  INT(ncclNumOps);
  INT(ncclMaxRedOp);
  INT(ncclInt8);
  INT(ncclChar);
  INT(ncclUint8);
  INT(ncclInt32);
  INT(ncclInt);
  INT(ncclUint32);
  INT(ncclInt64);
  INT(ncclUint64);
  INT(ncclFloat16);
  INT(ncclHalf);
  INT(ncclFloat32);
  INT(ncclFloat);
  INT(ncclFloat64);
  INT(ncclDouble);
  INT(ncclBfloat16);
  INT(ncclFloat8e4m3);
  INT(ncclFloat8e5m2);
  INT(ncclNumTypes);
  INT(ncclScalarDevice);
  INT(ncclScalarHostImmediate);

  /* Types. */
  SIZE(ncclResult_t);
  SIZE(ncclRedOp_dummy_t);
  SIZE(ncclRedOp_t);
  SIZE(ncclDataType_t);
  SIZE(ncclScalarResidence_t);
  SIZE(ncclComm_t);
  SIZE(ncclWindow_t);
  SIZE(ncclUniqueId);
  FIELD(ncclUniqueId, internal);
  SIZE(ncclConfig_t);
  SIZE(struct ncclConfig_v22800);
  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);
  SIZE(ncclSimInfo_t);
  SIZE(struct ncclSimInfo_v22200);
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);

  /* Initializers, as a variable and as an array element. */
  {
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    ncclConfig_t arr[2] = {NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_INITIALIZER};
    printConfig("NCCL_CONFIG_INITIALIZER", &c);
    printConfig("NCCL_CONFIG_INITIALIZER[1]", &arr[1]);
  }
  {
    ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
    printf("NCCL_SIM_INFO_INITIALIZER.size %zu\n", s.size);
    printf("NCCL_SIM_INFO_INITIALIZER.magic 0x%x\n", s.magic);
    printf("NCCL_SIM_INFO_INITIALIZER.version %u\n", s.version);
    printFloat("NCCL_SIM_INFO_INITIALIZER.estimatedTime", s.estimatedTime, sizeof(s.estimatedTime));
  }
  return 0;
}
