// What a program's collective steps do, for people and for the ranks: the --explain report
// (buckets, where each all-reduce starts and waits, bytes per rank per step) and a hash of
// the collective schedule that ranks compare before training (--check-schedule).
//
// Promise: both are computed from the rt::Program alone (no MLIR), so the JIT trainer and
// tessel-run report the same thing for the same program.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/exec/Executor.h"  // CollectiveCounters
#include "runtime/exec/Program.h"

#include <array>
#include <cstdint>
#include <string>

namespace tessel::rt {

/// Bytes one step of `function` moves: payload = what each rank contributes (the bucket
/// bytes, summed over its all-reduce starts, gradient buckets and synchronous ones alike); wire = what a ring all-reduce sends per rank,
/// 2 (N - 1) / N x payload (reduce-scatter then all-gather, each N - 1 chunks of payload / N;
/// Patarasuk & Yuan 2009, the nccl-tests "busbw" factor).
/// The shard moves (all_gather, reduce_scatter, all_to_all; Program.h) add their payload
/// (Program.h's rule) and a wire of (N - 1) / N x payload (each rank sends or receives all
/// blocks but its own); send_recv steps their bytes sent, as payload and as wire.
struct CollectiveBytes {
  int64_t buckets = 0;      // gradient buckets
  int64_t synchronous = 0;  // forward/backward collectives (CollectiveStep::synchronous)
  int64_t payloadBytes = 0;
  double ringWireBytes = 0;
  /// Collectives and payload bytes per kind (collectiveKindIndex); they sum to the above.
  std::array<int64_t, kCollectiveKinds> kindCollectives{};
  std::array<int64_t, kCollectiveKinds> kindPayloadBytes{};
  /// True when some collective is not an all-reduce.
  bool movesShards() const { return kindCollectives[1] + kindCollectives[2] + kindCollectives[3] > 0; }
};
CollectiveBytes collectiveBytes(const Program& program, const std::string& function);

/// The --explain report of `function`'s collectives: per gradient bucket its parameters and
/// bytes (and "in place" when its gradients are views of it), the step it starts after and
/// the step it waits before (with their ops' source locations); per forward/backward (synchronous) all-reduce its group, bytes, step and
/// source location; per all_gather / reduce_scatter / all_to_all its group, dimension(s),
/// payload bytes, step and source location; then the payload and ring wire bytes per rank per
/// call (N = the largest group) and, on a line of their own, the payload bytes per kind. ""
/// if it has none.
std::string explainCollectives(const Program& program, const std::string& function);

/// One line of what the collectives of `steps` runs of @train_step cost this rank, from an
/// executor's counters: all-reduces and the payload bytes of every collective per step, the ring wire bytes
/// 2 (N - 1) / N x payload for N = `world`, and the seconds per step in collective starts
/// (packing, issuing) and in waits. The waits are the exposed communication: the time the
/// backward pass did not hide. "communication: ... exposed (waits) <ms> ms/step\n", then per
/// kind that ran its collectives and payload bytes per step ("communication by kind: all_reduce
/// <n>/step <bytes> bytes/step, all_gather ...\n"), or "" when no collective ran or `steps` <= 0.
std::string communicationSummary(const Program& program, const CollectiveCounters& counters, int64_t steps,
                                 int world);

/// The second line of communicationSummary: per kind that ran, its collectives and payload
/// bytes per step of `steps` ("communication by kind: all_reduce 4.0/step 8192 bytes/step,
/// all_gather 2.0/step 4096 bytes/step\n"); "" when none ran or `steps` <= 0.
std::string communicationByKind(const CollectiveCounters& counters, int64_t steps);

/// FNV-1a (64 bit) over every function's name and, per collective step in order, its kind,
/// bucket index, reduce op, axes, synchronous flag, dimensions, group, tensor element counts
/// and a send_recv's peers and sends:
/// equal on ranks that will issue the same collectives with the same sizes in the same order.
uint64_t collectiveScheduleHash(const Program& program);

/// All-gathers every rank's collectiveScheduleHash over `comm` and throws
/// std::runtime_error naming the ranks whose schedule differs from rank 0's (their
/// collectives would pair up wrongly or deadlock). A world of one always passes. Under
/// pipeline parallelism (Program::pipeline) each rank is compared only with the lowest rank
/// of its own stage (the ranks of a stage run one program; different stages run different
/// programs), and all ranks must agree on the number of stages.
/// Every multi-rank run already proves, without the flag, that its communication cannot hang
/// or mismatch (runtime/exec/ProgramProof.h: every group's members issue the same collectives
/// with the same bytes, every send has its recv). This check is stricter where it applies:
/// ranks that run one program must have identical collective steps, tensor by tensor, so
/// that, say, two buckets of equal bytes packing different gradients are refused too.
void checkCollectiveSchedule(const Program& program, Communicator& comm);

}  // namespace tessel::rt
