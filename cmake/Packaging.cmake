# SPDX-License-Identifier: BSD-3-Clause
# What an application builds against: dat2.pc for pkg-config and the CMake
# package dat2 (find_package(dat2), imported target dat2::dat2). Both carry
# the one version, project()'s.
include(CMakePackageConfigHelpers)

# ---- CMake package --------------------------------------------------------------
set(DAT2_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dat2)
install(EXPORT dat2Targets NAMESPACE dat2:: DESTINATION ${DAT2_CMAKE_INSTALL_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dat2Config.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/dat2Config.cmake
  INSTALL_DESTINATION ${DAT2_CMAKE_INSTALL_DIR}
  PATH_VARS DAT2_PLUGIN_INSTALL_DIR DAT2_CONF_INSTALL_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/dat2ConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/dat2Config.cmake ${PROJECT_BINARY_DIR}/cmake/dat2ConfigVersion.cmake
  DESTINATION ${DAT2_CMAKE_INSTALL_DIR} COMPONENT dev)

# ---- pkg-config -------------------------------------------------------------------
# Written at install time, for the prefix actually installed to (cmake
# --install --prefix P may differ from the configured one). Outside the
# loader's own directories the Libs carry a RUNPATH to the installed
# libdat2: without it, a program would run with whatever libdat2.so.2 the
# loader finds first, OFED's on a host with libdapl2.
install(CODE "
  set(DAT2_PC_TEMPLATE \"${PROJECT_SOURCE_DIR}/cmake/dat2.pc.in\")
  set(DAT2_PC_OUT \"${PROJECT_BINARY_DIR}/cmake/dat2.pc\")
  set(DAT2_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(DAT2_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(DAT2_SYSTEM_LIBDIRS \"${DAT2_SYSTEM_LIBDIRS}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/InstallPkgConfig.cmake\")
" COMPONENT dev)
# dat.pc: libdat.so.1, the DAT 1.2 API (dat12/, include/dat). The CMake
# package has no target for it: DAT 1.2 programs are autotools-era (Open
# MPI's configure takes --with-udapl=<prefix>), and a dat2::dat in
# dat2Targets would make find_package(dat2) fail on a system with the
# DAT 2.0 development files but not the 1.2 ones (libdat2-dev without
# libdat-dev).
install(CODE "
  set(DAT2_PC_TEMPLATE \"${PROJECT_SOURCE_DIR}/cmake/dat.pc.in\")
  set(DAT2_PC_OUT \"${PROJECT_BINARY_DIR}/cmake/dat.pc\")
  set(DAT2_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(DAT2_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(DAT2_SYSTEM_LIBDIRS \"${DAT2_SYSTEM_LIBDIRS}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/InstallPkgConfig.cmake\")
" COMPONENT dev)
