// The pipeline's predicted timeline in the trainer; see ExplainPipeline.h.
#include "dsl/trainer/ExplainPipeline.h"

#include "runtime/train/FlagChecks.h"

#include "runtime/exec/MemoryBreakdown.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tessel::trainer {

namespace pl = rt::pipeline;

namespace {

/// Seconds of one step of an action's span under the cost model (send/recv steps: none, their
/// cost is StageCosts::p2pSeconds between the actions).
double stepSeconds(const rt::Program& program, const rt::Step& step, const PipelineCostFlags& flags) {
  auto bytes = [&](int buffer) { return static_cast<double>(program.buffers.at(buffer).bytes()); };
  if (const auto* g = std::get_if<rt::GemmStep>(&step))
    return 2.0 * static_cast<double>(g->batch * g->m * g->n * g->k) / (flags.gemmGflops * 1e9);
  if (const auto* k = std::get_if<rt::KernelStep>(&step)) {
    double moved = 0;
    for (int a : k->args) moved += bytes(a);
    return moved / (flags.memGbps * 1e9);
  }
  if (const auto* c = std::get_if<rt::CopyStep>(&step)) return 2 * bytes(c->src) / (flags.memGbps * 1e9);
  const auto& coll = std::get<rt::CollectiveStep>(step);
  if (coll.kind == rt::CollectiveStep::Kind::SendRecv) return 0;
  double moved = 0;
  for (int t : coll.tensors) moved += bytes(t);
  return moved / (flags.p2pGbps * 1e9);
}

/// Splits a count into two floats exact below 2^44 (the all-reduce carries f32 only).
constexpr double kSplit = 4194304.0;  // 2^22

std::string layersText(const StageModel& m) {
  std::string text;
  for (const auto& [first, last] : m.layerRuns)
    text += (text.empty() ? "" : ", ") + (first == last ? std::to_string(first) : fmt::format("{}-{}", first, last));
  const bool one = m.layerRuns.size() == 1 && m.layerRuns[0].first == m.layerRuns[0].second;
  text = m.layerRuns.empty() ? std::string("no blocks") : (one ? "block " : "blocks ") + text;
  return m.otherModules.empty() ? text : text + " + " + m.otherModules;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

/// The closed form's text and value for a built-in schedule, or nothing for a CSV.
std::optional<std::pair<std::string, double>> closedForm(const rt::PipelineInfo& info) {
  pl::ScheduleKind kind;
  try {
    kind = pl::parseScheduleKind(info.schedule);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  const char* form = kind == pl::ScheduleKind::Interleaved  ? "(p-1)/(v m+p-1)"
                     : kind == pl::ScheduleKind::ZeroBubble ? "(p-1)/(3m+p-1) (F = I = W)"
                                                            : "(p-1)/(m+p-1)";
  return std::make_pair(std::string(form),
                        pl::closedFormBubble(kind, info.stages, info.microbatches, info.virtualStages));
}

}  // namespace

std::string PipelineCostFlags::describe() const {
  return fmt::format("GEMM {:g} GFLOP/s, kernels {:g} GB/s, p2p {:g} GB/s + {:g} us per transfer", gemmGflops,
                     memGbps, p2pGbps, p2pLatencyUs);
}

void addPipelineCostFlags(CLI::App& app, PipelineCostFlags& flags) {
  // Rates in (0, 1e6] (a petaflop per second, a petabyte per second: far above any device),
  // the latency in [0, 1e6] microseconds (one second).
  auto positive = positiveUpTo(1e6);
  app.add_option("--pp-gemm-gflops", flags.gemmGflops,
                 "pipeline cost model (--explain, --trace's predicted track): GEMM rate in GFLOP/s")
      ->capture_default_str()->check(positive);
  app.add_option("--pp-mem-gbps", flags.memGbps, "pipeline cost model: generated kernels' memory rate in GB/s")
      ->capture_default_str()->check(positive);
  app.add_option("--pp-p2p-gbps", flags.p2pGbps,
                 "pipeline cost model: send/recv (and tensor-parallel collective) bandwidth in GB/s")
      ->capture_default_str()->check(positive);
  app.add_option("--pp-p2p-latency-us", flags.p2pLatencyUs,
                 "pipeline cost model: fixed cost of one send/recv transfer in microseconds")
      ->capture_default_str()->check(numberIn(0, 1e6));
}

StageModel stageModel(const rt::Program& lowered, const PipelineCostFlags& flags) {
  const rt::Function* f = lowered.function("train_step");
  if (!lowered.pipeline || !f || f->actions.empty())
    throw std::invalid_argument("pipeline cost model: the program has no pipeline actions in train_step");
  const rt::PipelineInfo& info = *lowered.pipeline;
  const size_t chunks = static_cast<size_t>(info.stages * info.virtualStages);
  StageModel m;
  pl::StageCosts& c = m.costs;
  std::vector<double>* byKind[] = {&c.forward, &c.backward, &c.inputGrad, &c.weightGrad};  // F, B, I, W
  std::vector<std::vector<double>> count(4, std::vector<double>(chunks, 0));
  for (std::vector<double>* v : byKind) v->assign(chunks, 0);
  for (const rt::ActionSpan& span : f->actions) {
    // A group of comm actions is one span named by its actions joined with '+'.
    const pl::Action a = pl::parseAction(span.name.substr(0, span.name.find('+')));
    if (!a.isCompute()) continue;
    if (a.stage < 0 || static_cast<size_t>(a.stage) >= chunks)
      throw std::invalid_argument(fmt::format("pipeline cost model: action {} names chunk {} of {}", span.name,
                                              a.stage, chunks));
    double seconds = 0;
    for (int64_t s = span.firstStep; s < span.endStep; ++s) seconds += stepSeconds(lowered, f->steps[s], flags);
    const int kind = static_cast<int>(a.kind);  // F, B, I, W are ActionKind's first four
    (*byKind[kind])[a.stage] += seconds;
    count[kind][a.stage] += 1;
  }
  for (int k = 0; k < 4; ++k)
    for (size_t ch = 0; ch < chunks; ++ch)
      if (count[k][ch] > 0) (*byKind[k])[ch] /= count[k][ch];
  for (size_t ch = 0; ch < chunks; ++ch) {
    if (count[2][ch] > 0 || count[3][ch] > 0) {
      c.backward[ch] = c.inputGrad[ch] + c.weightGrad[ch];  // a split backward: B = I + W
    } else {
      c.inputGrad[ch] = c.weightGrad[ch] = c.backward[ch] / 2;  // as uniformCosts splits it
    }
  }
  double transferBytes = 0, transfers = 0;
  for (const rt::Step& step : f->steps)
    if (const auto* coll = std::get_if<rt::CollectiveStep>(&step); coll && coll->kind == rt::CollectiveStep::Kind::SendRecv)
      for (int t : coll->tensors) transferBytes += static_cast<double>(lowered.buffers[t].bytes()), transfers += 1;
  if (transfers > 0)
    c.p2pSeconds = flags.p2pLatencyUs * 1e-6 + transferBytes / transfers / (flags.p2pGbps * 1e9);
  std::set<std::string> others;
  std::set<int64_t> layers;
  for (const rt::Buffer& b : lowered.buffers) {
    if (b.kind != rt::BufferKind::Parameter) continue;
    m.parameters += b.globalNumel();
    const size_t at = b.name.find("blocks.");
    if (at != std::string::npos) {
      layers.insert(std::stoll(b.name.substr(at + 7)));
    } else {
      others.insert(b.name.substr(0, b.name.find('.')));
    }
  }
  for (int64_t layer : layers) {
    if (m.layerRuns.empty() || m.layerRuns.back().second + 1 != layer)
      m.layerRuns.emplace_back(layer, layer);
    else
      m.layerRuns.back().second = layer;
  }
  for (const std::string& o : others) m.otherModules += (m.otherModules.empty() ? "" : ", ") + o;
  m.memoryBytes = rt::memoryBreakdown(lowered).total();
  m.arenaBytes = lowered.arenaBytes();
  return m;
}

std::vector<StageModel> gatherStageModels(const StageModel& mine, int64_t stage, int64_t stages,
                                          rt::Communicator* comm) {
  const size_t chunks = mine.costs.forward.size();
  const size_t runs = chunks / static_cast<size_t>(stages);  // at most one run of blocks per chunk
  const size_t record = 4 * chunks + 1 + 2 * runs + 3 * 2;  // costs, p2p, block runs, 3 counts split in two
  std::vector<float> all(record * static_cast<size_t>(stages), -1.0f);
  auto put = [&](const StageModel& m, float* out) {
    for (const std::vector<double>* v : {&m.costs.forward, &m.costs.backward, &m.costs.inputGrad, &m.costs.weightGrad})
      for (double x : *v) *out++ = static_cast<float>(x);
    *out++ = static_cast<float>(m.costs.p2pSeconds);
    for (size_t r = 0; r < runs; ++r) {  // -1: no run
      *out++ = r < m.layerRuns.size() ? static_cast<float>(m.layerRuns[r].first) : -1.0f;
      *out++ = r < m.layerRuns.size() ? static_cast<float>(m.layerRuns[r].second) : -1.0f;
    }
    for (int64_t n : {m.parameters, m.memoryBytes, m.arenaBytes}) {
      *out++ = static_cast<float>(static_cast<double>(n / static_cast<int64_t>(kSplit)));
      *out++ = static_cast<float>(static_cast<double>(n % static_cast<int64_t>(kSplit)));
    }
  };
  put(mine, all.data() + record * static_cast<size_t>(stage));
  if (comm && comm->worldSize() > 1)
    comm->allReduce(all.data(), static_cast<int64_t>(all.size()), rt::DType::F32, rt::ReduceOp::Max,
                    "pipeline cost model")->wait();
  std::vector<StageModel> out(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s) {
    if (s == stage) {
      out[s] = mine;
      continue;
    }
    const float* in = all.data() + record * static_cast<size_t>(s);
    StageModel& m = out[s];
    for (std::vector<double>* v : {&m.costs.forward, &m.costs.backward, &m.costs.inputGrad, &m.costs.weightGrad})
      for (size_t ch = 0; ch < chunks; ++ch) v->push_back(std::max(0.0f, *in++));
    m.costs.p2pSeconds = std::max(0.0f, *in++);
    for (size_t r = 0; r < runs; ++r, in += 2)
      if (in[0] >= 0) m.layerRuns.emplace_back(static_cast<int64_t>(in[0]), static_cast<int64_t>(in[1]));
    for (int64_t* n : {&m.parameters, &m.memoryBytes, &m.arenaBytes}) {
      const double hi = in[0], lo = in[1];
      in += 2;
      *n = hi < 0 ? 0 : static_cast<int64_t>(hi) * static_cast<int64_t>(kSplit) + static_cast<int64_t>(lo);
    }
  }
  return out;
}

pl::Schedule programSchedule(const rt::PipelineInfo& info) {
  try {
    return pl::buildSchedule({pl::parseScheduleKind(info.schedule), info.stages, info.microbatches,
                              info.virtualStages});
  } catch (const std::invalid_argument&) {
    std::ifstream in(info.schedule);
    if (!in) throw;
    std::stringstream text;
    text << in.rdbuf();
    return pl::parseScheduleCsv(text.str(), info.schedule);
  }
}

pl::StageCosts combinedCosts(const std::vector<StageModel>& stages) {
  pl::StageCosts c = stages.at(0).costs;
  for (const StageModel& s : stages) {
    for (size_t ch = 0; ch < c.forward.size(); ++ch) {
      c.forward[ch] = std::max(c.forward[ch], s.costs.forward[ch]);
      c.backward[ch] = std::max(c.backward[ch], s.costs.backward[ch]);
      c.inputGrad[ch] = std::max(c.inputGrad[ch], s.costs.inputGrad[ch]);
      c.weightGrad[ch] = std::max(c.weightGrad[ch], s.costs.weightGrad[ch]);
    }
    c.p2pSeconds = std::max(c.p2pSeconds, s.costs.p2pSeconds);
  }
  return c;
}

std::string explainPipeline(const rt::PipelineInfo& info, const std::vector<StageModel>& stages,
                            const PipelineCostFlags& flags) {
  const pl::Schedule schedule = programSchedule(info);
  const pl::StageCosts costs = combinedCosts(stages);
  std::string out = fmt::format("pipeline: schedule {}, p = {} stages along '{}', M = {} microbatches per step, "
                                "v = {} chunk{} per rank\n",
                                info.schedule, info.stages, info.axis, info.microbatches, info.virtualStages,
                                info.virtualStages == 1 ? "" : "s");
  out += fmt::format("pipeline cost model: {} (--pp-gemm-gflops, --pp-mem-gbps, --pp-p2p-gbps, "
                     "--pp-p2p-latency-us); one transfer {:.4g} ms\n",
                     flags.describe(), costs.p2pSeconds * 1e3);
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageModel& m = stages[s];
    std::string perChunk;
    for (size_t ch = s; ch < costs.forward.size(); ch += stages.size())
      perChunk += fmt::format("{}chunk {}: F {:.4g} ms, B {:.4g} ms (I {:.4g}, W {:.4g})", perChunk.empty() ? "" : "; ",
                              ch, costs.forward[ch] * 1e3, costs.backward[ch] * 1e3, costs.inputGrad[ch] * 1e3,
                              costs.weightGrad[ch] * 1e3);
    out += fmt::format("stage {}: {}, {} parameters, memory {:.3f} MiB per rank (activation arena {:.3f} MiB); {}\n",
                       s, layersText(m), m.parameters, mib(m.memoryBytes), mib(m.arenaBytes), perChunk);
  }
  out += "schedule per rank (predicted):\n" + pl::asciiChart(schedule, costs);
  const pl::Simulation sim = pl::simulate(schedule, costs);
  if (auto form = closedForm(info))
    out += fmt::format("bubble fraction: predicted {:.4f}, closed form {} = {:.4f} (uniform stages, no p2p time)\n",
                       sim.bubbleFraction, form->first, form->second);
  else
    out += fmt::format("bubble fraction: predicted {:.4f} (a user schedule has no closed form)\n", sim.bubbleFraction);
  std::string peaks;
  for (size_t r = 0; r < sim.peakLiveActivations.size(); ++r)
    peaks += fmt::format("{}{}", r ? ", " : "", sim.peakLiveActivations[r]);
  out += fmt::format("peak live microbatch activations per stage: [{}]{}\n", peaks,
                     info.schedule == "1f1b" ? " (the standard 1F1B: min(p - s, M) on stage s, after a warmup of "
                                               "p - s - 1 forwards; a warmup of p - s would hold one microbatch more)"
                                             : "");
  return out;
}

void addPredictedTrack(const std::string& path, const rt::PipelineInfo& info, const std::vector<StageModel>& stages,
                       const std::vector<int64_t>& stageOfRank, const PipelineCostFlags& flags) {
  nlohmann::json doc;
  {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(fmt::format("--trace '{}': cannot read it back to add the prediction", path));
    doc = nlohmann::json::parse(in);
  }
  // Each rank's first traced train_step: where its predicted step starts.
  std::map<int64_t, double> start;
  for (const nlohmann::json& e : doc["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("cat", "") == "function" && e.value("name", "") == "train_step") {
      const int64_t pid = e["pid"].get<int64_t>();
      const double ts = e["ts"].get<double>();
      if (!start.count(pid) || ts < start[pid]) start[pid] = ts;
    }
  const pl::Simulation sim = pl::simulate(programSchedule(info), combinedCosts(stages));
  const nlohmann::json predicted = pl::traceEvents(sim);
  const auto form = closedForm(info);
  for (size_t w = 0; w < stageOfRank.size(); ++w) {
    if (!start.count(static_cast<int64_t>(w))) continue;
    const int64_t stage = stageOfRank[w];
    for (nlohmann::json e : predicted) {
      if (e["pid"].get<int64_t>() != stage) continue;
      e["pid"] = static_cast<int64_t>(w);
      if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + start[static_cast<int64_t>(w)];
      if (e.value("name", "") == "predicted step") {
        e["args"] = {{"stage", stage},
                     {"peak_live_activations", sim.peakLiveActivations.at(static_cast<size_t>(stage))},
                     {"bubble_fraction", sim.bubbleFraction},
                     {"cost_model", flags.describe()}};
        if (form) e["args"]["closed_form_bubble"] = form->second;
      }
      doc["traceEvents"].push_back(std::move(e));
    }
  }
  doc["otherData"]["predicted"] = {{"schedule", info.schedule}, {"makespan_us", sim.makespan * 1e6},
                                   {"bubble_fraction", sim.bubbleFraction},
                                   {"peak_live_activations", sim.peakLiveActivations}};
  std::ofstream out(path);
  out << doc.dump();
  if (!out) throw std::runtime_error(fmt::format("--trace '{}': cannot write the predicted track", path));
}

}  // namespace tessel::trainer
