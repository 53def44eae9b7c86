// The CUDA driver, opened with dlopen: one Tessel binary runs with or without it.
//
// Promise: probing never links or requires libcuda; it reports whether the driver loads,
// initialises, and how many devices it sees, and otherwise why not (the library that could
// not be opened and dlerror's reason, or the cuInit error code).
#pragma once

#include <string>

namespace tessel::rt {

/// What probeCudaDriver found.
struct CudaDriverStatus {
  bool loaded = false;   // libcuda.so.1 opened and cuInit succeeded
  int devices = 0;       // cuDeviceGetCount
  std::string why;       // when !loaded or devices == 0: the reason, for error messages
};

/// Opens libcuda.so.1 (the driver's soname; never the toolkit's stub; the one in
/// $TESSEL_CUDA_LIBRARY_PATH when that is set, runtime/ToolkitLibrary.h) and asks for devices.
/// The result is computed once per process.
const CudaDriverStatus& probeCudaDriver();

/// The device a user asked for with --device: "cpu", "cuda" or "auto".
/// Returns "cpu" or "cuda", or throws std::runtime_error with the reason when "cuda" was asked
/// for and cannot be used. `cudaBackendReady` says whether the caller can run its program on
/// a GPU (tessel-run and tessel-gpt can, through runtime/cuda/CudaExecutor.h); when it
/// cannot, "auto" picks the CPU and "cuda" is an error that says so.
std::string resolveDevice(const std::string& requested, bool cudaBackendReady);

}  // namespace tessel::rt
