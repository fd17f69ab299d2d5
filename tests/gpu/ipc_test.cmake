# GPU IPC test: cuMem and legacy IPC between 2 processes, ncclMemAlloc. Needs a GPU to run:
#   build/tests/gpu/weft_gpu_ipc_test                      (cuMem and legacy IPC between 2 processes)
#   NCCL_CUMEM_ENABLE=0 build/tests/gpu/weft_gpu_ipc_test  (ncclMemAlloc's cudaMalloc fallback)
# -DWEFT_GPU_TESTS=ON also registers them with ctest under the label "gpu" (ctest -L gpu).
option(WEFT_GPU_TESTS "Register the GPU test programs with ctest (needs a GPU)" OFF)

add_executable(weft_gpu_ipc_test ${CMAKE_CURRENT_LIST_DIR}/ipc_test.cu)
target_link_libraries(weft_gpu_ipc_test PRIVATE weft_internal)
target_compile_options(weft_gpu_ipc_test PRIVATE -Xcompiler=-Wall)

if(WEFT_GPU_TESTS)
  add_test(NAME gpu_ipc COMMAND weft_gpu_ipc_test)
  add_test(NAME gpu_ipc_no_cumem COMMAND weft_gpu_ipc_test)
  set_tests_properties(gpu_ipc_no_cumem PROPERTIES ENVIRONMENT "NCCL_CUMEM_ENABLE=0")
  set_tests_properties(gpu_ipc gpu_ipc_no_cumem PROPERTIES LABELS gpu TIMEOUT 300)
endif()

# Peer failure (SIGKILL, SIGSTOP of one rank's process) during collectives, send/recv and graph
# replays; public API only, linked like coll_sweep. Needs a GPU: weft_gpu_fault_test -n 3 -g <gpus>.
add_executable(weft_gpu_fault_test ${CMAKE_CURRENT_LIST_DIR}/fault_test.cc)
target_include_directories(weft_gpu_fault_test PRIVATE ${WEFT_GEN_INCLUDE})
target_link_libraries(weft_gpu_fault_test PRIVATE weft_shared CUDA::cudart_static Threads::Threads)
target_link_options(weft_gpu_fault_test PRIVATE -Wl,--enable-new-dtags)
target_compile_options(weft_gpu_fault_test PRIVATE -Wall -Wextra)
if(WEFT_GPU_TESTS)
  add_test(NAME gpu_fault COMMAND weft_gpu_fault_test -n 3 -g 1)
  set_tests_properties(gpu_fault PROPERTIES LABELS gpu TIMEOUT 600)
endif()
