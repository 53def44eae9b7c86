// The host-compiler driver: builds generated C++ kernels into a shared object and loads it.
//
// Promise: the same source and flags give the same cache key (a 64-bit FNV-1a hash of the
// compiler, the flags and the source), the object is built once into the cache folder
// (written to a temporary name and renamed, so a half-written library is never loaded), and
// a second run recompiles nothing. A compiler failure is a HostCompileError whose message
// holds the compiler's diagnostics with the offending generated lines. No MLIR here.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace tessel {

/// Thrown when the host compiler rejects generated code or a library cannot be loaded.
struct HostCompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// How to build kernels.
struct HostCompileOptions {
  std::string compiler = "c++";
  /// -fno-math-errno lets sqrtf vectorise (kernels never read errno).
  std::vector<std::string> flags = {"-O3", "-march=native", "-fopenmp", "-fno-math-errno",
                                    "-shared", "-fPIC", "-std=c++17", "-w"};
  /// Where libraries are cached; "" means $TESSEL_CACHE_DIR, else $XDG_CACHE_HOME/tessel,
  /// else ~/.cache/tessel, each with /kernels appended.
  std::string cacheDir;
};

/// A loaded kernel library. Movable, closes the library on destruction.
class KernelLibrary {
 public:
  KernelLibrary() = default;
  KernelLibrary(KernelLibrary&& other) noexcept;
  KernelLibrary& operator=(KernelLibrary&& other) noexcept;
  ~KernelLibrary();

  /// The address of an `extern "C"` symbol; throws HostCompileError naming it if missing.
  void* symbol(const std::string& name) const;
  /// The shared object's path in the cache.
  const std::string& path() const { return path_; }
  /// True if this load compiled the source (false: the cached object was reused).
  bool compiled() const { return compiled_; }

 private:
  friend KernelLibrary buildKernelLibrary(const std::string&, const HostCompileOptions&);
  friend KernelLibrary loadKernelLibrary(const std::string&);
  void* handle_ = nullptr;
  std::string path_;
  bool compiled_ = false;
};

/// Compiles `source` (or reuses the cached object for the same key) and loads it.
KernelLibrary buildKernelLibrary(const std::string& source, const HostCompileOptions& options = {});

/// Loads an already built kernel library (e.g. a bundle's kernels.so) from `path`; throws
/// HostCompileError naming the file if it cannot be loaded. Does not verify its contents:
/// check kernelLibraryChecksum first.
KernelLibrary loadKernelLibrary(const std::string& path);

/// "fnv1a64:<16 hex digits>:<size>" of a library's bytes, the checksum bundles record.
std::string kernelLibraryChecksum(const std::string& bytes);

/// For every "<fileName>:<line>: ... error" entry of a compiler log, the offending generated
/// line and the kernel header comment above it ("tessel.add at loc(...)": the op and the
/// user's source line). Used in HostCompileError messages.
std::string explainCompileLog(const std::string& source, const std::string& fileName,
                              const std::string& log);

/// This CPU's feature flags ("fpu sse2 avx2 ..."; /proc/cpuinfo). Objects built with
/// -march=native are valid only on CPUs that have all of them: they are part of the cache
/// key, and bundles record them.
std::string hostCpuFlags();

/// The cache folder `options` resolves to.
std::string kernelCacheDir(const HostCompileOptions& options);

}  // namespace tessel
