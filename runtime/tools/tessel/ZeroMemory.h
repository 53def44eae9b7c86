// The ZeRO paper's per-GPU memory of model states (Rajbhandari, Rasley, Ruwase, He, "ZeRO:
// Memory Optimizations Toward Training Trillion Parameter Models", SC'20, Figure 1), for
// `tessel memory`'s formula mode.
//
// Promise: closed forms only, nothing compiled or allocated. Model states in mixed precision
// with Adam(W): 2 bytes per parameter of bf16/fp16 parameters, 2 of bf16/fp16 gradients and
// K = 12 of fp32 optimizer state (master weights, momentum, variance: 4 each). With Psi
// parameters and N data-parallel GPUs, per GPU:
//   stage 0 (baseline, plain data parallelism)   (2 + 2 + K) Psi     = 16 Psi
//   stage 1 (optimizer state sharded)            2 Psi + 2 Psi + K Psi / N = 4 Psi + 12 Psi / N
//   stage 2 (+ gradients sharded)                2 Psi + (2 + K) Psi / N   = 2 Psi + 14 Psi / N
//   stage 3 (+ parameters sharded)               (2 + 2 + K) Psi / N       = 16 Psi / N
// Activations, temporary buffers, communication buffers and fragmentation are not included.
#pragma once

#include "runtime/train/FlagChecks.h"  // parseMemorySize

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cli {

/// Bytes per parameter of each model state (Figure 1's mixed-precision Adam setting).
inline constexpr double kParamBytes = 2, kGradBytes = 2, kOptimizerBytes = 12;  // K = 12

/// One row of the table: a ZeRO-DP stage and its bytes per GPU.
struct ZeroStageMemory {
  int stage;            // 0 (baseline) .. 3
  std::string name;     // "baseline", "1: optimizer state", ...
  std::string formula;  // "4Ψ + 12Ψ/N" (Ψ: parameters, N: GPUs)
  double bytes;         // per GPU, from the closed form (real-valued: Ψ / N need not be whole)
};

/// Bytes per GPU of the model states at ZeRO `stage` (0..3) for `params` parameters (Ψ > 0)
/// over `gpus` data-parallel GPUs (N >= 1). Throws std::invalid_argument naming the bad value.
double zeroBytesPerGpu(int stage, double params, int64_t gpus);

/// The four rows, stage 0 to 3, for Ψ = `params` and N = `gpus` (checked as zeroBytesPerGpu).
std::vector<ZeroStageMemory> zeroMemoryTable(double params, int64_t gpus);

/// A memory size with its unit ("80GiB"): runtime/train/FlagChecks.h, shared with the trainers'
/// --device-memory.
using trainer::parseMemorySize;

}  // namespace tessel::cli
