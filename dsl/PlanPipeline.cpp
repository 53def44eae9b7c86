// Plan::pipeline: the pipeline-parallel part of a plan, its checks and its text (see Plan.h).
// The stages themselves are cut by the compiler (tessel-split-stages and the passes after it).
#include "dsl/tessel.h"

#include <fstream>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessel {
namespace {

[[noreturn]] void fail(const PlanSite& site, std::string message) {
  throw ModelError(Diagnostic{site.file, site.line, site.column, "", std::move(message)});
}

/// The largest layer index a range may name: --layers is at most 4096 and a model far
/// larger than any is still below 2^20, which keeps the ranges' arithmetic exact.
constexpr int64_t kMaxLayer = int64_t{1} << 20;

/// The checks parseLayerRanges and pipeline() share: each range in order, `first <= last`,
/// starting at layer 0 and each where the previous ends. `site(i)` is range i's site;
/// `label` introduces the message ("--pp-stages" or "pipeline(\"pp\")").
template <typename SiteOf>
void checkContiguous(const std::vector<std::pair<int64_t, int64_t>>& ranges, SiteOf site, const std::string& label) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [first, last] = ranges[i];
    if (first < 0 || last > kMaxLayer)
      fail(site(i), fmt::format("{}: layer range {}-{} (stage {}) is outside [0, 2^20]", label, first, last, i));
    if (first > last)
      fail(site(i), fmt::format("{}: layer range {}-{} (stage {}) is empty: its first layer is after its last",
                                label, first, last, i));
    const int64_t expected = i == 0 ? 0 : ranges[i - 1].second + 1;
    if (first == expected) continue;
    if (i == 0)
      fail(site(i), fmt::format("{}: the first layer range {}-{} must start at layer 0 (every layer belongs to one "
                                "stage)",
                                label, first, last));
    const auto [prevFirst, prevLast] = ranges[i - 1];
    fail(site(i), fmt::format("{}: layer range {}-{} (stage {}) {} {}-{} (stage {}); each range must start at "
                              "layer {}, right after the previous one",
                              label, first, last, i,
                              first < expected ? (first < prevFirst ? "comes before" : "overlaps")
                                               : "leaves a gap after",
                              prevFirst, prevLast, i - 1, expected));
  }
}

}  // namespace

const char* scheduleName(Schedule schedule) {
  switch (schedule) {
  case Schedule::GPipe: return "gpipe";
  case Schedule::OneFOneB: return "1f1b";
  case Schedule::Interleaved: return "interleaved";
  case Schedule::ZeroBubble: return "zero-bubble";
  }
  return "1f1b";
}

std::optional<Schedule> scheduleNamed(const std::string& name) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved, Schedule::ZeroBubble})
    if (name == scheduleName(s)) return s;
  return std::nullopt;
}

std::vector<std::pair<int64_t, int64_t>> parseLayerRanges(const std::string& text, const std::string& flag,
                                                          std::vector<PlanSite>* sites) {
  auto site = [&](size_t at) { return PlanSite{flag, 1, static_cast<int>(at) + 1}; };
  if (text.empty()) fail(site(0), "no layer ranges (expected first-last items such as 0-5,6-11)");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<size_t> starts;
  auto number = [](const std::string& t) {
    return !t.empty() && t.size() <= 7 && t.find_first_not_of("0123456789") == std::string::npos;
  };
  for (size_t pos = 0; pos <= text.size();) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    const size_t dash = item.find('-');
    if (dash == std::string::npos || !number(item.substr(0, dash)) || !number(item.substr(dash + 1)))
      fail(site(pos), fmt::format("'{}' is not a layer range first-last of non-negative integers (e.g. 0-5)", item));
    ranges.emplace_back(std::stoll(item.substr(0, dash)), std::stoll(item.substr(dash + 1)));
    starts.push_back(pos);
    pos = end + 1;
  }
  checkContiguous(ranges, [&](size_t i) { return site(starts[i]); }, flag);
  if (sites)
    for (size_t at : starts) sites->push_back(site(at));
  return ranges;
}

