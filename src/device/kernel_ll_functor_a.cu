// LL functor kernels, part 0 (kernel_ll_functor.cuh).
#define WEFT_LL_FUNCTOR_PART 0
#define WEFT_LL_FUNCTOR_ENTRY llFunctorKernelEntryPart0
#include "device/kernel_ll_functor.cuh"
