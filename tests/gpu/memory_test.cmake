# What each communicator says it holds on the GPU against what the GPU lost (cudaMemGetInfo):
# creation, first use, split, window, destruction (user-pains matrix row 13). Public API only;
# needs a GPU: weft_gpu_memory_test [-n ranks].
weft_public_api_gpu_test(weft_gpu_memory_test memory_test.cc gpu_memory 300 ARGS -n 2)
