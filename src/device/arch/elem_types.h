// The 16-bit and 8-bit floating-point element types under the names the CUDA headers give them
// (__half, __nv_bfloat16, __nv_fp8_e4m3, __nv_fp8_e5m2, with their conversions), for device code
// and for host code that encodes scalars (enqueue/redop.cc). CUDA: its own headers. HIP: hip_fp16.h
// for __half, and hip_types.h for the rest, which ROCm 5.2 does not provide under these names.
#pragma once

#if defined(WEFT_GPU_HIP)
#include "device/arch/hip_types.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif
