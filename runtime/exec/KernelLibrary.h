// Loading built kernel libraries: the runtime half of the host-compiler driver.
//
// Promise: a shared object of generated C++ kernels (a bundle's kernels.so, or one the
// compiler just built into the kernel cache) is opened with dlopen and its `extern "C"`
// kernels resolved by name; a missing file or symbol is a KernelLibraryError naming it.
// Bundles verify a library's bytes with kernelLibraryChecksum and the CPU it was built for
// with hostCpuFlags before loading it. Plain C++ and libdl: no compiler piece (building a
// library is codegen/HostCompiler.h, which uses this header).
#pragma once

#include <stdexcept>
#include <string>

namespace tessel {

/// Thrown when a kernel library or one of its symbols cannot be loaded.
struct KernelLibraryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A loaded kernel library. Movable, closes the library on destruction.
class KernelLibrary {
 public:
  KernelLibrary() = default;
  KernelLibrary(KernelLibrary&& other) noexcept;
  KernelLibrary& operator=(KernelLibrary&& other) noexcept;
  ~KernelLibrary();

  /// The address of an `extern "C"` symbol; throws KernelLibraryError naming it if missing.
  void* symbol(const std::string& name) const;
  /// The shared object's path.
  const std::string& path() const { return path_; }
  /// True if the process compiled the library just before loading it (false: a cached or
  /// shipped object was reused).
  bool compiled() const { return compiled_; }

 private:
  friend KernelLibrary loadKernelLibrary(const std::string&, bool);
  void* handle_ = nullptr;
  std::string path_;
  bool compiled_ = false;
};

/// Loads an already built kernel library (e.g. a bundle's kernels.so) from `path`; throws
/// KernelLibraryError naming the file if it cannot be loaded. Does not verify its contents:
/// check kernelLibraryChecksum first. `compiled` is what KernelLibrary::compiled() reports
/// (set by the builder that has just produced the file).
KernelLibrary loadKernelLibrary(const std::string& path, bool compiled = false);

/// "fnv1a64:<16 hex digits>:<size>" of a library's bytes, the checksum bundles record.
std::string kernelLibraryChecksum(const std::string& bytes);

/// This CPU's feature flags ("fpu sse2 avx2 ..."; /proc/cpuinfo). Objects built with
/// -march=native are valid only on CPUs that have all of them: they are part of the kernel
/// cache key, and bundles record them.
std::string hostCpuFlags();

}  // namespace tessel
