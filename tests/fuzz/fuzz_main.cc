// The libFuzzer entry of one target (WEFT_FUZZ_TARGET, a function in fuzz_common.h). Logging is off
// (NCCL_DEBUG=NONE) so that the refusals do not flood the output; WEFT_FUZZ_LOG=1 keeps the
// caller's NCCL_DEBUG for a reproducer.
#include <cstdlib>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (getenv("WEFT_FUZZ_LOG") == nullptr) setenv("NCCL_DEBUG", "NONE", 1);  // read once, at the first line
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::WEFT_FUZZ_TARGET(data, size);
  return 0;
}
