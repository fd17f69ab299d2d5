# ncclCommRegister / ncclCommDeregister on real memory (handles, references, refusals, a collective
# on registered buffers); public API only. Needs a GPU: weft_gpu_register_test [-n ranks];
# --observe with another libnccl.so.2 first on LD_LIBRARY_PATH shows what that library does.
weft_public_api_gpu_test(weft_gpu_register_test register_test.cc gpu_register 120)
