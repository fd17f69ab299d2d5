# NCCL's device API on weft's windows: a kernel compiled against NCCL's own nccl_device.h (a client's
# header, not weft's: found beside the CUDA headers, where NCCL's package puts it; skipped without).
# weft_gpu_device_api_test [-n ranks] [-m procs|threads]
find_path(WEFT_NCCL_DEVICE_H nccl_device.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
if(WEFT_NCCL_DEVICE_H AND NOT WEFT_GPU STREQUAL "HIP")
  add_executable(weft_gpu_device_api_test ${CMAKE_CURRENT_LIST_DIR}/device_api_test.cu)
  # weft's nccl.h first: nccl_device.h includes <nccl.h>.
  target_include_directories(weft_gpu_device_api_test BEFORE PRIVATE ${WEFT_GEN_INCLUDE})
  target_include_directories(weft_gpu_device_api_test PRIVATE ${WEFT_NCCL_DEVICE_H})
  target_compile_options(weft_gpu_device_api_test PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--std=c++17>)
  target_link_libraries(weft_gpu_device_api_test PRIVATE weft_shared CUDA::cudart_static)
  target_link_options(weft_gpu_device_api_test PRIVATE -Wl,--enable-new-dtags)
  set_target_properties(weft_gpu_device_api_test PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  if(WEFT_GPU_TESTS)
    add_test(NAME gpu_device_api COMMAND weft_gpu_device_api_test)
    set_tests_properties(gpu_device_api PROPERTIES LABELS gpu TIMEOUT 120)
  endif()
else()
  message(STATUS "nccl_device.h not found: weft_gpu_device_api_test is not built")
endif()
