// Step traces: what a rank did during a window of training steps, as Chrome trace-event JSON
// (the format Perfetto and chrome://tracing open), merged over the ranks.
//
// Promise:
// - Events are complete events ("ph": "X") with a start and a duration in microseconds, on one
//   track per rank (pid = rank, tid 0: the thread that runs the loop and the executor, which
//   issues and waits for every collective), so they nest: a step holds its data loading, its
//   functions (train_step) and its loss all-reduce; a function holds its kernels, GEMMs,
//   copies and collective starts and waits. The gaps a step's direct children leave are
//   written as "idle" events, so a step's children add up to the step.
// - Recording is off outside the window (setActive), so untraced steps pay one branch per
//   executor step.
// - Clocks: every rank starts its clock (alignClocks) as it leaves one all-reduce, so time 0 is
//   the same moment on every rank to within the all-reduce's exit skew (microseconds on one
//   host; a network hop's latency across hosts).
#pragma once

#include "runtime/comm/Communicator.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

/// One complete event.
struct TraceEvent {
  std::string name;
  std::string category;  // "step", "data", "function", "kernel", "gemm", "copy", "collective_start",
                         // "collective_wait", "collective", "p2p" (a send_recv step), "pipeline"
                         // (a pipeline action: encloses its steps' events), "idle"
  double startUs = 0;    // since the aligned time 0
  double durationUs = 0;
  std::string detail;    // shown as args.detail (a step's number, a GEMM's shape, a location)
};

class TraceRecorder {
public:
  using Clock = std::chrono::steady_clock;

  /// Starts the clock at time 0 after an all-reduce over `comm` (null: a world of one), so the
  /// ranks' clocks agree (see the promise). Collective when comm has several ranks.
  void alignClocks(Communicator* comm);
  /// Records only while active.
  void setActive(bool active) { active_ = active; }
  bool active() const { return active_; }
  /// Records [start, end) (when active).
  void complete(std::string name, const char* category, Clock::time_point start, Clock::time_point end,
                std::string detail = {});
  /// Adds "idle" events for the gaps between the events inside [start, end) that no other event
  /// inside it covers (the direct children of an event spanning it). Call when the step is done.
  void fillIdle(Clock::time_point start, Clock::time_point end);
  const std::vector<TraceEvent>& events() const { return events_; }

private:
  double micros(Clock::time_point t) const;
  bool active_ = false;
  Clock::time_point epoch_ = Clock::now();
  std::vector<TraceEvent> events_;
};

/// Records an event from construction to destruction on `trace` (none when it is null or
/// inactive at construction).
class TraceScope {
public:
  TraceScope(TraceRecorder* trace, std::string name, const char* category, std::string detail = {});
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

private:
  TraceRecorder* trace_;
  std::string name_, detail_;
  const char* category_;
  TraceRecorder::Clock::time_point start_;
};

/// This rank's events as trace-event JSON objects (comma-separated, no brackets), with
/// pid = `rank` and the process and thread name metadata ("rank R", `host`).
std::string traceEventsJson(const TraceRecorder& trace, int rank, const std::string& host);

/// Gathers every rank's events to rank 0 over `comm` (null: a world of one), which writes
/// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}} to `path`. Collective.
/// Throws std::runtime_error on rank 0 when the file cannot be written.
void writeTrace(const TraceRecorder& trace, Communicator* comm, const std::string& path,
                const std::string& otherDataJson);

}  // namespace tessel::rt
