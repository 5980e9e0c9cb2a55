# SPDX-License-Identifier: Apache-2.0
# Decides whether the CUDA backend is built (KVINFER_CUDA = AUTO/ON/OFF) and
# provides kvinfer_add_cuda_backend(), which adds the kernels and the instance
# files of the chosen preset to the library.
include(CheckLanguage)

set(KVINFER_WITH_CUDA OFF)
if(KVINFER_CUDA STREQUAL "AUTO" OR KVINFER_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(KVINFER_WITH_CUDA ON)
  elseif(NOT KVINFER_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "KVINFER_CUDA=${KVINFER_CUDA} but no CUDA compiler was found")
  endif()
endif()

if(KVINFER_WITH_CUDA)
  set(CMAKE_CUDA_ARCHITECTURES ${KVINFER_CUDA_ARCHS})
  enable_language(CUDA)
  # CMake 3.25 does not know nvcc's C++20 flag; nvcc >= 12 has it.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "kvinfer: CUDA backend ON (archs ${KVINFER_CUDA_ARCHS}, instances ${KVINFER_INSTANCES})")
else()
  message(STATUS "kvinfer: CUDA backend OFF")
endif()

function(kvinfer_add_cuda_backend target)
  file(GLOB_RECURSE cuda_sources CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/cuda/*.cu ${PROJECT_SOURCE_DIR}/src/cuda/*.cpp)
  target_sources(${target} PRIVATE ${cuda_sources})
  if(COMMAND kvinfer_generate_instances)
    kvinfer_generate_instances(${target})
  endif()
  target_compile_definitions(${target} PRIVATE KVINFER_WITH_CUDA=1)
  # Hopper-only kernels (wgmma) are selected only when the build has sm_90a code.
  if("90a" IN_LIST KVINFER_CUDA_ARCHS)
    target_compile_definitions(${target} PRIVATE KVINFER_CUDA_SM90A=1)
  endif()
  target_link_libraries(${target} PRIVATE CUDA::cudart)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo -Xcudafe=--diag_suppress=177>)
endfunction()
