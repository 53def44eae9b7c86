// The compile-time choice of each CPU GEMM's library (rt::GemmStep::backend): OpenBLAS or
// oneDNN, by measurement, per distinct shape.
//
// For each distinct (m, n, k, batch, transA, transB, shared A/B, accumulate, dtypes) of a
// program's GEMM steps, tuneGemms times both backends (runtime/exec/CpuGemm.h) on scratch
// buffers of that shape (dense batch strides; 0 kept for a shared operand; a GEMM of more than
// 0.5 GFLOP is timed on a slice of that size, halving the batch, then m or n): one warm-up run
// each, then the best of up to kTuneRepetitions runs of each, alternating, stopping early once
// kTuneSecondsPerBackend per backend has passed; the faster one is written into every step of
// that shape. A whole-program budget (kTuneBudgetSeconds) bounds the rest: shapes past it take
// oneDNN (where it runs their types) when batch is 1 and OpenBLAS for batches, unmeasured but
// cached all the same, so that a shape's library never changes between two compiles sharing
// a cache. Decisions are cached in "gemm-tuning.json" under the kernel cache
// folder (codegen/HostCompiler.h's kernelCacheDir), keyed by the shape, the dtypes, the CPU
// model name and both libraries' versions (not the threads: measured at the first compile's
// thread count, kept for all, so bundles and trainers agree), so a second compile measures
// nothing. A cache file that does not parse is reported on stderr and rewritten. Processes
// sharing the cache tune one at a time (flock on "gemm-tuning.json.lock"), so the ranks of
// a run read the first one's choices and run the same library per shape. A choice measured on
// a busy machine stays until the file is deleted (then the next compile measures again).
//
// TESSEL_GEMM_BACKEND chooses the policy: "tune" (the default) as above, "openblas" or
// "onednn" to force a library on every GEMM (oneDNN only where it makes a primitive for the
// shape and types on this CPU, OpenBLAS otherwise: oneDNN 2.6 has no bf16 matmul below
// AVX-512), "default" to leave every step's backend as lowering left it (the executor's
// OpenBLAS). Plain C++ with the runtime; no MLIR.
#pragma once

#include <string>
#include <vector>

#include "runtime/exec/Program.h"

namespace tessel {

inline constexpr int kTuneRepetitions = 5;
inline constexpr double kTuneSecondsPerBackend = 0.01;
inline constexpr double kTuneBudgetSeconds = 0.6;

/// How backends are chosen (TESSEL_GEMM_BACKEND; see the file comment).
enum class GemmPolicy { Tune, OpenBlas, OneDnn, Default };

/// TESSEL_GEMM_BACKEND's policy (Tune when unset). Throws std::runtime_error naming the
/// variable and the accepted values for any other spelling.
GemmPolicy gemmPolicyFromEnvironment();

struct GemmTunerOptions {
  GemmPolicy policy = GemmPolicy::Tune;
  int threads = 0;        // > 0: set as the process's OpenMP/OpenBLAS threads first; 0: as they are
  std::string cacheDir;   // the kernel cache folder (kernelCacheDir); "" = no cache file
};

/// One distinct GEMM shape and what was chosen for it.
struct GemmChoice {
  std::string key;  // the shape part of the cache key, e.g. "f32*f32->f32 1024x768x768 b1 nn acc0"
  rt::GemmBackend backend = rt::GemmBackend::Default;
  double openBlasGflops = 0, oneDnnGflops = 0;  // 0 when not measured (forced, over budget, unsupported)
  bool cached = false;                          // read from the cache file
  int steps = 0;                                // GEMM steps of this shape in the program
};

/// Sets every GemmStep's backend in `program` by `options.policy` and returns one entry per
/// distinct shape, in first-appearance order. Cache read or write failures are warnings on
/// stderr, never errors.
std::vector<GemmChoice> tuneGemms(rt::Program& program, const GemmTunerOptions& options);

/// A few lines for --explain: "GEMM backends (<policy>, <threads> threads):" then one line per
/// distinct shape with the choice and the measured GFLOP/s.
std::string explainGemmChoices(const std::vector<GemmChoice>& choices, GemmPolicy policy, int threads);

}  // namespace tessel
