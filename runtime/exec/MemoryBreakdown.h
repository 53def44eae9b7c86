// A compiled program's memory per rank, known before launch: every byte the CPU executor
// allocates for it, by role, computed from the lowered program alone (no MLIR, nothing
// allocated), so the trainers' --explain and --device-memory, and `tessel memory --model`,
// share one answer.
//
// Promise: total() is exactly what Executor allocates through its AllocationCounter
// (runtime/exec/AllocationCounter.h): each persistent buffer rounded up to the executor's
// 64-byte alignment, one block per persistent role, the bf16 GEMMs' f32 scratch, and one
// arena of Program::arenaBytes(). The roles come from the buffers' kinds and the steps that
// use them, not from any plan, so they stay right whatever pass made the program:
//   parameters       Parameter buffers (this rank's shards, f32 master copies);
//   gradients        persistent gradient State (a name ending ":grad_accum" or with
//                    ":grad" in its slot: accumulators across microsteps, stage 1/2 shards);
//   optimizer_state  every other State buffer (AdamW exp_avg and exp_avg_sq, SGD momentum);
//   inputs           Input and Coordinate buffers (tokens, targets, hyper-parameters);
//   gemm_scratch     the f32 copies of one batch item's operands that bf16 GEMMs run through;
//   arena            the temporaries of every step (Program::arenaBytes, from the memory plan).
// The arena's contents are broken down as well, by the role of each temporary:
//   gathered_parameters  all_gather outputs whose input is a parameter shard (or a temporary
//                        made from one in one step, e.g. its bf16 cast);
//   communication        the flat buckets of gradient all-reduces and the staging buffers of
//                        all_gather / reduce_scatter / all_to_all;
//   gradients            temporaries an optimizer step reads that have a parameter's size (a
//                        step that reads optimizer state or updates a parameter);
//   activations          everything else (saved activations, their gradients, scratch).
// The views of an in-place bucket (Program.h CollectiveStep::inPlace) count as gradients or
// activations outside the bucket's start-to-wait window and as its communication bytes
// inside it (tempLiveness).
// Each is given at the step where the most temporary bytes are live (`peak`) and, for the
// gradients, as the sum over all gradient temporaries (`gradientTemporaries`: the gradient
// bytes of one optimizer step, whether or not they are live at once).
//
// One program runs on every rank (SPMD), so every rank allocates the same bytes; what differs
// is the padding of unevenly sharded dimensions (Program.h ShardDim), which paddingBytes gives
// per rank.
#pragma once

#include "runtime/exec/Program.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

/// The executor's alignment of every block and of every persistent buffer in its block (bytes).
inline constexpr int64_t kAllocationAlignment = 64;

/// `bytes` rounded up to kAllocationAlignment.
inline int64_t alignedBytes(int64_t bytes) {
  return (bytes + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
}

/// The roles of the executor's allocations, in the order the executor allocates them.
enum class MemoryRole { Parameters, Gradients, OptimizerState, Inputs, GemmScratch, Arena };
inline constexpr int kMemoryRoles = 6;
/// "parameters", "gradients", "optimizer_state", "inputs", "gemm_scratch", "arena".
const char* memoryRoleName(MemoryRole role);

/// The allocation role of persistent buffer `b` (Parameter, State, Input or Coordinate; see
/// the file comment). Throws std::logic_error for a Temp (it lives in the arena).
MemoryRole persistentRole(const Buffer& b);

/// Elements of the f32 scratch bf16 GEMMs convert one batch item's operands into: the largest
/// A (m k), B (k n) and C (m n) over every GEMM step with a bf16 operand; zeros without one.
struct GemmScratch {
  int64_t a = 0, b = 0, c = 0;
  /// Bytes as allocated: each part rounded up to kAllocationAlignment.
  int64_t bytes() const { return alignedBytes(a * 4) + alignedBytes(b * 4) + alignedBytes(c * 4); }
};
GemmScratch gemmScratchOf(const Program& program);

/// The arena's temporaries by role (bytes, each rounded up to the memory plan's 64-byte alignment).
struct ArenaContents {
  int64_t gatheredParameters = 0, communication = 0, gradients = 0, activations = 0;
  int64_t total() const { return gatheredParameters + communication + gradients + activations; }
};

/// One rank's memory (see the file comment). Bytes throughout.
struct MemoryBreakdown {
  std::array<int64_t, kMemoryRoles> bytes{};  // by MemoryRole, as allocated
  ArenaContents peak;                // live at the step where the most temporary bytes are
  std::string peakFunction;          // that step's function ("" without temporaries)
  int64_t peakStep = -1;             // and its index in Function::steps
  int64_t gradientTemporaries = 0;   // every gradient temporary (arena), summed
  int64_t parameterElements = 0;     // elements of the global parameters (every rank's shards together)
  int64_t get(MemoryRole role) const { return bytes[static_cast<size_t>(role)]; }
  /// Every byte the executor allocates for the program: the sum over roles.
  int64_t total() const;
  /// The largest role (by bytes; the first of equals).
  MemoryRole largest() const;
};

/// The breakdown of `program` (validated or not; only its buffers and steps are read).
MemoryBreakdown memoryBreakdown(const Program& program);

/// Bytes of the Parameter and State buffers on world rank `rank` that hold no global element
/// (the padding of unevenly sharded dimensions); 0 for every rank of an evenly sharded or
/// unsharded program. Requires 0 <= rank < the mesh's size (rank 0 without a mesh).
int64_t paddingBytes(const Program& program, int rank);

/// The breakdown as JSON: {"total", one field per role, "arena_peak": {"function", "step",
/// "gathered_parameters", "communication", "gradients", "activations", "fragmentation"},
/// "largest" (the largest role's name), "gradient_temporaries", "parameter_elements"}; bytes
/// as integers.
nlohmann::json memoryJson(const MemoryBreakdown& m);

/// The --explain report, a few lines: per role bytes and MiB, the arena's contents at its
/// peak step, and the padding per rank when some rank has any. Ends with a newline.
std::string explainMemory(const Program& program, const MemoryBreakdown& m);

/// Why a rank cannot run the program within `budget` bytes of device memory: "" when
/// m.total() <= budget, else one line naming `rank`, the predicted bytes, the budget and the
/// largest part ("rank 3 needs 10737418240 bytes (10.00 GiB, 10.74 GB), more than the
/// 8589934592 bytes (8.00 GiB, 8.59 GB) of --device-memory, 2147483648 bytes (...) short; its
/// largest part is the arena, ... bytes (...)").
std::string deviceMemoryRefusal(const MemoryBreakdown& m, int64_t budget, int rank);

/// "12.34 GiB, 13.25 GB" (from 2^30 bytes up) or "0.61 MiB, 0.64 MB": bytes in binary and
/// decimal units, two decimals.
std::string formatBytes(double bytes);

}  // namespace tessel::rt
