// Mesh and Plan; see Plan.h.
#include "dsl/tessel.h"

#include "compiler/Glob.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessel {
namespace {

[[noreturn]] void fail(const PlanSite& site, std::string message) {
  throw ModelError(Diagnostic{site.file, site.line, site.column, "", std::move(message)});
}

/// The error at `site` with a note at `other` (a conflict between two plan calls), in the
/// form compilers print: "<error>\n<file>:<line>:<col>: note: <note>".
[[noreturn]] void failWithNote(const PlanSite& site, const std::string& message, const PlanSite& other,
                               const std::string& note) {
  fail(site, fmt::format("{}\n{}:{}:{}: note: {}", message, other.file, other.line, other.column, note));
}

/// [[tp], []] for a sharding's per-dimension axes.
std::string dimsString(const std::vector<std::vector<std::string>>& dims) {
  std::string s = "[";
  for (size_t d = 0; d < dims.size(); ++d) s += fmt::format("{}[{}]", d ? "," : "", fmt::join(dims[d], ","));
  return s + "]";
}

std::string shapeString(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string axesString(const Mesh& mesh) {
  std::string s;
  for (const auto& [name, size] : mesh.axes()) s += fmt::format("{}{}={}", s.empty() ? "" : ",", name, size);
  return s;
}

}  // namespace

bool glob_matches(const std::string& glob, const std::string& name) { return globMatches(glob, name); }

Mesh::Mesh(std::initializer_list<std::pair<std::string, int64_t>> axes, std::source_location loc)
    : Mesh(std::vector<std::pair<std::string, int64_t>>(axes), PlanSite::of(loc)) {}

Mesh::Mesh(std::vector<std::pair<std::string, int64_t>> axes, PlanSite site)
    : axes_(std::move(axes)), site_(std::move(site)) {
  if (axes_.empty()) fail(site_, "a mesh needs at least one axis, e.g. Mesh{{\"dp\", 2}}");
  for (size_t i = 0; i < axes_.size(); ++i) {
    const auto& [name, size] = axes_[i];
    if (name.empty()) fail(site_, "mesh axis names must not be empty");
    if (size < 1 || size > kMaxMeshRanks)
      fail(site_, fmt::format("mesh axis '{}' has size {}; sizes must be in [1, 2^20]", name, size));
    for (size_t j = 0; j < i; ++j)
      if (axes_[j].first == name) fail(site_, fmt::format("mesh axis '{}' appears twice", name));
  }
  // Each size is at most 2^20, so the running product cannot overflow before it is checked.
  int64_t ranks = 1;
  for (const auto& a : axes_)
    if ((ranks *= a.second) > kMaxMeshRanks)
      fail(site_, fmt::format("the mesh ({}) has more than 2^20 ranks", axesString(*this)));
}

int64_t Mesh::size(const std::string& axis) const {
  for (const auto& [name, size] : axes_)
    if (name == axis) return size;
  return 0;
}

int64_t Mesh::size() const {
  int64_t n = 1;
  for (const auto& a : axes_) n *= a.second;
  return n;
}

Plan::Plan() : mesh_({{"dp", 1}}, PlanSite{"<default plan>", 0, 0}) {}

Plan::Plan(Mesh mesh, std::source_location loc) : mesh_(std::move(mesh)), site_(PlanSite::of(loc)) {}

Plan& Plan::shard_batch(const std::string& axis, std::source_location loc) {
  PlanSite site = PlanSite::of(loc);
  if (mesh_.size(axis) == 0)
    fail(site, fmt::format("shard_batch(\"{}\"): the mesh ({}) has no axis '{}'", axis, axesString(mesh_), axis));
  batchAxis_ = axis;
  batchSite_ = site;
  return *this;
}

Plan& Plan::shard(const std::string& glob, std::vector<Axes> dims, std::source_location loc) {
  ShardEntry entry{glob, {}, PlanSite::of(loc)};
  if (glob.empty()) fail(entry.site, "shard(): the glob must not be empty");
  std::map<std::string, size_t> firstUse;  // axis -> the first dimension split over it
  for (size_t d = 0; d < dims.size(); ++d) {
    for (const std::string& axis : dims[d].names) {
      if (mesh_.size(axis) == 0)
        fail(entry.site, fmt::format("shard(\"{}\"): the mesh ({}) has no axis '{}'", glob, axesString(mesh_), axis));
      auto [first, fresh] = firstUse.emplace(axis, d);
      if (!fresh)
        fail(entry.site, fmt::format("shard(\"{}\"): mesh axis '{}' is used twice ({}); a tensor is split over "
                                     "each axis at most once",
                                     glob, axis, first->second == d
                                                     ? fmt::format("on dimension {}", d)
                                                     : fmt::format("on dimensions {} and {}", first->second, d)));
    }
    entry.dims.push_back(dims[d].names);
  }
  shards_.push_back(std::move(entry));
  return *this;
}

const char* checkpointModeName(CheckpointMode mode) {
  return mode == CheckpointMode::Full ? "full" : "selective";
}

Plan& Plan::checkpoint(const std::string& glob, CheckpointMode mode, std::source_location loc) {
  return checkpoint(glob, mode, PlanSite::of(loc));
}

Plan& Plan::checkpoint(const std::string& glob, CheckpointMode mode, PlanSite site) {
  if (glob.empty()) fail(site, "checkpoint(): the glob must not be empty");
  if (!checkpoints_.empty() && checkpoints_.front().mode != mode)
    failWithNote(site,
                 fmt::format("checkpoint(\"{}\", {}): the plan already checkpoints in {} mode; one plan has one "
                             "mode",
                             glob, checkpointModeName(mode), checkpointModeName(checkpoints_.front().mode)),
                 checkpoints_.front().site, fmt::format("checkpoint(\"{}\") is here", checkpoints_.front().glob));
  checkpoints_.push_back({glob, mode, std::move(site)});
  return *this;
}

void Plan::resolve_checkpoints(const std::vector<std::string>& modules,
                               const std::vector<std::string>& parameters) const {
  for (const CheckpointEntry& e : checkpoints_) {
    if (std::any_of(modules.begin(), modules.end(), [&](const std::string& m) { return glob_matches(e.glob, m); }))
      continue;
    auto parameter = std::find_if(parameters.begin(), parameters.end(),
                                  [&](const std::string& p) { return glob_matches(e.glob, p); });
    if (parameter != parameters.end())
      fail(e.site, fmt::format("checkpoint(\"{}\"): the glob names parameter '{}', not a module; checkpointing "
                               "recomputes a module's forward pass (name the module, e.g. '{}')",
                               e.glob, *parameter, parameter->substr(0, parameter->rfind('.'))));
    const size_t shown = std::min<size_t>(modules.size(), 4);  // a few paths as examples
    fail(e.site, fmt::format("checkpoint(\"{}\"): the glob matches no module of the model{}", e.glob,
                             modules.empty() ? std::string(" (it has none)")
                                             : fmt::format(" (its modules: {}{})",
                                                           fmt::join(modules.begin(), modules.begin() + shown, ", "),
                                                           modules.size() > shown ? ", ..." : "")));
  }
}

Plan& Plan::tensor_parallel(const std::string& axis, std::source_location loc) {
  PlanSite site = PlanSite::of(loc);
  if (mesh_.size(axis) == 0)
    fail(site, fmt::format("tensor_parallel(\"{}\"): the mesh ({}) has no axis '{}'", axis, axesString(mesh_), axis));
  if (!tensorParallelAxis_.empty() && tensorParallelAxis_ != axis)
    failWithNote(site, fmt::format("tensor_parallel(\"{}\"): the plan is already tensor-parallel over '{}'", axis,
                                   tensorParallelAxis_),
                 tensorParallelSite_, fmt::format("tensor_parallel(\"{}\") is here", tensorParallelAxis_));
  if (tensorParallelAxis_.empty()) tensorParallelSite_ = site;
  tensorParallelAxis_ = axis;
  return *this;
}

const char* fsdpReduceScatterName(FsdpReduceScatter mode) {
  return mode == FsdpReduceScatter::LastMicrostep ? "last-microstep" : "every-microstep";
}

Plan& Plan::fully_shard(const std::string& axis, FullyShardConfig options, std::source_location loc) {
  return fully_shard(axis, options, PlanSite::of(loc));
}

Plan& Plan::fully_shard(const std::string& axis, FullyShardConfig options, PlanSite site) {
  if (mesh_.size(axis) == 0)
    fail(site, fmt::format("fully_shard(\"{}\"): the mesh ({}) has no axis '{}'", axis, axesString(mesh_), axis));
  if (options.stage < 1 || options.stage > 3)
    fail(site, fmt::format("fully_shard(\"{}\"): ZeRO stage {} does not exist (stages are 1, 2 and 3)", axis,
                           options.stage));
  if (!fullyShardAxis_.empty() && fullyShardAxis_ != axis)
    failWithNote(site, fmt::format("fully_shard(\"{}\"): the plan already fully shards over '{}'", axis,
                                   fullyShardAxis_),
                 fullyShardSite_, fmt::format("fully_shard(\"{}\") is here", fullyShardAxis_));
  fullyShardAxis_ = axis;
  fullyShardSite_ = site;
  checkFsdpUnits(axis, options, site);
  zeroStage_ = options.stage;
  reshardAfterForward_ = options.reshard_after_forward;
  reduceScatter_ = options.reduce_scatter;
  fsdpUnitGlobs_ = options.unit.globs;
  fsdpMinUnitParams_ = options.min_unit_params.value_or(0);
  fsdpPrefetch_ = options.prefetch;
  return *this;
}

Plan& Plan::sequence_parallel(bool on, std::source_location loc) { return sequence_parallel(on, PlanSite::of(loc)); }

Plan& Plan::sequence_parallel(bool on, PlanSite site) {
  sequenceParallel_ = on;
  sequenceParallelSite_ = std::move(site);
  return *this;
}

Plan& Plan::bucket_mb(double mb, std::source_location loc) {
  if (!(mb > 0) || !std::isfinite(mb))
    fail(PlanSite::of(loc), fmt::format("bucket_mb({}): the bucket capacity must be a positive number of MiB", mb));
  bucketMb_ = mb;
  return *this;
}

Plan& Plan::grad_accumulation(int64_t microsteps, std::source_location loc) {
  if (microsteps < 1)
    fail(PlanSite::of(loc), fmt::format("grad_accumulation({}): the number of microsteps must be >= 1", microsteps));
  microsteps_ = microsteps;
  accumulationSite_ = PlanSite::of(loc);
  return *this;
}

Plan& Plan::overlap(bool on, std::source_location) {
  overlap_ = on;
  return *this;
}

int64_t Plan::dp() const {
  int64_t n = 1;
  for (const std::string& axis : batch_axes()) n *= mesh_.size(axis);
  return n;
}

std::vector<std::string> Plan::batch_axes() const {
  std::vector<std::string> axes;
  for (const auto& [name, size] : mesh_.axes())
    if (name == batchAxis_ || name == fullyShardAxis_) axes.push_back(name);
  return axes;
}

int64_t Plan::tp() const { return tensorParallelAxis_.empty() ? 1 : mesh_.size(tensorParallelAxis_); }

bool Plan::needs_grid() const {
  if (mesh_.size(fullyShardAxis_) > 1) return true;  // the parameters are sharded over it
  for (const auto& [name, size] : mesh_.axes())
    if (size > 1 && name != batchAxis_) return true;
  for (const ShardEntry& e : shards_)
    for (const auto& dim : e.dims)
      for (const std::string& axis : dim)
        if (mesh_.size(axis) > 1) return true;
  return false;
}

void Plan::checkCombination() const {
  checkPipelineAxes();
  if (sequenceParallel_ && tensorParallelAxis_.empty())
    fail(sequenceParallelSite_, "sequence_parallel needs tensor parallelism: it splits the regions between the "
                                "tensor-parallel layers along T over the tensor-parallel axis (call "
                                "tensor_parallel(\"tp\"), or give --plan a tp axis)");
  if (!tensorParallelAxis_.empty() && tensorParallelAxis_ == batchAxis_)
    failWithNote(tensorParallelSite_,
                 fmt::format("tensor_parallel(\"{}\"): '{}' is the batch axis (shard_batch); tensor parallelism "
                             "needs an axis of its own",
                             tensorParallelAxis_, batchAxis_),
                 batchSite_, fmt::format("shard_batch(\"{}\") is here", batchAxis_));
  if (fullyShardAxis_.empty()) return;
  if (fullyShardAxis_ == batchAxis_ || fullyShardAxis_ == tensorParallelAxis_)
    failWithNote(fullyShardSite_,
                 fmt::format("fully_shard(\"{}\"): '{}' is already the {} axis; fully sharded data parallelism "
                             "needs an axis of its own (replicate over dp and shard over fsdp: HSDP)",
                             fullyShardAxis_, fullyShardAxis_,
                             fullyShardAxis_ == batchAxis_ ? "batch (shard_batch)" : "tensor-parallel"),
                 fullyShardAxis_ == batchAxis_ ? batchSite_ : tensorParallelSite_, "the other use is here");
  // With tensor_parallel or shard(): each parameter keeps its tensor-parallel layout for
  // compute and is stored with dimension 0 also split over the fully sharded axis, innermost
  // (tessel-fully-shard).
}

void Plan::check_world_size(int64_t worldSize) const {
  checkCombination();
  for (const auto& [name, size] : mesh_.axes()) {
    if (size == 1) continue;
    bool used = name == batchAxis_ || name == tensorParallelAxis_ || name == fullyShardAxis_ || name == pipelineAxis_;
    for (const ShardEntry& e : shards_)
      for (const auto& dim : e.dims) used = used || std::count(dim.begin(), dim.end(), name) > 0;
    if (!used && name == "pp")
      fail(mesh_.site(), fmt::format("mesh axis pp={} has no pipeline: call pipeline(\"pp\", schedule, "
                                     "microbatches) to run the model's layers as {} pipeline stages over it",
                                     size, size));
    if (!used)
      fail(mesh_.site(), fmt::format("mesh axis {}={} is used by no part of the plan (shard_batch, "
                                     "fully_shard, tensor_parallel, pipeline or shard); its ranks would only "
                                     "repeat the work",
                                     name, size));
  }
  if (mesh_.size() != worldSize)
    fail(mesh_.site(), fmt::format("the mesh ({}) has {} rank{} but the job has {} (the world size{})",
                                   axesString(mesh_), mesh_.size(), mesh_.size() == 1 ? "" : "s", worldSize,
                                   worldSize == 1 ? "; launch with mpirun -np " + std::to_string(mesh_.size())
                                                  : ""));
}

std::vector<ParameterSharding> Plan::resolve_shardings(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& parameters) const {
  checkCombination();
  std::vector<int> owner(parameters.size(), -1);  // the entry that shards each parameter
  for (size_t i = 0; i < shards_.size(); ++i) {
    const ShardEntry& e = shards_[i];
    bool matched = false;
    for (size_t p = 0; p < parameters.size(); ++p) {
      const auto& [name, shape] = parameters[p];
      if (!glob_matches(e.glob, name)) continue;
      matched = true;
      if (e.dims.size() != shape.size())
        fail(e.site, fmt::format("shard(\"{}\"): {} dimension{} given, but parameter '{}' has shape {} (rank {})",
                                 e.glob, e.dims.size(), e.dims.size() == 1 ? "" : "s", name, shapeString(shape),
                                 shape.size()));
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t parts = 1;
        std::vector<std::string> factors;
        for (const std::string& axis : e.dims[d]) {
          parts *= mesh_.size(axis);
          factors.push_back(fmt::format("{}={}", axis, mesh_.size(axis)));
        }
        if (shape[d] % parts != 0)
          fail(e.site, fmt::format("shard(\"{}\"): dimension {} of parameter '{}' (shape {}) has size {}, which "
                                   "{} ({} part{}) does not divide; shard() needs sizes its axes divide "
                                   "(tensor_parallel pads the vocabulary and MLP widths it splits)",
                                   e.glob, d, name, shapeString(shape), shape[d], fmt::join(factors, " x "), parts,
                                   parts == 1 ? "" : "s"));
      }
      if (owner[p] >= 0 && shards_[static_cast<size_t>(owner[p])].dims != e.dims) {
        const ShardEntry& first = shards_[static_cast<size_t>(owner[p])];
        failWithNote(e.site,
                     fmt::format("shard(\"{}\"): parameter '{}' is sharded {} here but {} by an earlier entry",
                                 e.glob, name, dimsString(e.dims), dimsString(first.dims)),
                     first.site, fmt::format("the earlier entry shard(\"{}\") is here", first.glob));
      }
      if (owner[p] < 0) owner[p] = static_cast<int>(i);
    }
    if (!matched)
      fail(e.site, fmt::format("shard(\"{}\"): the glob matches no parameter of the model{}", e.glob,
                               parameters.empty() ? std::string(" (it has none)")
                                                  : fmt::format(" (names look like '{}')", parameters.front().first)));
  }
  std::vector<ParameterSharding> out;
  for (size_t p = 0; p < parameters.size(); ++p) {
    if (owner[p] < 0) continue;
    ParameterSharding ps{parameters[p].first, {}, static_cast<size_t>(owner[p])};
    for (const auto& dim : shards_[ps.entry].dims) {
      std::vector<int> indices;
      for (const std::string& axis : dim)
        for (size_t a = 0; a < mesh_.axes().size(); ++a)
          if (mesh_.axes()[a].first == axis) indices.push_back(static_cast<int>(a));
      ps.axes.push_back(std::move(indices));
    }
    out.push_back(std::move(ps));
  }
  return out;
}

