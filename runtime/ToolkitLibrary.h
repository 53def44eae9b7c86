// Opening a CUDA-toolkit library (cuBLASLt, NCCL, ...) with dlopen, the same way for all: the
// path in an environment variable if set, then the soname (the loader's search), then
// $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Header-only, no dependencies but libdl.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::rt {

/// A library that dlopen accepted: its handle (never closed: the tables built from it live
/// as long as the process) and the path or name it was opened by.
struct ToolkitLibrary {
  void* handle = nullptr;
  std::string path;
};

/// Opens `soname` (e.g. "libnccl.so.2") from the candidates above, with `envVar` (e.g.
/// "TESSEL_LIBNCCL") first. Throws std::runtime_error "<what> (<soname>) cannot be loaded;
/// tried:" with every candidate and its dlerror, and how to point `envVar` at the library.
inline ToolkitLibrary openToolkitLibrary(const std::string& what, const std::string& soname,
                                         const char* envVar) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv(envVar); env && *env) candidates.push_back(env);
  candidates.push_back(soname);
  if (const char* home = std::getenv("CUDA_HOME"); home && *home)
    candidates.push_back(std::string(home) + "/lib64/" + soname);
  candidates.push_back("/usr/local/cuda/lib64/" + soname);
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
