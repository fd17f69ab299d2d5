# The HIP (ROCm) toolchain for WEFT_GPU=HIP: device code (*.cu) is compiled as HIP by LLVM's clang
# for WEFT_HIP_ARCHS; host code stays with the C++ compiler and sees the HIP runtime API through
# weft_hip_runtime (WEFT_GPU_HIP, __HIP_PLATFORM_AMD__, libamdhip64).
#
# Debian/Ubuntu's ROCm packages (hipcc, libamdhip64-dev) need help that a /opt/rocm install does
# not (docs: shared/reference/hip-build.md): CMake's HIP support looks for hip-lang under
# <rocm root>/lib/cmake, but Debian keeps it under lib/<multiarch>/cmake, so a small fake root
# with a link to it is made in the build folder; the device libraries' bitcode path is passed
# explicitly; and the compiler must be LLVM 15's own clang++ (whose lld matches it), not hipcc or
# /usr/bin/clang++ (clang 14 on Debian 12).
set(WEFT_HIP_ARCHS "gfx90a;gfx940" CACHE STRING "AMD GPU targets for device code (gfx90a = MI200, gfx940 = MI300 family)")

set(weft_debian_hip_lang /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang)
if(NOT CMAKE_LIBRARY_ARCHITECTURE)
  set(weft_debian_hip_lang /usr/lib/x86_64-linux-gnu/cmake/hip-lang)
endif()
if(NOT EXISTS /opt/rocm/lib/cmake/hip-lang AND EXISTS ${weft_debian_hip_lang})
  get_filename_component(weft_debian_cmake_dir ${weft_debian_hip_lang} DIRECTORY)
  get_filename_component(weft_debian_lib_dir ${weft_debian_cmake_dir} DIRECTORY)
  set(weft_fake_root ${CMAKE_BINARY_DIR}/hip-root)
  file(MAKE_DIRECTORY ${weft_fake_root}/lib/cmake)
  if(NOT EXISTS ${weft_fake_root}/lib/cmake/hip-lang)
    file(CREATE_LINK ${weft_debian_hip_lang} ${weft_fake_root}/lib/cmake/hip-lang SYMBOLIC)
  endif()
  set(CMAKE_HIP_COMPILER_ROCM_ROOT ${weft_fake_root} CACHE PATH "ROCm root for CMake's HIP support")
  # try_compile and hip-lang's find_dependency(amd_comgr) read the environment, not -D.
  set(ENV{CMAKE_PREFIX_PATH} "${weft_debian_cmake_dir}:$ENV{CMAKE_PREFIX_PATH}")
  if(NOT CMAKE_HIP_COMPILER AND EXISTS /usr/lib/llvm-15/bin/clang++)
    set(CMAKE_HIP_COMPILER /usr/lib/llvm-15/bin/clang++ CACHE FILEPATH "HIP compiler")
  endif()
  set(weft_bitcode ${weft_debian_lib_dir}/amdgcn/bitcode)
  if(EXISTS ${weft_bitcode} AND NOT CMAKE_HIP_FLAGS MATCHES "rocm-device-lib-path")
    set(CMAKE_HIP_FLAGS "${CMAKE_HIP_FLAGS} --rocm-path=/usr --rocm-device-lib-path=${weft_bitcode}")
  endif()
endif()

set(CMAKE_HIP_ARCHITECTURES ${WEFT_HIP_ARCHS})
set(CMAKE_HIP_STANDARD 17)
set(CMAKE_HIP_STANDARD_REQUIRED ON)
set(CMAKE_HIP_VISIBILITY_PRESET hidden)
enable_language(HIP)
# hip-lang asks for every device function to be inlined (-amdgpu-early-inline-all,
# -amdgpu-function-calls=false), a leftover from before AMDGPU supported calls. The device code
# keeps its non-inlined functions on purpose (kernel.cu: one per functor), so that compile time
# and code size stay linear in the number of reductions; drop those options.
if(TARGET hip-lang::device)
  get_target_property(weft_hip_opts hip-lang::device INTERFACE_COMPILE_OPTIONS)
  if(weft_hip_opts MATCHES "^\\$<\\$<COMPILE_LANGUAGE:HIP>:SHELL:-mllvm;-amdgpu-early-inline-all=true;-mllvm;-amdgpu-function-calls=false>$")
    set_target_properties(hip-lang::device PROPERTIES INTERFACE_COMPILE_OPTIONS "")
  else()
    message(WARNING "hip-lang's device options are not the expected ones; kept: ${weft_hip_opts}")
  endif()
endif()

find_path(WEFT_HIP_INCLUDE_DIR hip/hip_runtime_api.h HINTS /opt/rocm/include REQUIRED)
find_library(WEFT_AMDHIP64 amdhip64 HINTS /opt/rocm/lib REQUIRED)
set(WEFT_HIP_VERSION "unknown")
if(EXISTS ${WEFT_HIP_INCLUDE_DIR}/hip/hip_version.h)
  file(STRINGS ${WEFT_HIP_INCLUDE_DIR}/hip/hip_version.h weft_hip_ver REGEX "#define HIP_VERSION_(MAJOR|MINOR) ")
  string(REGEX REPLACE ".*HIP_VERSION_MAJOR ([0-9]+).*HIP_VERSION_MINOR ([0-9]+).*" "\\1.\\2" WEFT_HIP_VERSION "${weft_hip_ver}")
endif()

add_library(weft_hip_runtime INTERFACE)
target_compile_definitions(weft_hip_runtime INTERFACE WEFT_GPU_HIP=1 __HIP_PLATFORM_AMD__=1)
target_include_directories(weft_hip_runtime INTERFACE ${WEFT_HIP_INCLUDE_DIR})
target_link_libraries(weft_hip_runtime INTERFACE ${WEFT_AMDHIP64})
# HIP sources see the HIP runtime header first, as nvcc pre-includes cuda_runtime.h (clang adds its
# own wrapper only where it recognises a ROCm installation, which Debian's layout is not).
target_compile_options(weft_hip_runtime INTERFACE "$<$<COMPILE_LANGUAGE:HIP>:-includehip/hip_runtime.h>")
message(STATUS "weft: HIP ${WEFT_HIP_VERSION} build for ${WEFT_HIP_ARCHS} with ${CMAKE_HIP_COMPILER}")
