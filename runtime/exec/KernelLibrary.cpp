// Loading built kernel libraries; see KernelLibrary.h.
#include "runtime/exec/KernelLibrary.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <fstream>

#include "runtime/numeric/Fnv1a.h"

namespace tessel {

KernelLibrary::KernelLibrary(KernelLibrary&& o) noexcept
    : handle_(o.handle_), path_(std::move(o.path_)), compiled_(o.compiled_) {
  o.handle_ = nullptr;
}

KernelLibrary& KernelLibrary::operator=(KernelLibrary&& o) noexcept {
  if (this != &o) {
    if (handle_) dlclose(handle_);
    handle_ = o.handle_;
    path_ = std::move(o.path_);
    compiled_ = o.compiled_;
    o.handle_ = nullptr;
  }
  return *this;
}

KernelLibrary::~KernelLibrary() {
  if (handle_) dlclose(handle_);
}

void* KernelLibrary::symbol(const std::string& name) const {
  void* p = handle_ ? dlsym(handle_, name.c_str()) : nullptr;
  if (!p) throw KernelLibraryError(fmt::format("kernel '{}' is missing from '{}'", name, path_));
  return p;
}

KernelLibrary loadKernelLibrary(const std::string& path, bool compiled) {
  KernelLibrary out;
  out.path_ = path;
  out.compiled_ = compiled;
  // RTLD_NODELETE: dlclose never unmaps the kernels or their OpenMP runtime. Without it,
  // closing a library whose kernels ran parallel regions unloads libgomp under its idle
  // worker threads, which then crash the process (seen at exit, ~always, on 2 cores).
  out.handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!out.handle_) throw KernelLibraryError(fmt::format("cannot load '{}': {}", path, dlerror()));
  return out;
}

std::string kernelLibraryChecksum(const std::string& bytes) {
  return fmt::format("fnv1a64:{:016x}:{}", numeric::fnv1a(numeric::kFnv1aOffsetBasis, bytes), bytes.size());
}

std::string hostCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) {
      size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(colon + 2);
    }
  return "";
}

}  // namespace tessel