Plan& Plan::pipeline(const std::string& axis, Schedule schedule, int64_t microbatches, PipelineConfig config,
                     std::source_location loc) {
  return pipeline(axis, schedule, microbatches, std::move(config), PipelineSites::at(PlanSite::of(loc)));
}

Plan& Plan::pipeline(const std::string& axis, Schedule schedule, int64_t microbatches, PipelineConfig config,
                     PlanSite site) {
  return pipeline(axis, schedule, microbatches, std::move(config), PipelineSites::at(site));
}

Plan& Plan::pipeline(const std::string& axis, Schedule schedule, int64_t microbatches, PipelineConfig config,
                     PipelineSites sites) {
  const std::string label = fmt::format("pipeline(\"{}\")", axis);
  if (mesh_.size(axis) == 0) {
    std::vector<std::string> names;
    for (const auto& [name, size] : mesh_.axes()) names.push_back(fmt::format("{}={}", name, size));
    fail(sites.call, fmt::format("{}: the mesh ({}) has no axis '{}'", label, fmt::join(names, ","), axis));
  }
  if (microbatches < 1)
    fail(sites.microbatches, fmt::format("{}: {} microbatches; the number of microbatches must be >= 1", label,
                                         microbatches));
  if (config.virtual_stages < 1)
    fail(sites.virtualStages, fmt::format("{}: {} virtual stages; each rank runs at least one stage "
                                          "(virtual_stages >= 1)",
                                          label, config.virtual_stages));
  if (config.schedule_file.empty() && schedule == Schedule::Interleaved && config.virtual_stages < 2)
    fail(sites.schedule, fmt::format("{}: the interleaved schedule runs several chunks of layers per rank; use "
                                     "--pp-virtual-stages >= 2 (virtual_stages in the DSL), got {}",
                                     label, config.virtual_stages));
  if (!config.schedule_file.empty()) {
    std::error_code ec;
    std::ifstream in(config.schedule_file);
    if (!in || std::filesystem::is_directory(config.schedule_file, ec))
      fail(sites.schedule, fmt::format("{}: cannot read the schedule file '{}' ({}; the built-in schedules are "
                                       "gpipe, 1f1b, interleaved and zero-bubble)",
                                       label, config.schedule_file,
                                       std::filesystem::exists(config.schedule_file, ec) ? "not a readable file"
                                                                                         : "no such file"));
  }
  auto rangeSite = [&](size_t i) { return i < sites.stages.size() ? sites.stages[i] : sites.call; };
  checkContiguous(config.stages, rangeSite, label);
  const int64_t chunks = mesh_.size(axis) * config.virtual_stages;  // both <= 2^20: exact
  if (!config.stages.empty() && static_cast<int64_t>(config.stages.size()) != chunks)
    fail(sites.stages.empty() ? sites.call : PlanSite{sites.stages.front().file, 1, 1},
         fmt::format("{}: {} layer range{} given, but {}={} x {} virtual stage{} need {} (one per stage)", label,
                     config.stages.size(), config.stages.size() == 1 ? "" : "s", axis, mesh_.size(axis),
                     config.virtual_stages, config.virtual_stages == 1 ? "" : "s", chunks));
  pipelineAxis_ = axis;
  pipelineSchedule_ = schedule;
  pipelineScheduleFile_ = std::move(config.schedule_file);
  pipelineMicrobatches_ = microbatches;
  pipelineVirtualStages_ = config.virtual_stages;
  pipelineLayerRanges_ = std::move(config.stages);
  pipelineSites_ = std::move(sites);
  return *this;
}

int64_t Plan::pp() const { return pipelineAxis_.empty() ? 1 : mesh_.size(pipelineAxis_); }

