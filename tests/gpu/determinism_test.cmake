# Reductions give the same bits every time, on every rank, after other calls and in CUDA graphs
# (user-pains matrix row 4); public API only. Needs a GPU: weft_gpu_determinism_test [-n ranks].
weft_public_api_gpu_test(weft_gpu_determinism_test determinism_test.cc gpu_determinism 300 LIBS Threads::Threads)
