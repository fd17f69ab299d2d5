# Communicators made and aborted over and over at random moments (during creation, while kernels
# wait, from another thread, in a group), one process per rank; public API only. Needs a GPU:
# weft_gpu_abort_storm_test -n 2 -g <gpus> -s <seconds>.
add_executable(weft_gpu_abort_storm_test ${CMAKE_CURRENT_LIST_DIR}/abort_storm_test.cc)
target_include_directories(weft_gpu_abort_storm_test PRIVATE ${WEFT_GEN_INCLUDE})
target_link_libraries(weft_gpu_abort_storm_test PRIVATE weft_shared CUDA::cudart_static Threads::Threads)
target_link_options(weft_gpu_abort_storm_test PRIVATE -Wl,--enable-new-dtags)
target_compile_options(weft_gpu_abort_storm_test PRIVATE -Wall -Wextra)
if(WEFT_GPU_TESTS)
  add_test(NAME gpu_abort_storm COMMAND weft_gpu_abort_storm_test -n 2 -g 1 -s 30)
  set_tests_properties(gpu_abort_storm PROPERTIES LABELS gpu TIMEOUT 300)
endif()
