// The NVRTC driver: compiles generated CUDA C++ kernels to a cubin, the CUDA twin of
// HostCompiler.h.
//
// Promise: NVRTC is opened with dlopen, so Tessel builds and runs where no CUDA toolkit
// exists (nvrtcAvailable() says so, and why); no CUDA header is needed to build this file.
// The same source, options and NVRTC version give the same cache key (64-bit FNV-1a); the
// cubin, PTX and compile log are built once into the cache folder (each written to a
// temporary name and renamed, the cubin last, so a half-written entry is never read) and a
// second compile reuses them. The source is kept beside them (k<key>.cu), so the source of a
// cached cubin can be read (the tests' stand-in CUDA driver, test/standin, finds it there).
// NVRTC needs no GPU and no driver. A compile failure is a CudaCompileError whose message
// holds NVRTC's log with the offending generated lines and the kernel header comments
// ("// tessel.add at loc(...)") above them. No MLIR here.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace tessel {

/// Thrown when NVRTC cannot be loaded, rejects generated code, or the cache cannot be written.
struct CudaCompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// How to compile CUDA kernels.
struct CudaCompileOptions {
  /// The target: "sm_90" gives a cubin (and PTX); a virtual "compute_90" gives PTX only.
  std::string arch = "sm_90";
  /// -lineinfo: source lines in the cubin for profilers (about 2.5x the cubin size).
  bool lineInfo = true;
  /// Extra NVRTC options, e.g. "-maxrregcount=32" or "--use_fast_math".
  std::vector<std::string> flags;
  /// Where compiled modules are cached; "" means $TESSEL_CACHE_DIR, else
  /// $XDG_CACHE_HOME/tessel, else ~/.cache/tessel, each with /cubins appended.
  std::string cacheDir;
  /// -I folders (cuda_bf16.h, cuda_fp16.h). Their headers are not hashed: a toolkit change
  /// changes the NVRTC version, which is.
  std::vector<std::string> includeDirs = {"/usr/local/cuda/include"};
};

/// One kernel's resources as ptxas reports them (ptxas -v). Sizes in bytes, per thread for
/// registers, spills and stack, per block for shared memory (static __shared__ only).
struct CudaKernelInfo {
  /// The entry name as ptxas prints it: plain for extern "C", mangled otherwise.
  std::string name;
  int registers = 0;
  int spillStoreBytes = 0, spillLoadBytes = 0;
  int sharedBytes = 0;
  int stackBytes = 0;
};

/// A compiled module.
struct CudaModule {
  /// The ELF cubin for options.arch; empty for a virtual (compute_XX) arch.
  std::vector<char> cubin;
  /// The PTX NVRTC produced alongside (NVRTC 13 gives it for sm_XX targets too).
  std::string ptx;
  /// Per-kernel resources, in the order ptxas compiled them.
  std::vector<CudaKernelInfo> kernels;
  /// NVRTC's log (the ptxas -v report and any warnings).
  std::string log;
  /// True if this call ran NVRTC (false: the cached entry was reused).
  bool compiled = false;
};

/// Whether NVRTC can be loaded; if not, *why says what was tried. The libraries tried, in
/// order: $TESSEL_NVRTC (a path), $CUDA_HOME/lib64 and $CUDA_HOME/lib, the sonames
/// libnvrtc.so, libnvrtc.so.13 and libnvrtc.so.12 (the loader's search path), then
/// /usr/local/cuda/lib64 and /usr/local/cuda/lib. The first that loads and exports every
/// function the driver needs wins; the result is kept for the process.
bool nvrtcAvailable(std::string* why = nullptr);

/// NVRTC's version, e.g. "13.0". Throws CudaCompileError if NVRTC cannot be loaded.
std::string nvrtcVersion();

/// Compiles `source` to a cubin for options.arch, with -lineinfo (if asked) and ptxas -v so
/// the log reports each kernel's registers, spills, shared memory and stack (parsed into
/// `kernels`). Cached on disk by source + options + NVRTC version. NVRTC names the source
/// "tessel_kernels.cu" in its log. Throws CudaCompileError with NVRTC's log and, for each
/// error line, the generated line and the kernel header comment above it.
CudaModule compileCuda(const std::string& source, const CudaCompileOptions& options = {});

/// The kernels of a ptxas -v report ("Compiling entry function 'k'", "Function properties
/// for k", "N bytes stack frame, N bytes spill stores, N bytes spill loads", "Used N
/// registers, ..., N bytes smem"). Non-entry functions are skipped.
std::vector<CudaKernelInfo> parsePtxasInfo(const std::string& log);

/// The cache folder `options` resolves to.
std::string cubinCacheDir(const CudaCompileOptions& options);

}  // namespace tessel
