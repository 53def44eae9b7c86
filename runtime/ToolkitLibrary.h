// Opening a CUDA-toolkit library (cuBLASLt, NCCL, ...) with dlopen, the same way for all: the
// path in an environment variable if set, then the soname (the loader's search), then
// $CUDA_HOME/lib64 and /usr/local/cuda/lib64. $TESSEL_CUDA_LIBRARY_PATH=DIR replaces all but
// the first with DIR/<soname>, for the driver too (cudaLibraryPath): the tests point it at the
// stand-in libraries that run the GPU path on the CPU (test/standin, docs/gpu.md), and a
// library missing there is an error rather than a silent fallback to the real one.
// Header-only, no dependencies but libdl.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::rt {

/// $TESSEL_CUDA_LIBRARY_PATH, or "" when it is unset or empty.
inline std::string cudaLibraryFolder() {
  const char* dir = std::getenv("TESSEL_CUDA_LIBRARY_PATH");
  return dir && *dir ? dir : "";
}

/// What to dlopen for `soname` (e.g. "libcuda.so.1"): DIR/<soname> when
/// $TESSEL_CUDA_LIBRARY_PATH=DIR is set, else the soname itself (the loader's search).
inline std::string cudaLibraryPath(const std::string& soname) {
  const std::string dir = cudaLibraryFolder();
  return dir.empty() ? soname : dir + "/" + soname;
}

/// A library that dlopen accepted: its handle (never closed: the tables built from it live
/// as long as the process) and the path or name it was opened by.
struct ToolkitLibrary {
  void* handle = nullptr;
  std::string path;
};

/// Opens `soname` (e.g. "libnccl.so.2") from the candidates above, with `envVar` (e.g.
/// "TESSEL_LIBNCCL") first and, when $TESSEL_CUDA_LIBRARY_PATH is set, only DIR/<soname>
/// after it. Throws std::runtime_error "<what> (<soname>) cannot be loaded; tried:" with
/// every candidate and its dlerror, and how to point `envVar` at the library.
inline ToolkitLibrary openToolkitLibrary(const std::string& what, const std::string& soname,
                                         const char* envVar) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv(envVar); env && *env) candidates.push_back(env);
  candidates.push_back(cudaLibraryPath(soname));
  if (cudaLibraryFolder().empty()) {
    if (const char* home = std::getenv("CUDA_HOME"); home && *home)
      candidates.push_back(std::string(home) + "/lib64/" + soname);
    candidates.push_back("/usr/local/cuda/lib64/" + soname);
  }
  std::string tried;
  for (const std::string& c : candidates) {
    if (void* lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return {lib, c};
    const char* err = dlerror();
    tried += "\n  " + c + ": " + (err ? err : "cannot be loaded");
  }
  throw std::runtime_error(what + " (" + soname + ") cannot be loaded; tried:" + tried + "\nset " +
                           envVar + " to the path of " + soname);
}

}  // namespace tessel::rt
