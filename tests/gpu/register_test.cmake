# ncclCommRegister / ncclCommDeregister on real memory (handles, references, refusals, a collective
# on registered buffers); public API only. Needs a GPU: weft_gpu_register_test [-n ranks];
# --observe with another libnccl.so.2 first on LD_LIBRARY_PATH shows what that library does.
add_executable(weft_gpu_register_test ${CMAKE_CURRENT_LIST_DIR}/register_test.cc)
target_include_directories(weft_gpu_register_test PRIVATE ${WEFT_GEN_INCLUDE})
target_link_libraries(weft_gpu_register_test PRIVATE weft_shared CUDA::cudart_static)
target_link_options(weft_gpu_register_test PRIVATE -Wl,--enable-new-dtags)
target_compile_options(weft_gpu_register_test PRIVATE -Wall -Wextra)
if(WEFT_GPU_TESTS)
  add_test(NAME gpu_register COMMAND weft_gpu_register_test)
  set_tests_properties(gpu_register PROPERTIES LABELS gpu TIMEOUT 120)
endif()
