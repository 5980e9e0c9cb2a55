# SPDX-License-Identifier: Apache-2.0
# kvinfer.pc for builds that use pkg-config instead of CMake:
#   c++ -std=c++20 app.cpp $(pkg-config --cflags --libs kvinfer)
# The prefix is found relative to the .pc file itself, so the file stays right for
# any `cmake --install --prefix`. A static libkvinfer.a lists what it needs under
# Libs (pkg-config users rarely pass --static); a shared one under Libs.private.
function(kvinfer_write_pkg_config output)
  set(pcdir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(prefix "${CMAKE_INSTALL_PREFIX}")
    set(libdir "${CMAKE_INSTALL_FULL_LIBDIR}")
    set(includedir "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
  else()
    file(RELATIVE_PATH up "/root/${pcdir}" "/root")
    string(REGEX REPLACE "/$" "" up "${up}")
    set(prefix "\${pcfiledir}/${up}")
    set(libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
    set(includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  endif()
  set(deps "-pthread")
  if(KVINFER_WITH_CUDA)
    string(APPEND deps " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
  endif()
  get_target_property(type kvinfer TYPE)
  if(type STREQUAL "STATIC_LIBRARY")
    set(libs "-L\${libdir} -lkvinfer ${deps}")
    set(libs_private "")
  else()
    set(libs "-L\${libdir} -lkvinfer")
    set(libs_private "${deps}")
  endif()
  file(CONFIGURE OUTPUT "${output}" @ONLY CONTENT [=[
prefix=@prefix@
libdir=@libdir@
includedir=@includedir@

Name: kvinfer
Description: Attention kernels for LLM serving over paged and ragged KV caches (C++20)
Version: @PROJECT_VERSION@
Cflags: -I${includedir}
Libs: @libs@
Libs.private: @libs_private@
]=])
endfunction()
