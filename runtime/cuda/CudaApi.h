// The CUDA driver API and cuBLASLt, opened with dlopen (internal to runtime/cuda).
//
// Promise: every function is declared by the toolkit's own headers (cuda.h, cublasLt.h; the
// CUDA 13 headers this was written against) and resolved by the exact symbol those headers
// map its name to (cuda.h renames e.g. cuMemAlloc to cuMemAlloc_v2 and cuGraphInstantiate to
// cuGraphInstantiateWithFlags), so a call through these tables is the call a program linked
// against libcuda would make. Nothing links libcuda or libcublasLt: a machine without them
// gets an error naming the library and why it could not be loaded. Not tested on a GPU here:
// the unit tests resolve every symbol against the toolkit's stub libcuda.so and the real
// libcublasLt.so.13, and the calls run against the tests' stand-in driver and cuBLASLt
// (test/standin, which execute them on the CPU; docs/gpu.md says what that leaves unchecked).
#pragma once

#include <cublasLt.h>
#include <cuda.h>

#include <string>

namespace tessel::rt::cuda {

// The driver functions the GPU executor calls. Each name passes through cuda.h's macros,
// so both the member's type and the symbol looked up are the versioned ones.
#define TESSEL_CUDA_DRIVER_FUNCTIONS(X)                                                         \
  X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuDriverGetVersion) X(cuDeviceGetCount)    \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)                  \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute)           \
  X(cuFuncGetParamInfo)                                                                         \
  X(cuLaunchKernel) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery)      \
  X(cuStreamWaitEvent)                                                                          \
  X(cuEventElapsedTime) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) X(cuMemcpyHtoD)             \
  X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)                 \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch)         \
  X(cuGraphExecDestroy) X(cuGraphDestroy)

// The cuBLASLt functions (not versioned by macros).
#define TESSEL_CUBLASLT_FUNCTIONS(X)                                                             \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusString)         \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)    \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                                  \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                         \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                    \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

/// The driver's function table.
struct DriverApi {
#define TESSEL_MEMBER(name) decltype(&::name) name = nullptr;
  TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_MEMBER)
  std::string library;  // the file that was opened
};

/// cuBLASLt's function table.
struct BlasLtApi {
  TESSEL_CUBLASLT_FUNCTIONS(TESSEL_MEMBER)
#undef TESSEL_MEMBER
  std::string library;
};

/// The driver, opened once per process from $TESSEL_LIBCUDA if set (tests point it at the
/// toolkit's stub), else libcuda.so.1 ($TESSEL_CUDA_LIBRARY_PATH/libcuda.so.1 when that is
/// set: the tests' stand-in driver, runtime/ToolkitLibrary.h). Throws std::runtime_error
/// naming the library and dlerror's reason, or the first missing symbol. Does not call cuInit.
const DriverApi& driverApi();

/// cuBLASLt, opened once per process: $TESSEL_CUBLASLT, libcublasLt.so.13 (loader path),
/// $CUDA_HOME/lib64, /usr/local/cuda/lib64 (with $TESSEL_CUDA_LIBRARY_PATH set: only
/// $TESSEL_CUBLASLT and that folder's libcublasLt.so.13). Throws std::runtime_error listing what was tried.
const BlasLtApi& blasLtApi();

/// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory" for a driver result.
std::string errorText(const DriverApi& api, CUresult rc);

/// Throws std::runtime_error "<what>: <errorText>" unless rc is CUDA_SUCCESS.
void check(const DriverApi& api, CUresult rc, const std::string& what);

/// Throws std::runtime_error "<what>: cuBLASLt <status string> (<code>)" unless success.
void check(const BlasLtApi& api, cublasStatus_t status, const std::string& what);

}  // namespace tessel::rt::cuda
