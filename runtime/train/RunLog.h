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
//   peak_memory_bytes: parameters + optimizer state + inputs + the arena's high-water mark so
//   far, on rank 0;
//   run (step 1 only): {model, describe, plan, device, world_size, steps, unit, config {...},
//   memory [{rank, parameters, optimizer_state, inputs, activation_arena} bytes per rank]}.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/exec/Executor.h"  // CollectiveCounters
#include "runtime/exec/Program.h"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace tessel::trainer {

/// Bytes of one rank's program by role.
struct RankMemory {
  int64_t parameters = 0, optimizerState = 0, inputs = 0, activationArena = 0;
  int64_t total() const { return parameters + optimizerState + inputs + activationArena; }
};

/// This rank's RankMemory: the Parameter, State and Input buffers of `program` (this rank's
/// shards) and its arena (Program::arenaBytes, every temporary of a step).
RankMemory rankMemory(const rt::Program& program);

/// Every rank's rankMemory as the log's "memory" array, in rank order. Collective over `comm`
/// (every rank calls it; null: this rank alone).
nlohmann::json memoryByRank(const rt::Program& program, rt::Communicator* comm);

/// Adds comm_bytes and comm_exposed_s of one step to `record`: the difference between the
/// executor's counters after and before it.
void addStepCommunication(nlohmann::json& record, const rt::CollectiveCounters& before,
                          const rt::CollectiveCounters& after);

}  // namespace tessel::trainer
