# Bad and unusual buffers handed to collectives (host, freed, short, overlapping; pinned, managed,
# pool, cuMem spans, graph allocations); public API only. Needs a GPU: weft_gpu_misuse_test;
# --observe with another libnccl.so.2 first on LD_LIBRARY_PATH shows what that library does.
add_executable(weft_gpu_misuse_test ${CMAKE_CURRENT_LIST_DIR}/misuse_test.cc)
target_include_directories(weft_gpu_misuse_test PRIVATE ${WEFT_GEN_INCLUDE})
target_link_libraries(weft_gpu_misuse_test PRIVATE weft_shared CUDA::cudart_static CUDA::cuda_driver)
target_link_options(weft_gpu_misuse_test PRIVATE -Wl,--enable-new-dtags)
target_compile_options(weft_gpu_misuse_test PRIVATE -Wall -Wextra)
if(WEFT_GPU_TESTS)
  add_test(NAME gpu_misuse COMMAND weft_gpu_misuse_test)
  set_tests_properties(gpu_misuse PROPERTIES LABELS gpu TIMEOUT 300)
endif()
