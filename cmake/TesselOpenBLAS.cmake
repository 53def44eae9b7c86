# The imported target Tessel::OpenBLAS: the OpenBLAS that Tessel's CPU executor calls for its
# GEMMs. Included by the build (runtime/CMakeLists.txt) and by the installed package
# (TesselConfig.cmake), so that a model project built against an installed Tessel links the
# same variant without naming it.
#
# The OpenMP build of OpenBLAS shares the generated kernels' OpenMP thread pool. The default
# pthread build keeps a second pool of spinning threads that fights the kernels for the cores:
# a GPT training step measured 0.26 s with it and 0.08 s with the OpenMP build (2 cores).
# Linking the variant by full path puts its folder in the RUNPATH, so the loader picks it over
# the system-wide alternative. Debian's libopenblas-openmp-dev keeps it under the multiarch
# folder's openblas-openmp/.
if(NOT TARGET Tessel::OpenBLAS)
  find_library(TESSEL_OPENBLAS_LIBRARY NAMES libopenblas.so.0 openblas
    PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp
          /usr/lib/openblas-openmp
    NO_DEFAULT_PATH)
  if(NOT TESSEL_OPENBLAS_LIBRARY)
    message(WARNING "the OpenMP build of OpenBLAS (libopenblas0-openmp) is missing; using the "
                    "default one, whose threads compete with the kernels' OpenMP threads")
    find_library(TESSEL_OPENBLAS_LIBRARY openblas)
  endif()
  if(NOT TESSEL_OPENBLAS_LIBRARY)
    message(FATAL_ERROR "Tessel needs OpenBLAS (Debian: libopenblas-openmp-dev); none was found")
  endif()
  add_library(Tessel::OpenBLAS SHARED IMPORTED GLOBAL)
  set_target_properties(Tessel::OpenBLAS PROPERTIES IMPORTED_LOCATION "${TESSEL_OPENBLAS_LIBRARY}")
endif()
