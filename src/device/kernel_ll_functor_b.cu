// LL functor kernels, part 1 (kernel_ll_functor.cuh).
#define WEFT_LL_FUNCTOR_PART 1
#define WEFT_LL_FUNCTOR_ENTRY llFunctorKernelEntryPart1
#include "device/kernel_ll_functor.cuh"
