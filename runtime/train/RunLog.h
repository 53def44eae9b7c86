// What the JSON log (--log-json) and the report (--report) record besides a step's loss:
// the run's memory per rank, and per step the collectives' payload and exposed time.
//
// Log format, one JSON object per step (readers that know only the older fields keep
// working; every field below is optional for a reader):
//   step, loss, lr, grad_norm, tokens_per_s (items per second, whatever the unit), step_seconds,
//   val_loss (steps that validated);
//   grad_norm_by_rank [every rank's gradient norm, in rank order] (more than one rank; a plan
//   must give every rank the same norm);
//   comm_bytes {kind: payload bytes this rank issued in the step} (kinds that ran),
//   comm_exposed_s (seconds blocked in collective waits in the step), when the executor's
//   collective counters are known;
//   peak_memory_bytes: on rank 0, the most bytes its executor had allocated at once so far, as
//   its AllocationCounter measured them (runtime/exec/AllocationCounter.h; the CPU executor),
//   else parameters + optimizer state + inputs + the arena's high-water mark so far;
//   arena_high_water_bytes: the highest arena byte a step touched so far (Executor.h);
//   run (step 1 only): {model, describe, plan, device, world_size, steps, unit, config {...},
//   memory [{rank, parameters, optimizer_state, inputs, activation_arena, predicted_bytes,
//   measured_peak_bytes, measured_arena_bytes} per rank]}: the buffers' bytes by kind
//   (optimizer_state: every State buffer, gradient accumulators included), what the executor
//   allocates by runtime/exec/MemoryBreakdown.h (64-byte aligned, with the bf16 GEMM scratch),
//   and what its AllocationCounter measured before the first step, in all and for the arena
//   (-1 without a counter).
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/exec/AllocationCounter.h"
#include "runtime/exec/Executor.h"  // CollectiveCounters
#include "runtime/exec/Program.h"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace tessel::trainer {

/// Bytes of one rank's program by buffer kind, and what its executor allocates.
struct RankMemory {
  int64_t parameters = 0, optimizerState = 0, inputs = 0, activationArena = 0;
  int64_t predicted = 0;      // rt::memoryBreakdown(program).total()
  int64_t measuredPeak = -1;   // the executor's AllocationCounter peak; -1 without one
  int64_t measuredArena = -1;  // its peak of arena bytes; -1 without one
  int64_t total() const { return parameters + optimizerState + inputs + activationArena; }
};

/// This rank's RankMemory: the Parameter, State and Input buffers of `program` (this rank's
/// shards), its arena (Program::arenaBytes, every
/// temporary of a step), the predicted allocation, and what `counter` measured (null: -1).
RankMemory rankMemory(const rt::Program& program, const rt::AllocationCounter* counter = nullptr);

/// Every rank's rankMemory as the log's "memory" array, in rank order. Collective over `comm`
/// (every rank calls it; null: this rank alone).
nlohmann::json memoryByRank(const rt::Program& program, const rt::AllocationCounter* counter, rt::Communicator* comm);

/// --device-memory: throws std::runtime_error, before anything is allocated, when `program`
/// needs more than `deviceMemory` (a size FlagChecks.h's parseMemorySize reads) on this rank:
/// "--device-memory 80GiB: the plan <plan> does not fit: rank 3 needs ... (rt::deviceMemoryRefusal);
/// shard more ...". Every rank runs the same program, so every rank refuses alike, each naming
/// itself, without waiting for the others. Nothing when `deviceMemory` is empty.
void requireDeviceMemory(const rt::Program& program, const std::string& deviceMemory, int rank,
                         const std::string& plan);

/// Adds comm_bytes and comm_exposed_s of one step to `record`: the difference between the
/// executor's counters after and before it.
void addStepCommunication(nlohmann::json& record, const rt::CollectiveCounters& before,
                          const rt::CollectiveCounters& after);

}  // namespace tessel::trainer
