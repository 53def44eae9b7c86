// The host-compiler driver: builds generated C++ kernels into a shared object and loads it.
//
// Promise: the same source and flags give the same cache key (a 64-bit FNV-1a hash of the
// compiler, the flags and the source), the object is built once into the cache folder
// (written to a temporary name and renamed, so a half-written library is never loaded), and
// a second run recompiles nothing. A compiler failure is a HostCompileError whose message
// holds the compiler's diagnostics with the offending generated lines. Build folders never
// outlive their build (codegen/KernelCache.h). Loading the built object is the runtime's
// (runtime/exec/KernelLibrary.h: KernelLibrary, loadKernelLibrary, kernelLibraryChecksum,
// hostCpuFlags). No MLIR here.
#pragma once

#include <string>
#include <vector>

#include "runtime/exec/KernelLibrary.h"

namespace tessel {

/// Thrown when the host compiler rejects generated code or its library cannot be written to
/// the cache. (A library that cannot be loaded, or lacks a symbol, is the base class
/// KernelLibraryError.)
struct HostCompileError : KernelLibraryError {
  using KernelLibraryError::KernelLibraryError;
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
  /// On a cache miss, print to stdout which library is built, of how many kernels, and when
  /// it is done with its time: a cold -O3 build takes seconds to minutes, and a silent pause
  /// looks like a hang. Callers set it when stdout is a terminal (trainer::stdoutIsTerminal),
  /// so that logs and tests that read stdout see nothing new.
  bool announce = false;
};

/// Compiles `source` (or reuses the cached object for the same key) and loads it. Before a
/// build it sweeps stale build folders of the cache (sweepStaleBuildFolders). A rejected source is
/// kept as "k<key>.rejected.cpp" in the cache folder, which the message names.
KernelLibrary buildKernelLibrary(const std::string& source, const HostCompileOptions& options = {});

/// For every "<fileName>:<line>: ... error" entry of a compiler log, the offending generated
/// line and the kernel header comment above it ("tessel.add at loc(...)": the op and the
/// user's source line). Used in HostCompileError messages.
std::string explainCompileLog(const std::string& source, const std::string& fileName,
                              const std::string& log);

/// The cache folder `options` resolves to.
std::string kernelCacheDir(const HostCompileOptions& options);

}  // namespace tessel
