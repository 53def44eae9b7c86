# `cmake --install build --prefix P`: what a model project outside this tree builds against.
#
#   P/include/tessel/   the headers of the DSL, the trainer and the runtime, with the in-tree
#                       paths, so a model source includes "dsl/tessel.h" and
#                       "dsl/trainer/App.h" as the examples do;
#   P/lib/              the static libraries the trainer links;
#   P/bin/              tessel, tessel-run, tessel-opt, tessel-translate and the example
#                       trainers (installed by tessel_add_trainer);
#   P/lib/cmake/Tessel/ the package: TesselConfig.cmake, TesselConfigVersion.cmake, the
#                       exported targets (Tessel::trainer, ...), TesselOpenBLAS.cmake and
#                       TesselTrainer.cmake (tessel_add_trainer).
#
# Included last by the top-level CMakeLists.txt, once every library exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TESSEL_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/tessel")
set(TESSEL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Tessel")

# The version bundles record (runtime/bundle/Bundle.h kTesselVersion): one source of truth.
file(STRINGS "${PROJECT_SOURCE_DIR}/runtime/bundle/Bundle.h" _tessel_version_line
     REGEX "kTesselVersion = \"[0-9.]+\"")
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" TESSEL_VERSION "${_tessel_version_line}")
if(NOT TESSEL_VERSION)
  message(FATAL_ERROR "cannot read kTesselVersion from runtime/bundle/Bundle.h")
endif()

# The project's libraries that `target` links, directly or through others (static libraries
# carry their private dependencies to the final link, so all of them are exported).
function(tessel_link_closure target out)
  set(seen ${${out}})
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue t)
    if(t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(type ${t} TYPE)
    set(deps "")
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(direct ${t} LINK_LIBRARIES)
      if(direct)
        list(APPEND deps ${direct})
      endif()
    endif()
    get_target_property(iface ${t} INTERFACE_LINK_LIBRARIES)
    if(iface)
      list(APPEND deps ${iface})
    endif()
    foreach(d IN LISTS deps)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" d "${d}")
      if(TARGET ${d})
        get_target_property(imported ${d} IMPORTED)
        get_target_property(aliased ${d} ALIASED_TARGET)
        if(aliased)
          set(d ${aliased})
        endif()
        if(NOT imported AND NOT d IN_LIST seen)
          list(APPEND queue ${d})
        endif()
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

set(TESSEL_EXPORTED_LIBRARIES "")
tessel_link_closure(tessel_trainer TESSEL_EXPORTED_LIBRARIES)
foreach(lib IN LISTS TESSEL_EXPORTED_LIBRARIES)
  # Tessel::trainer, Tessel::dsl, ...: the package's namespace replaces the prefix.
  string(REGEX REPLACE "^tessel_" "" exported "${lib}")
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${exported})
endforeach()
install(TARGETS ${TESSEL_EXPORTED_LIBRARIES} EXPORT TesselTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${TESSEL_INSTALL_INCLUDEDIR})

# The tools. Their RUNPATH keeps the shared libraries' folders (MLIR's, OpenBLAS's OpenMP build).
set(_tessel_tools tessel tessel-run tessel-opt tessel-translate)
set_target_properties(${_tessel_tools} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ${_tessel_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers: those a model source includes (dsl/tessel.h, dsl/trainer/ and runtime/, which never
# includes MLIR: data, training, I/O, the executor) and every project header they include, found by following their
# #include "..." lines. Only these are installed, so the DSL's implementation headers, which
# build MLIR, stay out; a header of the set that reaches MLIR or the compiler is a configure
# error, since a model project could not compile it.
file(GLOB_RECURSE _tessel_public_headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
     ${PROJECT_SOURCE_DIR}/dsl/trainer/*.h ${PROJECT_SOURCE_DIR}/runtime/*.h)
list(FILTER _tessel_public_headers EXCLUDE REGEX "^runtime/tools/")
set(_tessel_headers "")
set(_tessel_queue dsl/tessel.h ${_tessel_public_headers})
while(_tessel_queue)
  list(POP_FRONT _tessel_queue _h)
  if(_h IN_LIST _tessel_headers)
    continue()
  endif()
  list(APPEND _tessel_headers ${_h})
  file(STRINGS ${PROJECT_SOURCE_DIR}/${_h} _includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
  foreach(_line IN LISTS _includes)
    string(REGEX REPLACE "^[^\"]*\"([^\"]+)\".*$" "\\1" _inc "${_line}")
    if(_inc MATCHES "^(mlir|llvm|compiler|passes|codegen)/" OR _inc STREQUAL "dsl/Graph.h")
      message(FATAL_ERROR "${_h} includes ${_inc}: a header a model source includes must not need "
                          "MLIR or the compiler (it is installed for model projects)")
    endif()
    if(EXISTS ${PROJECT_SOURCE_DIR}/${_inc})
      list(APPEND _tessel_queue ${_inc})
    endif()
  endforeach()
endwhile()
foreach(_h IN LISTS _tessel_headers)
  get_filename_component(_dir ${_h} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${_h} DESTINATION ${TESSEL_INSTALL_INCLUDEDIR}/${_dir})
endforeach()

# The package.
install(EXPORT TesselTargets NAMESPACE Tessel:: DESTINATION ${TESSEL_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TesselConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/TesselConfig.cmake
  INSTALL_DESTINATION ${TESSEL_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/TesselConfigVersion.cmake
  VERSION ${TESSEL_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/TesselConfig.cmake ${PROJECT_BINARY_DIR}/cmake/TesselConfigVersion.cmake
        ${PROJECT_SOURCE_DIR}/cmake/TesselOpenBLAS.cmake ${PROJECT_SOURCE_DIR}/cmake/TesselTrainer.cmake
        DESTINATION ${TESSEL_INSTALL_CMAKEDIR})
