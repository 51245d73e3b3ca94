# SPDX-License-Identifier: BSD-3-Clause
# Runs inside `cmake --install` (cmake/Packaging.cmake): writes dat2.pc for
# the install prefix of this run and installs it (DESTDIR honoured).
cmake_policy(PUSH)
cmake_policy(SET CMP0057 NEW) # IN_LIST, in an install script that sets no policy
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${DAT2_INSTALL_${kind}}")
    set(pc_${kind} "${DAT2_INSTALL_${kind}}")
  else()
    set(pc_${kind} "${CMAKE_INSTALL_PREFIX}/${DAT2_INSTALL_${kind}}")
  endif()
endforeach()
set(pc_prefix "${CMAKE_INSTALL_PREFIX}")
set(pc_rpath "")
if(NOT pc_LIBDIR IN_LIST DAT2_SYSTEM_LIBDIRS)
  set(pc_rpath "-Wl,-rpath,\${libdir} ")
endif()
configure_file("${DAT2_PC_TEMPLATE}" "${DAT2_PC_OUT}" @ONLY)
file(INSTALL DESTINATION "${pc_LIBDIR}/pkgconfig" TYPE FILE FILES "${DAT2_PC_OUT}")
cmake_policy(POP)
