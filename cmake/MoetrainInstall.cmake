# cmake --install: headers, libmoetrain, backend modules, the CLI and a CMake package config.
include(CMakePackageConfigHelpers)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/api/moetrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS moetrain EXPORT moetrainTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT moetrainTargets NAMESPACE moetrain:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moetrain)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/moetrainConfig.cmake.in
  ${CMAKE_BINARY_DIR}/moetrainConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moetrain)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/moetrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/moetrainConfig.cmake ${CMAKE_BINARY_DIR}/moetrainConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moetrain)
