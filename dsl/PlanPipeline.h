// The pipeline part of a plan's vocabulary (Plan::pipeline, dsl/Plan.h): the built-in
// schedules and PipelineConfig (PipelineSites and parseLayerRanges, which name PlanSites,
// are in dsl/Plan.h). Included by dsl/Plan.h; no MLIR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

/// A pipeline schedule (Plan::pipeline): the order in which each stage runs the forward (F)
/// and backward (B) passes of the step's microbatches.
enum class Schedule {
  /// GPipe (Huang et al. 2019): every microbatch's forward pass, then every backward pass;
  /// each stage holds all M microbatches' activations.
  GPipe,
  /// 1F1B (PipeDream-Flush, Narayanan et al. 2019): stage s of p warms up with p - s - 1
  /// forward passes, then alternates one forward and one backward pass, then cools down;
  /// stage s holds at most p - s microbatches' activations.
  OneFOneB,
  /// Megatron-LM's interleaved 1F1B (Narayanan et al. 2021): each rank runs v >= 2 chunks of
  /// layers (PipelineConfig::virtual_stages); the bubble shrinks to (p-1)/(v M + p - 1).
  Interleaved,
  /// ZB-H1 (Qi et al. 2023): 1F1B with each backward pass split into its input gradient (I)
  /// and weight gradient (W), the W deferred to fill the cooldown bubbles.
  ZeroBubble,
};

/// "gpipe", "1f1b", "interleaved" or "zero-bubble": the --pp-schedule spelling, and the
/// pipeline's option (PipelineOptions::pipelineSchedule).
const char* scheduleName(Schedule schedule);

/// The schedule named `name` (a scheduleName spelling), or nullopt for any other text.
std::optional<Schedule> scheduleNamed(const std::string& name);

/// Plan::pipeline's options. Fields in this order, so that designated initializers list
/// them so: virtual_stages, stages, schedule_file.
struct PipelineConfig {
  /// Chunks of layers per rank, v >= 1: the model is cut into p x v stages (chunks), and
  /// chunk c runs on rank c % p (the loop placement of Megatron-LM's interleaved schedule).
  /// Schedule::Interleaved needs v >= 2; the other built-in schedules need v = 1.
  int64_t virtual_stages = 1;
  /// The layer ranges of the chunks, inclusive and 0-based, one per chunk in chunk order:
  /// {{0, 5}, {6, 11}} gives layers 0-5 to chunk 0 and 6-11 to chunk 1. They must be
  /// contiguous (each starts where the previous ends, the first at layer 0) and there must be
  /// exactly p x v of them. Empty: the compiler balances the layers over the chunks with its
  /// cost model (FLOPs and bytes per op; the embedding and the head count).
  std::vector<std::pair<int64_t, int64_t>> stages;
  /// A user schedule: the path of a CSV file of actions per rank (one row per rank, in
  /// PyTorch's pipelining vocabulary: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, e.g.
  /// "0F0,0SEND_F0"; runtime/pipeline/). It replaces the `schedule` argument. Empty: none.
  std::string schedule_file;
};

}  // namespace tessel
