// `tessel pipeline`: a pipeline schedule before any rank runs it (runtime/pipeline/). Builds a
// built-in schedule (gpipe, 1f1b, interleaved, zero-bubble) or reads a user's CSV, proves it
// cannot hang under rendezvous semantics (verifySchedule), simulates one step with uniform
// stage costs, and prints the timeline per rank, each rank's warmup / steady / cooldown counts,
// the simulated bubble fraction beside the closed form, and the peak of live microbatch
// activations per rank. --csv writes the schedule, --trace the prediction as Chrome trace
// events. One process, no world.
#include "runtime/pipeline/Schedule.h"
#include "runtime/pipeline/Simulate.h"
#include "runtime/pipeline/Verify.h"
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/train/FlagChecks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace tessel::cli {
namespace {

namespace pp = rt::pipeline;

struct PipelineFlags {
  std::string schedule = "1f1b", csvOut, traceOut;
  int64_t ranks = 0, microbatches = 0, virtualStages = 0;  // 0: not given
  double forwardMs = 1, backwardMs = 2, p2pMs = 0;
  bool json = false;
};

/// What the run checks and simulates.
struct Loaded {
  pp::Schedule schedule;
  int64_t ranks = 0, microbatches = 0, virtualStages = 0;
  std::optional<pp::ScheduleKind> kind;  // empty: a user's CSV
};

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("--schedule: cannot read '{}' (not a built-in schedule: gpipe, 1f1b, "
                                                "interleaved, zero-bubble)", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Loaded load(const PipelineFlags& f) {
  Loaded l;
  const bool file = f.schedule.find('/') != std::string::npos || f.schedule.find('.') != std::string::npos;
  if (file) {
    l.schedule = pp::parseScheduleCsv(readFile(f.schedule), f.schedule);
    l.ranks = static_cast<int64_t>(l.schedule.size());
    if (f.ranks && f.ranks != l.ranks)
      throw std::runtime_error(fmt::format("--pp {}: '{}' has {} rows, one per rank", f.ranks, f.schedule, l.ranks));
    // Unless given: M and v as the file uses them (the verifier then checks every one is complete).
    int64_t mb = 0, chunks = 0;
    for (const auto& row : l.schedule)
      for (const pp::Action& a : row) mb = std::max(mb, a.microbatch + 1), chunks = std::max(chunks, a.stage + 1);
    l.microbatches = f.microbatches ? f.microbatches : std::max<int64_t>(mb, 1);
    l.virtualStages = f.virtualStages ? f.virtualStages : std::max<int64_t>((chunks + l.ranks - 1) / l.ranks, 1);
    return l;
  }
  try {
    l.kind = pp::parseScheduleKind(f.schedule);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("--schedule: {}, or a CSV file (a name with '.' or '/')", e.what()));
  }
  if (!f.ranks) throw std::runtime_error(fmt::format("--pp is needed with the built-in schedule '{}'", f.schedule));
  l.ranks = f.ranks;
  l.microbatches = f.microbatches ? f.microbatches : f.ranks;
  l.virtualStages = f.virtualStages ? f.virtualStages : (*l.kind == pp::ScheduleKind::Interleaved ? 2 : 1);
  l.schedule = pp::buildSchedule({*l.kind, l.ranks, l.microbatches, l.virtualStages});
  return l;
}

int64_t p2pGroups(const pp::Schedule& s) {
  int64_t groups = 0;
  for (const auto& row : s)
    for (size_t i = 0; i < row.size(); ++i) groups += !row[i].isCompute() && (i == 0 || row[i - 1].isCompute());
  return groups;
}

const char* closedFormText(pp::ScheduleKind kind) {
  switch (kind) {
    case pp::ScheduleKind::Interleaved: return "(p-1)/(v m+p-1)";
    case pp::ScheduleKind::ZeroBubble: return "(p-1)/(3m+p-1) (for F = I = W, m >= p)";
    default: return "(p-1)/(m+p-1)";
  }
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw std::runtime_error(fmt::format("cannot write '{}'", path));
}

int run(const PipelineFlags& f) {
  const Loaded l = load(f);
  pp::verifySchedule(l.schedule, l.ranks, l.microbatches, l.virtualStages);
  // Per chunk a v-th of a stage's costs.
  const double v = static_cast<double>(l.virtualStages);
  const pp::StageCosts costs = pp::uniformCosts(l.ranks * l.virtualStages, f.forwardMs / 1e3 / v,
                                                f.backwardMs / 1e3 / v, f.p2pMs / 1e3);
  const pp::Simulation sim = pp::simulate(l.schedule, costs);
  const std::string name = l.kind ? pp::scheduleKindName(*l.kind) : f.schedule;
  std::optional<double> closed;
  if (l.kind) closed = pp::closedFormBubble(*l.kind, l.ranks, l.microbatches, l.virtualStages);
  if (!f.csvOut.empty()) writeText(f.csvOut, pp::scheduleCsv(l.schedule));
  if (!f.traceOut.empty()) {
    nlohmann::json trace = {{"traceEvents", pp::traceEvents(sim, {1, "predicted", true})}, {"displayTimeUnit", "ms"},
                            {"otherData", {{"schedule", name}, {"ranks", l.ranks}, {"microbatches", l.microbatches},
                                           {"virtual_stages", l.virtualStages}}}};
    writeText(f.traceOut, trace.dump() + "\n");
  }
  if (f.json) {
    nlohmann::json j = {{"format", "tessel-pipeline"}, {"schedule", name}, {"ranks", l.ranks},
                        {"microbatches", l.microbatches}, {"virtual_stages", l.virtualStages}, {"verified", true},
                        {"p2p_groups", p2pGroups(l.schedule)}, {"makespan_ms", sim.makespan * 1e3},
                        {"bubble_fraction", sim.bubbleFraction}, {"peak_live_activations", sim.peakLiveActivations}};
    j["closed_form_bubble"] = closed ? nlohmann::json(*closed) : nlohmann::json(nullptr);
    for (const auto& row : l.schedule) {
      const pp::Phases ph = pp::phasesOf(row);
      j["phases"].push_back({{"warmup", ph.warmup}, {"steady", ph.steady}, {"cooldown", ph.cooldown},
                             {"weight_grads", ph.weightGrads}});
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("tessel pipeline: {}, {} ranks, {} microbatches, {} chunk(s) per rank; F {} ms, B {} ms per stage, "
             "p2p {} ms\n", name, l.ranks, l.microbatches, l.virtualStages, f.forwardMs, f.backwardMs, f.p2pMs);
  fmt::print("verified: every action has its inputs and every send its recv; {} p2p groups cannot deadlock under "
             "rendezvous semantics\n\n", p2pGroups(l.schedule));
  fmt::print("{}\n", pp::asciiChart(l.schedule, costs));
  if (closed)
    fmt::print("bubble fraction: simulated {:.4f}, closed form {:.4f}: {}\n", sim.bubbleFraction, *closed,
               closedFormText(*l.kind));
  else
    fmt::print("bubble fraction: simulated {:.4f} (a user schedule has no closed form)\n", sim.bubbleFraction);
  fmt::print("peak live activations per rank: {}", fmt::join(sim.peakLiveActivations, " "));
  if (l.kind == pp::ScheduleKind::OneFOneB) {
    std::vector<int64_t> bound;
    for (int64_t s = 0; s < l.ranks; ++s) bound.push_back(std::min(l.ranks - s, l.microbatches));
    fmt::print(" (1F1B: min(p - s, M) = {})", fmt::join(bound, " "));
  }
  fmt::print("\n");
  return 0;
}

}  // namespace

Action setupPipeline(CLI::App& sub) {
  auto f = std::make_shared<PipelineFlags>();
  sub.add_option("--schedule", f->schedule,
                 "gpipe, 1f1b, interleaved (Megatron-LM's, needs M a multiple of --pp), zero-bubble (ZB-H1), or a "
                 "CSV file of actions per rank in PyTorch's pipelining vocabulary (0F2, 1SEND_F0, 0I1, ...; one row "
                 "per rank, # comments)")
      ->capture_default_str()->check(trainer::nonEmpty("schedule"));
  sub.add_option("--pp", f->ranks, "pipeline ranks p (a CSV's row count when not given)")
      ->check(trainer::integerIn(1, 256));
  sub.add_option("--microbatches", f->microbatches,
                 "microbatches M per step (default: --pp; a CSV's highest microbatch + 1)")
      ->check(trainer::integerIn(1, 4096));
  sub.add_option("--virtual-stages", f->virtualStages,
                 "chunks v per rank (interleaved; default 2 for interleaved, else 1; a CSV's chunks / p)")
      ->check(trainer::integerIn(1, 64));
  sub.add_option("--forward-ms", f->forwardMs, "forward milliseconds of one microbatch through one rank's stage "
                                               "(a chunk takes a v-th)")
      ->capture_default_str()->check(trainer::positiveUpTo(1e6));
  sub.add_option("--backward-ms", f->backwardMs, "backward milliseconds (B; zero-bubble's I and W take half each)")
      ->capture_default_str()->check(trainer::positiveUpTo(1e6));
  sub.add_option("--p2p-ms", f->p2pMs, "milliseconds of one send/recv group's transfer")
      ->capture_default_str()->check(trainer::numberIn(0, 1e6));
  sub.add_option("--csv", f->csvOut, "write the schedule as CSV (PyTorch's layout, one row per rank)")
      ->type_name("FILE")->check(trainer::writableFile());
  sub.add_option("--trace", f->traceOut, "write the predicted step as Chrome trace-event JSON (Perfetto): one "
                                         "process per rank, thread 'predicted'")
      ->type_name("FILE")->check(trainer::writableFile());
  addJsonFlag(sub, f->json);
  return [f](Context&) { return run(*f); };
}

}  // namespace tessel::cli
