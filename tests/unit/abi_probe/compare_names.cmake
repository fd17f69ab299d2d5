# Compares the names two nccl.h headers declare: every identifier starting with nccl/pnccl after
# preprocessing, and every macro starting with NCCL_. A function, type or macro present in one
# header but not the other fails the test.
# cmake -DCC=<C compiler> -DREFERENCE_INCLUDE=<dir> -DCANDIDATE_INCLUDE=<dir> -DCUDA_INCLUDE=<dir>
#       -DWORK_DIR=<dir> -P compare_names.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
set(src ${WORK_DIR}/include_nccl.c)
file(WRITE ${src} "#include <nccl.h>\n")

function(collect_names include_dir out_var)
  execute_process(COMMAND ${CC} -E -I${include_dir} -I${CUDA_INCLUDE} ${src}
                  OUTPUT_VARIABLE decls RESULT_VARIABLE rc1)
  execute_process(COMMAND ${CC} -E -dM -I${include_dir} -I${CUDA_INCLUDE} ${src}
                  OUTPUT_VARIABLE macros RESULT_VARIABLE rc2)
  if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
    message(FATAL_ERROR "preprocessing nccl.h from ${include_dir} failed")
  endif()
  string(REGEX MATCHALL "[A-Za-z0-9_]*nccl[A-Za-z0-9_]*" ids "${decls}")
  string(REGEX MATCHALL "#define NCCL_[A-Za-z0-9_]*" defs "${macros}")
  set(names ${ids} ${defs})
  list(FILTER names INCLUDE REGEX "^(p?nccl|#define NCCL_)")
  list(REMOVE_DUPLICATES names)
  list(SORT names)
  set(${out_var} ${names} PARENT_SCOPE)
endfunction()

collect_names(${REFERENCE_INCLUDE} ref)
collect_names(${CANDIDATE_INCLUDE} cand)
list(LENGTH ref n_ref)
if(n_ref LESS 100)
  message(FATAL_ERROR "only ${n_ref} names found in the reference header; the probe is broken")
endif()
set(only_ref ${ref})
list(REMOVE_ITEM only_ref ${cand})
set(only_cand ${cand})
list(REMOVE_ITEM only_cand ${ref})
if(only_ref OR only_cand)
  message(FATAL_ERROR "declared names differ.\n  only in NVIDIA's nccl.h: ${only_ref}\n"
                      "  only in weft's nccl.h: ${only_cand}")
endif()
message(STATUS "same ${n_ref} names")
