# weft_kernel_harness: the device data path tested on its own (tests/gpu/kernel_harness.cu).
add_executable(weft_kernel_harness
  ${CMAKE_CURRENT_LIST_DIR}/kernel_harness.cu
  ${CMAKE_CURRENT_LIST_DIR}/harness_fabric.cu
  ${CMAKE_CURRENT_LIST_DIR}/harness_data.cu
  ${CMAKE_CURRENT_LIST_DIR}/harness_runner.cu)
target_link_libraries(weft_kernel_harness PRIVATE weft_internal)
target_compile_options(weft_kernel_harness PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr>)
set_target_properties(weft_kernel_harness PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
