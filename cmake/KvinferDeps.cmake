# SPDX-License-Identifier: Apache-2.0
# Third-party dependencies from a staged folder, for machines that lack the Debian
# packages and cannot download (the GPU machine). scripts/stage-deps.sh fills the
# folder; KVINFER_DEPS_DIR points at it (default: <repo>/.deps when it exists).
# Each dependency is first looked up as usual (find_package, QUIET); only one that
# is not found comes from the folder, with the target names the packages define:
#   googletest source  -> add_subdirectory: GTest::gtest, GTest::gtest_main
#   fmt headers        -> fmt::fmt, header-only (FMT_HEADER_ONLY)
#   CLI11 headers      -> CLI11::CLI11
#   nlohmann headers   -> nlohmann_json::nlohmann_json
# Without the folder nothing here runs and the plain find_package(... REQUIRED)
# calls of the project behave exactly as before.
set(_kvinfer_default_deps "")
if(EXISTS "${PROJECT_SOURCE_DIR}/.deps")
  set(_kvinfer_default_deps "${PROJECT_SOURCE_DIR}/.deps")
endif()
set(KVINFER_DEPS_DIR "${_kvinfer_default_deps}" CACHE PATH
    "Folder of staged dependencies (scripts/stage-deps.sh), used for packages not found on the system")

if(KVINFER_DEPS_DIR AND EXISTS "${KVINFER_DEPS_DIR}")
  set(_deps "${KVINFER_DEPS_DIR}")
  set(_staged_headers OFF)

  find_package(fmt QUIET)
  if(NOT fmt_FOUND AND NOT TARGET fmt::fmt AND EXISTS "${_deps}/include/fmt/format.h")
    add_library(kvinfer_dep_fmt INTERFACE)
    set(_staged_headers ON)
    target_include_directories(kvinfer_dep_fmt SYSTEM INTERFACE "${_deps}/include")
    target_compile_definitions(kvinfer_dep_fmt INTERFACE FMT_HEADER_ONLY=1)
    # Also for code that includes fmt through a static library linked PRIVATE to
    # fmt::fmt (its consumers get no usage requirements, and there is no libfmt here).
    add_compile_definitions(FMT_HEADER_ONLY=1)
    add_library(fmt::fmt ALIAS kvinfer_dep_fmt)
    add_library(fmt::fmt-header-only ALIAS kvinfer_dep_fmt)
    message(STATUS "kvinfer: fmt from ${_deps} (header-only)")
  endif()

  find_package(CLI11 CONFIG QUIET)
  if(NOT CLI11_FOUND AND NOT TARGET CLI11::CLI11 AND EXISTS "${_deps}/include/CLI/CLI.hpp")
    add_library(kvinfer_dep_cli11 INTERFACE)
    set(_staged_headers ON)
    target_include_directories(kvinfer_dep_cli11 SYSTEM INTERFACE "${_deps}/include")
    add_library(CLI11::CLI11 ALIAS kvinfer_dep_cli11)
    message(STATUS "kvinfer: CLI11 from ${_deps}")
  endif()

  find_package(nlohmann_json QUIET)
  if(NOT nlohmann_json_FOUND AND NOT TARGET nlohmann_json::nlohmann_json
     AND EXISTS "${_deps}/include/nlohmann/json.hpp")
    add_library(kvinfer_dep_nlohmann_json INTERFACE)
    set(_staged_headers ON)
    target_include_directories(kvinfer_dep_nlohmann_json SYSTEM INTERFACE "${_deps}/include")
    add_library(nlohmann_json::nlohmann_json ALIAS kvinfer_dep_nlohmann_json)
    message(STATUS "kvinfer: nlohmann_json from ${_deps}")
  endif()

  # Where a package is missing, the staged headers stand in for /usr/include for every
  # target, as the system headers do on a Debian machine.
  if(_staged_headers)
    include_directories(SYSTEM "${_deps}/include")
  endif()

  if(KVINFER_BUILD_TESTS)
    find_package(GTest QUIET)
    if(NOT GTest_FOUND AND NOT GTEST_FOUND AND NOT TARGET GTest::gtest
       AND EXISTS "${_deps}/googletest/CMakeLists.txt")
      set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
      set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
      set(gtest_force_shared_crt ON CACHE BOOL "" FORCE)
      add_subdirectory("${_deps}/googletest" "${CMAKE_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL SYSTEM)
      # Recent googletest defines the namespaced aliases itself; older ones do not.
      if(NOT TARGET GTest::gtest)
        add_library(GTest::gtest ALIAS gtest)
        add_library(GTest::gtest_main ALIAS gtest_main)
      endif()
      message(STATUS "kvinfer: GoogleTest from ${_deps}/googletest (built from source)")
    endif()
  endif()
endif()