std::string Plan::pipeline_schedule() const {
  return pipelineScheduleFile_.empty() ? scheduleName(pipelineSchedule_) : pipelineScheduleFile_;
}

int64_t Plan::pipeline_microbatches_per_step() const {
  return pp() > 1 ? pipelineMicrobatches_ * microsteps_ : 0;  // each <= 2^20: exact
}

std::string Plan::describePipeline() const {
  if (pp() == 1) return "";
  std::string ranges;
  for (const auto& [first, last] : pipelineLayerRanges_)
    ranges += fmt::format("{}{}-{}", ranges.empty() ? "" : ",", first, last);
  return fmt::format(" pipeline {}={} ({}, {} microbatch{}{}{})", pipelineAxis_, pp(), pipeline_schedule(),
                     pipelineMicrobatches_, pipelineMicrobatches_ == 1 ? "" : "es",
                     pipelineVirtualStages_ == 1 ? std::string()
                                                 : fmt::format(", {} virtual stages", pipelineVirtualStages_),
                     ranges.empty() ? std::string() : ", layers " + ranges);
}

int64_t Plan::resolve_pipeline_layers(const std::vector<std::string>& modules) const {
  int64_t layers = 0;
  const std::string prefix = "blocks.";
  for (const std::string& m : modules)
    if (m.size() > prefix.size() && m.compare(0, prefix.size(), prefix) == 0 &&
        m.find_first_not_of("0123456789", prefix.size()) == std::string::npos)
      ++layers;
  if (pp() == 1) return layers;
  const std::string label = fmt::format("pipeline(\"{}\")", pipelineAxis_);
  // Remat runs on the unrolled microbatches of a stage, whose modules it cannot tell apart
  // yet: refused rather than compiled wrong.
  if (!checkpoints_.empty())
    fail(checkpoints_.front().site,
         fmt::format("checkpoint(\"{}\"): activation checkpointing is not supported together with pipeline "
                     "parallelism ({}) yet; drop one of them",
                     checkpoints_.front().glob, label));
  if (layers == 0) return layers;
  const int64_t chunks = pp() * pipelineVirtualStages_;
  if (!pipelineLayerRanges_.empty() && pipelineLayerRanges_.back().second != layers - 1)
    fail(pipelineSites_.stages.empty() ? pipelineSites_.call : PlanSite{pipelineSites_.stages.front().file, 1, 1},
         fmt::format("{}: the layer ranges end at layer {}, but the model has {} layer{} (blocks.0 to blocks.{}); "
                     "the last range must end at layer {}",
                     label, pipelineLayerRanges_.back().second, layers, layers == 1 ? "" : "s", layers - 1,
                     layers - 1));
  if (chunks > layers)
    fail(pipelineSites_.call, fmt::format("{}: more stages than layers: {}={}{} make {} stages, but the model has {} "
                                          "layer{} (blocks.0 to blocks.{}); each stage needs at least one",
                                          label, pipelineAxis_, pp(),
                                          pipelineVirtualStages_ == 1
                                              ? std::string()
                                              : fmt::format(" x {} virtual stages", pipelineVirtualStages_),
                                          chunks, layers, layers == 1 ? "" : "s", layers - 1));
  return layers;
}

void Plan::checkPipelineAxes() const {
  if (pipelineAxis_.empty()) return;
  const char* role = pipelineAxis_ == batchAxis_            ? "batch (shard_batch)"
                     : pipelineAxis_ == fullyShardAxis_     ? "fully sharded (fully_shard)"
                     : pipelineAxis_ == tensorParallelAxis_ ? "tensor-parallel"
                                                            : nullptr;
  if (role)
    fail(pipelineSites_.call, fmt::format("pipeline(\"{}\"): '{}' is already the {} axis; the pipeline needs an "
                                          "axis of its own (e.g. Mesh{{{{\"pp\", 2}}, {{\"dp\", 2}}}})",
                                          pipelineAxis_, pipelineAxis_, role));
}

}  // namespace tessel
