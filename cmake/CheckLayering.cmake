# SPDX-License-Identifier: Apache-2.0
# The layering of DESIGN.md, checked (a CTest test: cmake -DROOT=<source dir> -P):
# src/core and src/plan include no backend header, src/plan not even the backend
# interface (the planner takes plain values), each backend stays out of the other,
# the public headers include no CUDA header, and KVINFER_WITH_CUDA appears in one
# place, the backend registry.
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<kvinfer source dir> -P CheckLayering.cmake")
endif()

set(violations "")
function(forbid dir regex why)
  file(GLOB_RECURSE files "${ROOT}/${dir}/*.cpp" "${ROOT}/${dir}/*.hpp" "${ROOT}/${dir}/*.cu" "${ROOT}/${dir}/*.cuh")
  foreach(f ${files})
    file(STRINGS "${f}" hits REGEX "${regex}")
    if(hits)
      file(RELATIVE_PATH rel "${ROOT}" "${f}")
      list(GET hits 0 first)
      string(STRIP "${first}" first)
      string(APPEND violations "  ${rel}: ${first}  (${why})\n")
    endif()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()

set(backend_include "#include \"(cpu|cuda)/")
forbid(src/core "${backend_include}" "core reaches a backend only through src/backend/backend.hpp")
forbid(src/plan "${backend_include}" "the planner includes no backend")
forbid(src/plan "#include \"backend/" "the planner takes capabilities as plain values")
forbid(src/cpu "#include \"cuda/" "backends depend on core, never on each other")
forbid(src/cuda "#include \"cpu/" "backends depend on core, never on each other")
forbid(include "#include <(cuda|cuda_runtime|cuda_fp16|cuda_bf16)" "the public API has no CUDA header")
foreach(dir core plan cpu cuda)
  forbid(src/${dir} "KVINFER_WITH_CUDA" "only src/backend/registry.cpp knows which backends are built")
endforeach()

if(violations)
  message(FATAL_ERROR "layering violations:\n${violations}")
endif()
message(STATUS "layering: ok")
