// The command-line rewriting of `tessel launch` (Launch.cpp): reading and replacing the flags
// of the job's command (mpirun's rank count, the trainer's --plan, --checkpoint-dir and
// --resume), shrinking a plan's data-parallel axes to fewer ranks, and counting the slots of an
// OpenMPI hostfile. Pure functions of their arguments (the hostfile reader aside), so the unit
// tests (test/unit/LaunchArgsTest.cpp) cover every form without starting a process.
//
// A flag of the command is found in either of its two spellings, `--flag VALUE` (two words) or
// `--flag=VALUE` (one word); the last occurrence counts (the trainers take a repeated flag's
// last value, runtime/train/LastValueWins.h), and a replacement rewrites that one in the
// spelling it found. The search covers the whole command: mpirun's options and the trainer's alike, as
// the trainers have no flag named -n, -np or --np and mpirun none named --plan, --resume or
// --checkpoint-dir.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::cli {

/// A command line: the program and its arguments, one word each.
using Words = std::vector<std::string>;

/// The value of the last occurrence of any of `names` in `command` (`--x V` or `--x=V`), or
/// nullopt when none is there. Throws std::runtime_error when the flag is the last word (no value follows it).
std::optional<std::string> flagValue(const Words& command, const std::vector<std::string>& names);

/// `command` with the value of the last occurrence of `names` replaced by `value` (same spelling), or,
/// when none of them is there, with `names[0] value` appended at the end (after the program's
/// own arguments, where mpirun passes it to every rank).
Words withFlagValue(const Words& command, const std::vector<std::string>& names, const std::string& value);

/// The spellings of mpirun's rank count: -np, -n and --np (OpenMPI, MPICH).
const std::vector<std::string>& rankCountFlags();

/// The rank count the command asks mpirun for (-np N, -n N, --np N, or their =N forms), or
/// nullopt when it has none (a single-process command). Throws std::runtime_error for a value
/// that is not a whole number >= 1.
std::optional<int64_t> commandRanks(const Words& command);

/// One axis of a plan ("dp=4" -> {"dp", 4}).
struct PlanAxis {
  std::string name;
  int64_t size = 1;
  bool operator==(const PlanAxis&) const = default;
};

/// The axes of a trainer's --plan text ("dp=2,tp=2"), outermost first. Checks only the form
/// "name=size" with a whole size >= 1 (the trainer checks the rest); throws std::runtime_error
/// naming the plan otherwise.
std::vector<PlanAxis> parsePlanAxes(const std::string& plan);

/// The plan text of `axes` ("dp=2,tp=2").
std::string planText(const std::vector<PlanAxis>& axes);

/// The product of the axes' sizes: the ranks the plan needs.
int64_t planRanks(const std::vector<PlanAxis>& axes);

/// The plan `axes` shrunk to exactly `ranks` ranks by lowering the data-parallel axes only: dp
/// first (fsdp stays as large as it can), then fsdp; every other axis (tp, pp) keeps its size,
/// and no axis grows. When `globalBatch` > 0, the new data-parallel degree (dp x fsdp) times
/// `microsteps` must divide it (the trainer's rule). nullopt when no such plan exists.
std::optional<std::vector<PlanAxis>> shrinkPlanTo(const std::vector<PlanAxis>& axes, int64_t ranks,
                                                  int64_t globalBatch = 0, int64_t microsteps = 1);

/// What restartShape decided.
struct RestartShape {
  int64_t ranks = 0;             // the ranks of the restart
  std::vector<PlanAxis> plan;    // its plan (the old one when ranks did not change)
};

/// The largest R with minRanks <= R <= min(available, planRanks(axes)) for which shrinkPlanTo
/// finds a plan, and that plan; nullopt when there is none.
std::optional<RestartShape> restartShape(const std::vector<PlanAxis>& axes, int64_t available, int64_t minRanks,
                                         int64_t globalBatch = 0, int64_t microsteps = 1);

/// The slots of an OpenMPI hostfile: the sum of `slots=N` over its host lines ("host slots=N
/// [max_slots=M]"; '#' starts a comment; blank lines are skipped; a host listed twice counts
/// twice, as mpirun counts it). A host line without slots= is refused (OpenMPI's default for
/// it differs between versions, so the count would be a guess). Throws std::runtime_error
/// naming the file (and the line) when it cannot be read, a line is malformed, or there is no
/// slot at all.
int64_t hostfileSlots(const std::string& path);

}  // namespace tessel::cli
