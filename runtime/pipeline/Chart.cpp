// The views of a simulated schedule (Simulate.h): phases per rank, the ASCII chart, and Chrome
// trace events.
#include "runtime/pipeline/Simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace tessel::rt::pipeline {
namespace {

bool isBackward(const Action& a) { return a.kind == ActionKind::B || a.kind == ActionKind::I; }

/// "F3.0" (Simulate.h's compute names) -> "0F3" (Action::text).
std::string actionText(const std::string& name) {
  const size_t dot = name.rfind('.');
  const size_t digits = name.find_first_of("0123456789");
  if (dot == std::string::npos || digits == std::string::npos) return name;
  return name.substr(dot + 1) + name.substr(0, digits) + name.substr(digits, dot - digits);
}

/// Integer nanoseconds, so a child's start + duration never passes its parent's end in a reader
/// that adds them.
int64_t nanos(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }

}  // namespace

Phases phasesOf(const std::vector<Action>& rankActions) {
  Phases ph;
  int64_t forwards = 0, backwards = 0, forwardsAfterBackward = 0;
  bool seenBackward = false;
  for (const Action& a : rankActions) {
    if (a.kind == ActionKind::W) ++ph.weightGrads;
    if (a.kind == ActionKind::F) ++forwards, forwardsAfterBackward += seenBackward;
    if (isBackward(a)) ++backwards, seenBackward = true;
  }
  ph.steady = forwardsAfterBackward > 0 ? forwardsAfterBackward + 1 : 0;
  ph.warmup = forwards - ph.steady;
  ph.cooldown = backwards - ph.steady;
  return ph;
}

std::string asciiChart(const Schedule& schedule, const StageCosts& costs, int64_t maxCells) {
  const Simulation sim = simulate(schedule, costs);
  bool manyChunks = false;
  for (const std::vector<Action>& list : schedule) {
    std::set<int64_t> chunks;
    for (const Action& a : list) chunks.insert(a.stage);
    manyChunks |= chunks.size() > 1;
  }
  double unit = 0;
  size_t width = 1;
  auto label = [&](const TimelineEvent& e) -> std::string {
    if (e.cat == "p2p") return "~";
    if (e.cat == "idle") return ".";
    return manyChunks ? e.name : e.name.substr(0, e.name.rfind('.'));
  };
  for (const TimelineEvent& e : sim.events) {
    if (e.cat == "compute" && e.end > e.start) unit = unit == 0 ? e.end - e.start : std::min(unit, e.end - e.start);
    width = std::max(width, label(e).size());
  }
  std::string out;
  if (sim.makespan <= 0 || unit <= 0) {
    out += "(nothing to chart: every action takes no time)\n";
  } else {
    int64_t cells = static_cast<int64_t>(std::ceil(sim.makespan / unit - 1e-9));
    if (cells > std::max<int64_t>(maxCells, 1)) cells = std::max<int64_t>(maxCells, 1), unit = sim.makespan / cells;
    out += fmt::format("one cell = {:.4g} ms; F/B/I/W microbatch{}, ~ p2p, . idle\n", unit * 1e3,
                       manyChunks ? ".chunk" : "");
    size_t next = 0;
    for (size_t r = 0; r < schedule.size(); ++r) {
      std::string row = fmt::format("rank {:>2} |", r);
      for (int64_t k = 0; k < cells; ++k) {
        const double t = (static_cast<double>(k) + 0.5) * unit;
        while (next < sim.events.size() && sim.events[next].rank == static_cast<int64_t>(r) && sim.events[next].end <= t)
          ++next;
        const bool here = next < sim.events.size() && sim.events[next].rank == static_cast<int64_t>(r);
        row += fmt::format("{:<{}}", here ? label(sim.events[next]) : ".", width + 1);
      }
      while (next < sim.events.size() && sim.events[next].rank == static_cast<int64_t>(r)) ++next;
      while (!row.empty() && row.back() == ' ') row.pop_back();
      out += row + "\n";
    }
  }
  for (size_t r = 0; r < schedule.size(); ++r) {
    const Phases ph = phasesOf(schedule[r]);
    out += fmt::format("rank {:>2}: warmup {} F, steady {} F + {} backward, cooldown {} backward{}; peak live "
                       "activations {}\n", r, ph.warmup, ph.steady, ph.steady, ph.cooldown,
                       ph.weightGrads ? fmt::format(", {} W", ph.weightGrads) : "", sim.peakLiveActivations[r]);
  }
  out += fmt::format("makespan {:.6g} ms, bubble fraction {:.4f}\n", sim.makespan * 1e3, sim.bubbleFraction);
  return out;
}

nlohmann::json traceEvents(const Simulation& simulation, const TraceOptions& options) {
  nlohmann::json out = nlohmann::json::array();
  const int64_t ranks = static_cast<int64_t>(simulation.peakLiveActivations.size());
  auto complete = [&](int64_t rank, const std::string& name, const std::string& cat, double start, double end) {
    const int64_t s = nanos(start), e = nanos(end);
    return nlohmann::json{{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", rank}, {"tid", options.tid},
                          {"ts", static_cast<double>(s) / 1e3}, {"dur", static_cast<double>(e - s) / 1e3}};
  };
  for (int64_t r = 0; r < ranks; ++r) {
    if (options.processNames)
      out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", fmt::format("rank {}", r)}}}});
    out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", options.tid},
                   {"args", {{"name", options.thread}}}});
    out.push_back(complete(r, "predicted step", "step", 0, simulation.makespan));
  }
  for (const TimelineEvent& e : simulation.events) {
    nlohmann::json event = complete(e.rank, e.name, e.cat, e.start, e.end);
    if (e.cat == "compute") event["args"] = {{"action", actionText(e.name)}};
    out.push_back(std::move(event));
  }
  return out;
}

}  // namespace tessel::rt::pipeline
