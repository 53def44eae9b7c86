// The pipeline cost model: a schedule's predicted step timeline per rank from per-chunk compute
// costs and a p2p transfer time, its bubble fraction beside the closed forms, the peak number of
// live microbatch activations per rank, an ASCII chart and Chrome trace events of it.
#pragma once

#include "runtime/pipeline/Schedule.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt::pipeline {

/// Per chunk (index = chunk, p * v entries) the seconds of one microbatch's F, B (= I + W), I and
/// W, and the seconds of one p2p transfer. A vector may be empty when the schedule has no action
/// of that kind.
struct StageCosts {
  std::vector<double> forward, backward, inputGrad, weightGrad;
  double p2pSeconds = 0;
};

/// Uniform costs for `chunks` chunks: F = forwardSeconds, B = backwardSeconds, I = W = B / 2.
StageCosts uniformCosts(int64_t chunks, double forwardSeconds, double backwardSeconds, double p2pSeconds);

/// One interval of a rank's predicted timeline (seconds from the step's start).
struct TimelineEvent {
  int64_t rank = 0;
  std::string name;  // compute: kind, microbatch, '.', chunk ("F3.0"); p2p: the group's actions
                     // ("0SEND_F1+0RECV_B0"); idle: "idle"
  std::string cat;   // "compute", "p2p" or "idle"
  double start = 0, end = 0;
};

/// A simulated step.
struct Simulation {
  std::vector<TimelineEvent> events;  // per rank in time order, ranks ascending; they tile [0, makespan]
  double makespan = 0;                // seconds: when the last rank finishes
  /// The time the ranks' compute units do not compute, over all the time they have:
  /// 1 - (sum over ranks of compute seconds) / (ranks x makespan). Idle waits, p2p time and each
  /// rank's tail after it finishes all count as bubble.
  double bubbleFraction = 0;
  /// Per rank the most (microbatch, chunk) activations alive at once: an activation is alive from
  /// its F until its backward has finished with it, i.e. until B, or until W for a split backward
  /// (W reads the layer inputs that F saved). Counted in list order, which timing cannot change.
  std::vector<int64_t> peakLiveActivations;
};

/// Simulates `schedule` (each rank runs its list in order; compute actions take their chunk's
/// cost; a run of comm actions is one group that completes when each transfer has both ends
/// posted plus p2pSeconds, its transfers running concurrently). The schedule must pass
/// verifySchedule (a deadlock throws std::runtime_error). Throws std::invalid_argument when a
/// cost is missing for a chunk, negative or not finite.
Simulation simulate(const Schedule& schedule, const StageCosts& costs);

/// The bubble fraction of the closed forms, for uniform chunks and no p2p time:
///   GPipe, OneFOneB: (p - 1) / (m + p - 1);
///   Interleaved: (p - 1) / (v m + p - 1) (Narayanan et al. 2021, section 2.2);
///   ZeroBubble (ZB-H1, with F = I = W as in Qi et al. 2023's analysis): the bubble is
///     (p - 1)(T_F + T_I - T_W) = (p - 1) T against m (T_F + T_I + T_W) = 3 m T of compute, so
///     (p - 1) / (3 m + p - 1), for m >= p (with fewer microbatches than stages no schedule can
///     hide the (p - 1)-stage fill behind W's).
/// GPipe and 1F1B's form holds for every m >= 1, interleaved's wherever buildSchedule defines it.
/// Throws std::invalid_argument when p, m or v is below 1.
double closedFormBubble(ScheduleKind kind, int64_t p, int64_t m, int64_t v);

/// A rank's phases (any schedule, user ones included): steady is the number of F's after the
/// first backward (B or I) plus the one right before it (0 when no F follows a backward: one
/// alternating pair cannot be told from warmup + cooldown); warmup the F's before the steady
/// phase; cooldown the backwards after it. The standard 1F1B with M >= p - s + 1 gives
/// warmup = cooldown = p - s - 1, steady = M - p + s + 1.
struct Phases {
  int64_t warmup = 0, steady = 0, cooldown = 0, weightGrads = 0;  // weightGrads: W actions
};
/// The phases of one rank's list, as defined above.
Phases phasesOf(const std::vector<Action>& rankActions);

/// The simulated timeline as text, one row per rank: each cell is one time unit (the shortest
/// compute cost, widened so a row has at most maxCells cells) showing what the rank does at the
/// cell's middle: the compute's kind and microbatch ("F3"; "F3.5" with its chunk when a rank has
/// several), "~" p2p, "." idle. Then per rank its phases (phasesOf) and its peak live
/// activations, and the makespan and bubble fraction.
std::string asciiChart(const Schedule& schedule, const StageCosts& costs, int64_t maxCells = 160);

/// Where traceEvents puts the prediction.
struct TraceOptions {
  int64_t tid = 1;                        // the thread of every rank's process (the measured trace uses 0)
  std::string thread = "predicted";       // its name (thread_name metadata)
  bool processNames = false;              // also name each process "rank R" (a trace of its own)
};

/// The simulation as Chrome trace-event objects (the format Perfetto opens): per rank
/// (pid = rank) one complete event ("ph": "X", microseconds) "predicted step" spanning the
/// makespan, holding the timeline's events (cat compute, p2p, idle; args.action the action's
/// text for compute), so the events nest; and the thread_name metadata.
nlohmann::json traceEvents(const Simulation& simulation, const TraceOptions& options = {});

}  // namespace tessel::rt::pipeline
