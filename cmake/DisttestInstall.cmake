# `cmake --install` produces a package that consumers find with
# find_package(disttest CONFIG REQUIRED) and link as disttest::disttest.
include(CMakePackageConfigHelpers)

set(_disttest_installed disttest disttest_core disttest_resource_spec)
if(DISTTEST_MPI_BUILT)
  list(APPEND _disttest_installed disttest_mpi_lib)  # disttest::mpi
endif()
install(TARGETS ${_disttest_installed} EXPORT disttest-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/disttest DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT disttest-targets
  NAMESPACE disttest::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disttest)
configure_package_config_file(cmake/disttest-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/disttest-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disttest)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/disttest-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/disttest-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/disttest-config-version.cmake
  cmake/DisttestDiscoverTests.cmake
  cmake/DisttestAddTests.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disttest)
# A build with the NCCL backend makes its consumers find NCCL too, with the
# same find module.
if(DISTTEST_NCCL_BUILT)
  install(FILES cmake/FindNCCL.cmake
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disttest)
  configure_file(cmake/FindNCCL.cmake
    ${CMAKE_CURRENT_BINARY_DIR}/FindNCCL.cmake COPYONLY)  # Build tree.
endif()
# Build-tree export, for consumers pointed at the build directory.
export(EXPORT disttest-targets NAMESPACE disttest::
  FILE ${CMAKE_CURRENT_BINARY_DIR}/disttest-targets.cmake)