void Plan::check_batch(int64_t globalBatch) const {
  int64_t dp = this->dp();
  std::vector<std::string> factors;
  for (const std::string& axis : batch_axes()) factors.push_back(fmt::format("{}={}", axis, mesh_.size(axis)));
  if (globalBatch % dp != 0)
    fail(batchAxis_.empty() ? fullyShardSite_ : batchSite_,
         fmt::format("the global batch {} is not divisible by the data-parallel degree {} ({})", globalBatch, dp,
                     fmt::join(factors, " x ")));
  if (globalBatch % (dp * microsteps_) != 0)
    fail(accumulationSite_, fmt::format("the global batch {} is not divisible by {} data-parallel ranks x {} "
                                        "microsteps",
                                        globalBatch, dp, microsteps_));
  // Each factor is at most 2^20, so the product cannot overflow.
  if (pp() > 1 && globalBatch % (dp * pipelineMicrobatches_ * microsteps_) != 0)
    fail(pipelineSites_.microbatches,
         fmt::format("the global batch {} is not divisible by {} data-parallel rank{} x {} microbatches x {} "
                     "microstep{} (grad_accumulation): each microbatch must have the same rows",
                     globalBatch, dp, dp == 1 ? "" : "s", pipelineMicrobatches_, microsteps_,
                     microsteps_ == 1 ? "" : "s"));
}

