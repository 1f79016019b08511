# `cmake --install build --prefix P`: the tools, the libraries, the public headers (with the
# generated .inc files) and P/lib/cmake/ds/dsConfig.cmake, whose imported targets are
# ds::Dialect, ds::Transforms, ds::Analysis, ds::Conversion, ds::InitAll (the dialect, its
# analyses and passes, static, over Debian's libMLIR.so), ds::Runtime (the C-ABI runtime alone,
# libdsrt.so, no LLVM) and ds::CAPI (libdsCAPI.so: ds's C API, which brings ds::MLIRCAPI,
# libdsMLIRCAPI.so, MLIR's). Installed tools find the installed libraries ($ORIGIN/../lib) and
# LibTorch and MLIR where the build found them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ds)

# Consumers see ds's headers and MLIR's (a system path) through the targets.
foreach(t DSEnums DSDialect DSTransforms DSAnalysis DSConversion DSInitAll)
  target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
                             ${MLIR_INCLUDE_DIRS})
endforeach()
target_include_directories(dsrt INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(DSEnums PROPERTIES EXPORT_NAME Enums)
set_target_properties(DSDialect PROPERTIES EXPORT_NAME Dialect)
set_target_properties(DSTransforms PROPERTIES EXPORT_NAME Transforms)
set_target_properties(DSAnalysis PROPERTIES EXPORT_NAME Analysis)
set_target_properties(DSConversion PROPERTIES EXPORT_NAME Conversion)
set_target_properties(DSInitAll PROPERTIES EXPORT_NAME InitAll)
set_target_properties(dsrt PROPERTIES EXPORT_NAME Runtime)

install(TARGETS DSEnums DSDialect DSTransforms DSAnalysis DSConversion DSInitAll dsrt DSCAPI
        DSMLIRCAPI
        EXPORT dsTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT dsTargets NAMESPACE ds:: DESTINATION ${DS_INSTALL_CMAKEDIR})

# The tools, the runtime's device plugins (opened next to libdsrt.so) and the executables'
# main() that ds-compile links.
set(DS_INSTALL_TOOLS ds-opt ds-run ds-compile ds-checkpoint ds-report ds-generate ds-serve
    ds-tokenize)
if(TARGET ds-reference)
  list(APPEND DS_INSTALL_TOOLS ds-reference)
endif()
install(TARGETS ${DS_INSTALL_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(plugin dsrt_cuda dsrt_nccl)
  if(TARGET ${plugin})
    install(TARGETS ${plugin} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()
install(TARGETS dsrt_main ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

# Headers: include/ds (pipelines, config, importer), include/ds-c, the dialect's and passes'
# headers with their generated .inc files, and the runtime's C ABI.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ds ${PROJECT_SOURCE_DIR}/include/ds-c
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/dialects/ds ${PROJECT_BINARY_DIR}/dialects/ds
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.h.inc" PATTERN "*.td"
        PATTERN "CMakeFiles" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/dsrt
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dsConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dsConfig.cmake
                              INSTALL_DESTINATION ${DS_INSTALL_CMAKEDIR})
install(FILES ${PROJECT_BINARY_DIR}/dsConfig.cmake DESTINATION ${DS_INSTALL_CMAKEDIR})
