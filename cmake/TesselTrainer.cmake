# tessel_add_trainer(<name> <sources>...): a training binary of a model source.
#
# It builds the executable <name> from the sources, links Tessel::trainer (the trainer
# application of dsl/trainer/App.h with every standard flag: plans, devices, bundles,
# precision, logging, explain; and through it the compiler, the runtime, MPI and OpenBLAS),
# compiles it as C++20, and installs it into the project's bin folder. The in-tree examples
# (examples/*/CMakeLists.txt) and a model project built against an installed Tessel
# (find_package(Tessel CONFIG REQUIRED); examples/template) both use it, so both are built the
# same way.
include_guard(GLOBAL)
include(GNUInstallDirs)

function(tessel_add_trainer name)
  if(NOT ARGN)
    message(FATAL_ERROR "tessel_add_trainer(${name}) names no source file: "
                        "tessel_add_trainer(<name> <sources>...)")
  endif()
  if(NOT TARGET Tessel::trainer)
    message(FATAL_ERROR "tessel_add_trainer(${name}): the target Tessel::trainer is missing; "
                        "call find_package(Tessel CONFIG REQUIRED) first")
  endif()
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE Tessel::trainer)
  target_compile_features(${name} PRIVATE cxx_std_20)
  # The installed binary keeps the folders of the shared libraries it links (MLIR's, OpenBLAS's
  # OpenMP build, MPI's) in its RUNPATH: they are outside the loader's default path.
  set_target_properties(${name} PROPERTIES CXX_EXTENSIONS OFF INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
