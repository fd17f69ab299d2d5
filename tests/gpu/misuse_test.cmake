# Bad and unusual buffers handed to collectives (host, freed, short, overlapping; pinned, managed,
# pool, cuMem spans, graph allocations); public API only. Needs a GPU: weft_gpu_misuse_test;
# --observe with another libnccl.so.2 first on LD_LIBRARY_PATH shows what that library does.
weft_public_api_gpu_test(weft_gpu_misuse_test misuse_test.cc gpu_misuse 300 LIBS CUDA::cuda_driver)
