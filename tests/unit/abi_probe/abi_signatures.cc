// Prints the mangled C++ type of every entry point declared in nccl.h, one per line. Built twice
// (NVIDIA's header, weft's) like abi_probe.c; equal output means equal parameter and return types,
// which the C probe cannot see. The typedef names of NCCL's anonymous enums and structs are part of
// the mangling, so a renamed or retyped parameter shows up as a difference.
#include <cstdio>
#include <typeinfo>

#include <nccl.h>

#if defined(WEFT_PROBE_EXPECT_WEFT) && !defined(WEFT_VERSION_STRING)
#error "abi_signatures: expected weft's nccl.h but found another one on the include path"
#endif
#if defined(WEFT_PROBE_EXPECT_NVIDIA) && defined(WEFT_VERSION_STRING)
#error "abi_signatures: expected NVIDIA's nccl.h but found weft's on the include path"
#endif

#define SIG(fn)                                                         \
  std::printf("%s %s\n", #fn, typeid(decltype(fn)).name());            \
  std::printf("p%s %s\n", #fn, typeid(decltype(p##fn)).name())

int main() {
  SIG(ncclMemAlloc);
  SIG(ncclMemFree);
  SIG(ncclGetVersion);
  SIG(ncclGetUniqueId);
  SIG(ncclCommInitRankConfig);
  SIG(ncclCommInitRank);
  SIG(ncclCommInitAll);
  SIG(ncclCommFinalize);
  SIG(ncclCommDestroy);
  SIG(ncclCommAbort);
  SIG(ncclCommRevoke);
  SIG(ncclCommSplit);
  SIG(ncclCommShrink);
  SIG(ncclCommInitRankScalable);
  SIG(ncclGetErrorString);
  SIG(ncclGetLastError);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  SIG(ncclResetDebugInit);
#pragma GCC diagnostic pop
  SIG(ncclCommGetAsyncError);
  SIG(ncclCommCount);
  SIG(ncclCommCuDevice);
  SIG(ncclCommUserRank);
  SIG(ncclCommRegister);
  SIG(ncclCommDeregister);
  SIG(ncclCommWindowRegister);
  SIG(ncclCommWindowDeregister);
  SIG(ncclRedOpCreatePreMulSum);
  SIG(ncclRedOpDestroy);
  SIG(ncclReduce);
  SIG(ncclBcast);
  SIG(ncclBroadcast);
  SIG(ncclAllReduce);
  SIG(ncclReduceScatter);
  SIG(ncclAllGather);
  SIG(ncclAlltoAll);
  SIG(ncclGather);
  SIG(ncclScatter);
  SIG(ncclSend);
  SIG(ncclRecv);
  SIG(ncclGroupStart);
  SIG(ncclGroupEnd);
  SIG(ncclGroupSimulateEnd);
  // Struct tags and typedef identities, as the mangler spells them.
  std::printf("ncclConfig_t %s\n", typeid(ncclConfig_t).name());
  std::printf("ncclSimInfo_t %s\n", typeid(ncclSimInfo_t).name());
  std::printf("ncclUniqueId %s\n", typeid(ncclUniqueId).name());
  std::printf("ncclComm_t %s\n", typeid(ncclComm_t).name());
  std::printf("ncclWindow_t %s\n", typeid(ncclWindow_t).name());
  return 0;
}
