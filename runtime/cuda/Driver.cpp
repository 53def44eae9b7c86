// The CUDA driver probe; see Driver.h.
#include "runtime/cuda/Driver.h"

#include "runtime/ToolkitLibrary.h"

#include <dlfcn.h>

#include <fmt/format.h>
#include <stdexcept>

namespace tessel::rt {

const CudaDriverStatus& probeCudaDriver() {
  static const CudaDriverStatus status = [] {
    CudaDriverStatus s;
    const std::string path = cudaLibraryPath("libcuda.so.1");
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = dlerror();
      s.why = cudaLibraryFolder().empty()
                  ? fmt::format("the CUDA driver libcuda.so.1 cannot be loaded ({}); this machine "
                                "has no NVIDIA driver",
                                err ? err : "unknown reason")
                  : fmt::format("the CUDA driver {} (from $TESSEL_CUDA_LIBRARY_PATH) cannot be loaded ({})",
                                path, err ? err : "unknown reason");
      return s;
    }
    using CuInit = int (*)(unsigned);
    using CuDeviceGetCount = int (*)(int*);
    auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
    if (!init || !count) {
      s.why = path + " lacks cuInit or cuDeviceGetCount";
      return s;
    }
    if (int rc = init(0); rc != 0) {
      s.why = fmt::format("cuInit failed with CUDA error {} (no usable GPU or driver)", rc);
      return s;
    }
    s.loaded = true;
    if (int rc = count(&s.devices); rc != 0 || s.devices == 0)
      s.why = rc != 0 ? fmt::format("cuDeviceGetCount failed with CUDA error {}", rc)
                      : std::string("the CUDA driver sees no devices");
    return s;
  }();
  return status;
}

std::string resolveDevice(const std::string& requested, bool cudaBackendReady) {
  if (requested == "cpu") return "cpu";
  if (requested != "cuda" && requested != "auto")
    throw std::runtime_error(fmt::format("--device must be cpu, cuda or auto, got '{}'", requested));
  const CudaDriverStatus& s = probeCudaDriver();
  bool gpu = s.loaded && s.devices > 0;
  if (requested == "auto") return gpu && cudaBackendReady ? "cuda" : "cpu";
  if (!gpu) throw std::runtime_error(fmt::format("--device cuda: {}; use --device cpu", s.why));
  if (!cudaBackendReady)
    throw std::runtime_error(
        fmt::format("--device cuda: {} GPU(s) found, but this program has no GPU path yet; use "
                    "--device cpu",
                    s.devices));
  return "cuda";
}

}  // namespace tessel::rt
