// dlopen'd CUDA driver and cuBLASLt tables; see CudaApi.h.
#include "runtime/cuda/CudaApi.h"

#include "runtime/ToolkitLibrary.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace tessel::rt::cuda {
namespace {

// Two levels, so that the argument is macro-expanded (cuMemAlloc -> cuMemAlloc_v2) first.
#define TESSEL_STRINGIFY2(x) #x
#define TESSEL_STRINGIFY(x) TESSEL_STRINGIFY2(x)

template <typename F>
void resolve(void* lib, const char* symbol, F& out, const std::string& library) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!out) throw std::runtime_error(fmt::format("{} lacks the function {} (a driver older than CUDA 13?)", library, symbol));
}

}  // namespace

const DriverApi& driverApi() {
  static const DriverApi api = [] {
    DriverApi a;
    const char* env = std::getenv("TESSEL_LIBCUDA");
    a.library = env && *env ? env : cudaLibraryPath("libcuda.so.1");
    void* lib = dlopen(a.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = dlerror();
      throw std::runtime_error(fmt::format("the CUDA driver {} cannot be loaded ({}); this machine has no NVIDIA driver",
                                           a.library, err ? err : "unknown reason"));
    }
#define TESSEL_RESOLVE(name) resolve(lib, TESSEL_STRINGIFY(name), a.name, a.library);
    TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_RESOLVE)
    return a;
  }();
  return api;
}

const BlasLtApi& blasLtApi() {
  static const BlasLtApi api = [] {
    BlasLtApi a;
    ToolkitLibrary opened = openToolkitLibrary("cuBLASLt (CUDA 13)", "libcublasLt.so.13", "TESSEL_CUBLASLT");
    void* lib = opened.handle;
    const std::string& c = opened.path;
    a.library = c;
    TESSEL_CUBLASLT_FUNCTIONS(TESSEL_RESOLVE)
    return a;
  }();
  return api;
#undef TESSEL_RESOLVE
}

std::string errorText(const DriverApi& api, CUresult rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName(rc, &name) != CUDA_SUCCESS) name = nullptr;
  if (api.cuGetErrorString(rc, &text) != CUDA_SUCCESS) text = nullptr;
  return fmt::format("{} ({}): {}", name ? name : "CUDA error", static_cast<int>(rc), text ? text : "no description");
}

void check(const DriverApi& api, CUresult rc, const std::string& what) {
  if (rc != CUDA_SUCCESS) throw std::runtime_error(fmt::format("{}: {}", what, errorText(api, rc)));
}

void check(const BlasLtApi& api, cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(
        fmt::format("{}: cuBLASLt {} ({})", what, api.cublasLtGetStatusString(status), static_cast<int>(status)));
}

}  // namespace tessel::rt::cuda
