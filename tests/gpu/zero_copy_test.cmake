# Zero-copy point-to-point from registered buffers (cudaMalloc and ncclMemAlloc, processes or one
# thread driving every rank, eager and in CUDA graphs); public API only. Needs a GPU:
# weft_gpu_zero_copy_test [-n ranks] [-m procs|threads] [--expect-direct]
weft_public_api_gpu_test(weft_gpu_zero_copy_test zero_copy_test.cc gpu_zero_copy 300 ARGS --expect-direct)
