# Collective correctness programs (coll_sweep, iree_style_test), included from tests/gpu/CMakeLists.txt.
# They use only the public nccl.h (build/include) and link libnccl.so (weft_shared) dynamically, so the
# same binaries also run against NVIDIA's NCCL: LD_LIBRARY_PATH=<dir with libnccl.so.2> ./coll_sweep.
# --enable-new-dtags writes RUNPATH instead of RPATH, so LD_LIBRARY_PATH wins over the build path.
# The CUDA runtime is linked statically so that the binaries need nothing but the driver and libnccl.
# Run them through tests/gpu/run_gpu_tests.sh (builds, runs every mode on 1 and 2 GPUs, prints a table).
add_executable(coll_sweep
  coll_sweep.cu sweep_kernels.cu sweep_cases.cc sweep_rank.cc sweep_extras.cc sweep_graphs.cc sweep_graph_edges.cu
  sweep_lifecycle.cc sweep_modes.cc sweep_watch.cc)
target_include_directories(coll_sweep PRIVATE ${WEFT_GEN_INCLUDE})
target_link_libraries(coll_sweep PRIVATE weft_shared CUDA::cudart_static Threads::Threads ${CMAKE_DL_LIBS})
target_link_options(coll_sweep PRIVATE -Wl,--enable-new-dtags)
target_compile_options(coll_sweep PRIVATE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)

add_executable(iree_style_test iree_style_test.c)
target_include_directories(iree_style_test PRIVATE ${WEFT_GEN_INCLUDE})
target_link_libraries(iree_style_test PRIVATE weft_shared CUDA::cudart_static Threads::Threads ${CMAKE_DL_LIBS})
target_link_options(iree_style_test PRIVATE -Wl,--enable-new-dtags)
target_compile_options(iree_style_test PRIVATE -Wall -Wextra)
set_target_properties(iree_style_test PROPERTIES C_STANDARD 11)

# CPU-only check of the sweep's input generator (exactness claims); needs no GPU, so CI runs it.
add_test(NAME coll_sweep_host_check COMMAND coll_sweep --host-check)
set_tests_properties(coll_sweep_host_check PROPERTIES TIMEOUT 120)

# With -DWEFT_GPU_TESTS=ON (the option of tests/gpu/CMakeLists.txt) the quick GPU runs join ctest -L gpu.
if(WEFT_GPU_TESTS)
  add_test(NAME gpu_coll_sweep_quick COMMAND coll_sweep --quick -m all)
  add_test(NAME gpu_iree_style COMMAND iree_style_test)
  set_tests_properties(gpu_coll_sweep_quick gpu_iree_style PROPERTIES LABELS gpu TIMEOUT 1200
                       ENVIRONMENT "NCCL_NVLS_ENABLE=0;TORCH_SYMM_MEM_DISABLE_MULTICAST=1;NVSHMEM_DISABLE_NVLS=1")
endif()