std::string Plan::describe() const {
  std::string s = axesString(mesh_) + describePipeline();
  if (!fullyShardAxis_.empty())
    s += fmt::format(" fully_shard={} zero_stage={}{}{}{}", fullyShardAxis_, zeroStage_,
                     reshardAfterForward_ ? "" : " reshard_after_forward=off",
                     reduceScatter_ == FsdpReduceScatter::EveryMicrostep ? "" : " reduce_scatter=last-microstep",
                     describeFsdpUnits());
  if (!tensorParallelAxis_.empty()) s += fmt::format(" tensor_parallel={}", tensorParallelAxis_);
  if (sequenceParallel_) s += " sequence_parallel=on";
  for (const ShardEntry& e : shards_) s += fmt::format(" shard({},{})", e.glob, dimsString(e.dims));
  for (const CheckpointEntry& e : checkpoints_)
    s += fmt::format(" checkpoint({},{})", e.glob, checkpointModeName(e.mode));
  if (microsteps_ > 1) s += fmt::format(" microsteps={}", microsteps_);
  if (dp() > 1) s += fmt::format(" bucket_mb={} overlap={}", bucketMb_, overlap_ ? "on" : "off");
  return s;
}

Plan parsePlan(const std::string& text, int64_t microsteps) {
  std::vector<std::pair<std::string, int64_t>> axes;
  std::vector<size_t> columns;  // where each axis's item starts
  size_t pos = 0;
  auto site = [&](size_t at) { return PlanSite{"--plan", 1, static_cast<int>(at) + 1}; };
  if (text.empty()) fail(site(0), "empty plan (expected axis=size items such as dp=4)");
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      fail(site(pos), fmt::format("'{}' is not axis=size (e.g. dp=4)", item));
    std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    if (name != "dp" && name != "tp" && name != "fsdp" && name != "pp")
      fail(site(pos), fmt::format("unknown mesh axis '{}' (expected dp, tp, fsdp or pp)", name));
    int64_t size = 0;
    bool digits = value.size() <= 9 && value.find_first_not_of("0123456789") == std::string::npos;
    if (digits) size = std::stoll(value);
    if (!digits || size < 1 || size > kMaxMeshRanks)
      fail(site(pos + eq + 1), fmt::format("the size of axis '{}' must be an integer in [1, 2^20], got '{}'",
                                           name, value));
    for (const auto& a : axes)
      if (a.first == name) fail(site(pos), fmt::format("axis '{}' appears twice", name));
    axes.emplace_back(name, size);
    columns.push_back(pos);
    pos = end + 1;
  }
  Plan plan = Plan(Mesh(axes, site(0)));
  plan.site_ = site(0);
  if (microsteps < 1)
    fail(PlanSite{"--grad-accumulation", 1, 1}, fmt::format("{} microsteps; must be >= 1", microsteps));
  plan.microsteps_ = microsteps;
  plan.accumulationSite_ = PlanSite{"--grad-accumulation", 1, 1};
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].first == "dp") {
      plan.batchAxis_ = "dp";
      plan.batchSite_ = site(columns[i]);
    } else if (axes[i].first == "fsdp") {
      plan.fully_shard("fsdp", {}, site(columns[i]));
    } else if (axes[i].first == "tp") {
      plan.tensorParallelAxis_ = "tp";
      plan.tensorParallelSite_ = site(columns[i]);
    } else if (axes[i].first == "pp") {
      plan.pipeline("pp", Schedule::OneFOneB, axes[i].second, {}, site(columns[i]));
    }
  }
  return plan;
}

}  // namespace tessel
