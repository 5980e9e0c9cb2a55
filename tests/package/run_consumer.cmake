# SPDX-License-Identifier: Apache-2.0
# cmake -DMODE=... -P run_consumer.cmake: one step of the package tests.
#   install        cmake --install KVINFER_BUILD_DIR into PREFIX; the public headers
#                  must include no fmt, CLI11, nlohmann-json or CUDA header
#   find_package   configure, build and run consumer/ against PREFIX, with fmt, CLI11
#                  and nlohmann-json hidden from find_package
#   pkg_config     compile and run consumer/main.cpp with `pkg-config --cflags --libs kvinfer`
#   subdirectory   configure consumer/ with add_subdirectory(KVINFER_SOURCE_DIR) with
#                  CLI11, nlohmann-json and GoogleTest hidden; BUILD=ON also builds and runs it
# Inputs: PREFIX, WORK_DIR, CONSUMER_DIR, KVINFER_BUILD_DIR, KVINFER_SOURCE_DIR,
# GENERATOR, CXX, LAUNCHER (may be empty), BUILD_TYPE.
cmake_minimum_required(VERSION 3.25)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

set(common -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX})
if(LAUNCHER)
  list(APPEND common -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${PREFIX}")
  run("${CMAKE_COMMAND}" --install "${KVINFER_BUILD_DIR}" --prefix "${PREFIX}" --config "${BUILD_TYPE}")
  file(GLOB_RECURSE headers "${PREFIX}/include/kvinfer/*.hpp")
  list(LENGTH headers n)
  if(n LESS 10)
    message(FATAL_ERROR "only ${n} public headers installed under ${PREFIX}/include/kvinfer")
  endif()
  foreach(h ${headers})
    file(STRINGS "${h}" bad REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](fmt|CLI|nlohmann|cuda|gtest)")
    if(bad)
      message(FATAL_ERROR "${h} includes a private dependency: ${bad}")
    endif()
  endforeach()
  foreach(f kvinferConfig.cmake kvinferConfigVersion.cmake kvinferTargets.cmake)
    file(GLOB_RECURSE found "${PREFIX}/*/${f}")
    if(NOT found)
      message(FATAL_ERROR "${f} not installed under ${PREFIX}")
    endif()
  endforeach()
  file(GLOB_RECURSE pc "${PREFIX}/*/kvinfer.pc")
  if(NOT pc)
    message(FATAL_ERROR "kvinfer.pc not installed under ${PREFIX}")
  endif()
  message(STATUS "installed ${n} headers, the CMake package and kvinfer.pc under ${PREFIX}")

elseif(MODE STREQUAL "find_package")
  file(REMOVE_RECURSE "${WORK_DIR}")
  run("${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}" ${common} "-DCMAKE_PREFIX_PATH=${PREFIX}"
      -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
  run("${CMAKE_COMMAND}" --build "${WORK_DIR}")
  run("${WORK_DIR}/consumer")
  message(STATUS "${out}")

elseif(MODE STREQUAL "pkg_config")
  find_program(PKG_CONFIG pkg-config REQUIRED)
  file(GLOB_RECURSE pc "${PREFIX}/*/kvinfer.pc")
  get_filename_component(pcdir "${pc}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${pcdir}")
  run("${PKG_CONFIG}" --variable=libdir kvinfer)
  string(STRIP "${out}" libdir)
  run("${PKG_CONFIG}" --cflags --libs kvinfer)
  string(STRIP "${out}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(MAKE_DIRECTORY "${WORK_DIR}")
  # -std=c++20: pkg-config carries no language standard (kvinfer's headers need C++20).
  run(${LAUNCHER} "${CXX}" -std=c++20 -O1 "${CONSUMER_DIR}/main.cpp" -o "${WORK_DIR}/consumer" ${flags}
      "-Wl,-rpath,${libdir}")
  run("${WORK_DIR}/consumer")
  message(STATUS "pkg-config flags: ${flags}\n${out}")

elseif(MODE STREQUAL "subdirectory")
  file(REMOVE_RECURSE "${WORK_DIR}")
  run("${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}" ${common} "-DKVINFER_SOURCE_DIR=${KVINFER_SOURCE_DIR}"
      -DKVINFER_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON)
  if(BUILD)
    run("${CMAKE_COMMAND}" --build "${WORK_DIR}")
    run("${WORK_DIR}/consumer")
    message(STATUS "${out}")
  endif()

else()
  message(FATAL_ERROR "MODE=${MODE}: use install, find_package, pkg_config or subdirectory")
endif()
