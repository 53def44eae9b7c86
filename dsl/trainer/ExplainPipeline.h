// The pipeline's predicted timeline in the trainer: a cost model of each stage's compiled
// program (runtime/pipeline's StageCosts), --explain's per-rank schedule chart with its phases,
// bubble fraction and peak live activations beside the closed forms, and the "predicted" track
// that --trace adds beside the measured one.
//
// Cost model (nominal constants, flags; state them beside every prediction):
//   - a GEMM step costs 2 x batch x m x n x k FLOPs at --pp-gemm-gflops;
//   - a kernel step moves the bytes of its arguments (outputs and inputs, each once), a copy
//     its bytes twice, at --pp-mem-gbps;
//   - a collective step inside an action (tensor parallelism's all-reduces) moves its payload at
//     --pp-p2p-gbps;
//   - one p2p transfer costs --pp-p2p-latency-us plus the mean bytes of the program's send/recv
//     tensors at --pp-p2p-gbps.
// An action's cost is the sum over the steps of its span (rt::Function::actions); a chunk's F
// (B, I, W) cost is the mean over its microbatches.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/exec/Program.h"
#include "runtime/pipeline/Simulate.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::trainer {

/// The cost model's constants (see the file comment). Their defaults are nominal rates of one
/// AVX-512 server core (OpenBLAS sgemm and the generated C++ kernels) and MPI over shared
/// memory: fitted to the F and B spans of a GPT L8 C64 T64 pp=2 trace on a Xeon core, where
/// 80 GFLOP/s and 12 GB/s predict them within about 20%. Other machines want their own.
struct PipelineCostFlags {
  double gemmGflops = 80;      // --pp-gemm-gflops: GEMM rate, GFLOP/s
  double memGbps = 12;         // --pp-mem-gbps: generated kernels' memory rate, GB/s
  double p2pGbps = 5;          // --pp-p2p-gbps: send/recv and collective bandwidth, GB/s
  double p2pLatencyUs = 10;    // --pp-p2p-latency-us: fixed cost of one p2p transfer, microseconds
  /// The constants as one line ("GEMM 20 GFLOP/s, kernels 4 GB/s, p2p 5 GB/s + 10 us").
  std::string describe() const;
};

/// Registers --pp-gemm-gflops, --pp-mem-gbps, --pp-p2p-gbps and --pp-p2p-latency-us on `app`.
void addPipelineCostFlags(CLI::App& app, PipelineCostFlags& flags);

/// What one stage's program contributes to the prediction: the costs of its own chunks (the
/// StageCosts vectors have p x v entries; the other stages' entries are 0) and its summary.
struct StageModel {
  rt::pipeline::StageCosts costs;
  /// Its blocks (the N of its blocks.N parameters) as contiguous runs [first, last], ascending:
  /// one per chunk it holds (v with interleaving), fewer where chunks are adjacent.
  std::vector<std::pair<int64_t, int64_t>> layerRuns;
  /// The top-level modules of its other parameters ("wte, wpe"; "ln_f"); known only on the
  /// rank that compiled the stage (gatherStageModels leaves it empty for the others).
  std::string otherModules;
  int64_t parameters = 0;                   // elements of its parameters (global shapes; a tied one counts on each stage)
  int64_t memoryBytes = 0;                  // rt::memoryBreakdown's total per rank
  int64_t arenaBytes = 0;                   // its activation arena
};

/// The stage model of one stage's lowered program. Throws std::invalid_argument when the
/// program has no pipeline record or its train_step has no action spans.
StageModel stageModel(const rt::Program& lowered, const PipelineCostFlags& flags);

/// Every stage's model, on every rank: each rank contributes its own stage's (`mine`, of the
/// stage `stage`), combined with one max all-reduce over `comm` (collective; null: `mine` is
/// the only stage). Entries of a stage no rank holds stay 0.
std::vector<StageModel> gatherStageModels(const StageModel& mine, int64_t stage, int64_t stages,
                                          rt::Communicator* comm);

/// The schedule the programs run (runtime/pipeline buildSchedule of the pipeline record, or the
/// CSV the record names). Throws as buildSchedule / parseScheduleCsv do.
rt::pipeline::Schedule programSchedule(const rt::PipelineInfo& info);

/// The costs of all stages in one StageCosts (per chunk, each from the stage holding it).
rt::pipeline::StageCosts combinedCosts(const std::vector<StageModel>& stages);

/// --explain's pipeline section: the constants, per stage its layers, parameters, memory and
/// costs, the ASCII chart with each rank's warmup/steady/cooldown counts and peak live
/// activations (standard 1F1B: p - s - 1 warmup forwards on stage s, peak min(p - s, M)), and
/// the predicted bubble fraction beside the closed form.
std::string explainPipeline(const rt::PipelineInfo& info, const std::vector<StageModel>& stages,
                            const PipelineCostFlags& flags);

/// Adds the predicted timeline to the trace file `path` (written by --trace on rank 0): per
/// world rank a thread "predicted" (tid 1) whose "predicted step" starts where that rank's first
/// traced train_step starts, with the events of its pipeline stage (`stageOfRank[w]`) and, in
/// the step's args, the predicted peak live activations and bubble fraction and the closed form.
/// Throws std::runtime_error when the file cannot be read or written.
void addPredictedTrack(const std::string& path, const rt::PipelineInfo& info, const std::vector<StageModel>& stages,
                       const std::vector<int64_t>& stageOfRank, const PipelineCostFlags& flags);

}  // namespace tessel::trainer
