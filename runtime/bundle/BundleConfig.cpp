// The model config against the program; see BundleConfig.h.
#include "runtime/bundle/BundleConfig.h"

#include "runtime/data/SyntheticDataset.h"  // syntheticOptions: the labs' data entries

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>

namespace tessel::rt {

namespace {

/// A config field and the buffer dimension it must equal. A buffer named "@0" is the
/// model's first input of @train_step.
struct ConfigDim {
  const char* field;
  const char* buffer;
  size_t dim;
};

// What each shipped model's config fixes in its program (examples/gpt/model.h,
// examples/mlp/model.h, examples/llama/model.h, examples/labs/models.h; a Linear's weight is
// [out, in], an Embedding's [rows, channels]).
constexpr ConfigDim kGpt[] = {{"vocab", "wte.weight", 0},    {"channels", "wte.weight", 1},
                              {"seq", "wpe.weight", 0},      {"channels", "ln_f.weight", 0},
                              {"seq", "@0", 1}};
constexpr ConfigDim kMlp[] = {{"pixels", "fc1.weight", 1},   {"hidden", "fc1.weight", 0},
                              {"hidden", "head.weight", 1},  {"classes", "head.weight", 0},
                              {"pixels", "@0", 1}};
constexpr ConfigDim kLlama[] = {{"vocab", "tok_embeddings.weight", 0},
                                {"channels", "tok_embeddings.weight", 1},
                                {"vocab", "output.weight", 0},
                                {"channels", "norm.weight", 0},
                                {"channels", "blocks.0.attention.wq.weight", 0},
                                {"hidden", "blocks.0.feed_forward.w1.weight", 0},
                                {"seq", "@0", 1}};
// The labs' MLP classifier (lab-ddp, lab-unused, lab-tp) and the FSDP lab's block stack;
// "features" and "classes" are the synthetic data's entries.
constexpr ConfigDim kLabClassifier[] = {{"features", "@0", 1},       {"features", "fc.weight", 1},
                                        {"hidden", "fc.weight", 0},  {"hidden", "head.weight", 1},
                                        {"classes", "head.weight", 0}};
constexpr ConfigDim kLabBlocks[] = {{"features", "@0", 1},          {"features", "stem.weight", 1},
                                    {"channels", "stem.weight", 0}, {"channels", "head.weight", 1},
                                    {"classes", "head.weight", 0}};

constexpr const char* kGptCounts[] = {"layers", "heads"};
constexpr const char* kLlamaCounts[] = {"layers", "heads", "kv_heads"};
constexpr const char* kLabBlockCounts[] = {"layers"};
constexpr const char* kLlamaPositive[] = {"rope_theta", "norm_eps"};

/// What bundle.json's config of a model tessel-run feeds holds, and what of it the program shows.
struct ModelConfig {
  std::span<const ConfigDim> dims;          // integer fields equal to a buffer dimension
  std::span<const char* const> counts;      // other integer fields, 1 to 2^40
  std::span<const char* const> positive;    // finite numbers > 0
  bool layersAreBlocks = false;             // config.layers is the number of blocks.<i> groups
  bool seqIsTrainSeq = false;               // config.seq is train_flags.seq
  bool synthetic = false;                   // the synthetic data's entries (SyntheticDataset.h)
};

/// The config of a model tessel-run feeds; nullopt for other models (a user's own).
std::optional<ModelConfig> configOf(const std::string& model) {
  if (model == "gpt") return ModelConfig{kGpt, kGptCounts, {}, true, true};
  if (model == "mlp") return ModelConfig{kMlp, {}, {}};
  if (model == "llama") return ModelConfig{kLlama, kLlamaCounts, kLlamaPositive, true, true};
  if (model == "lab-fsdp") return ModelConfig{kLabBlocks, kLabBlockCounts, {}, true, false, true};
  if (isLabModel(model)) return ModelConfig{kLabClassifier, {}, {}, false, false, true};
  return std::nullopt;
}

std::runtime_error mismatch(const std::string& file, const std::string& what) {
  return std::runtime_error(fmt::format("'{}': {} (edited, or written for another program)", file, what));
}

/// The positive integer config.<field>; throws naming the field otherwise.
int64_t configValue(const BundleInfo& info, const std::string& field, const std::string& file) {
  const auto& c = info.config;
  if (!c.is_object() || !c.contains(field) || !jsonIntegerIn(c.at(field), 1, int64_t{1} << 40))
    throw std::runtime_error(fmt::format("'{}': config.{} is {}; the {} model needs an integer from 1 to 2^40", file,
                                         field, jsonShown(c, field), info.model));
  return c.at(field).get<int64_t>();
}

/// The finite positive number config.<field>; throws naming the field otherwise.
double positiveValue(const BundleInfo& info, const std::string& field, const std::string& file) {
  const auto& c = info.config;
  if (!c.is_object() || !c.contains(field) ||
      !jsonNumberIn(c.at(field), 0, std::numeric_limits<double>::max(), /*openBelow=*/true))
    throw std::runtime_error(fmt::format("'{}': config.{} is {}; the {} model needs a finite number > 0", file, field,
                                         jsonShown(c, field), info.model));
  return c.at(field).get<double>();
}

/// Throws unless the attention heads agree with the channels and, for grouped-query attention
/// (`keyValueHeads`), with the key projection blocks.0.attention.wk.weight [kv_heads x D, C]:
/// D = channels / heads, even for rotary embeddings. The head count itself is compiled into
/// the attention kernels and shows in no shape: with the key/value heads in proportion, the
/// checks pass for any heads that divide the channels so.
void checkHeads(const BundleInfo& info, const Program& program, const std::string& file, bool keyValueHeads) {
  const int64_t heads = configValue(info, "heads", file), channels = configValue(info, "channels", file);
  if (channels % heads != 0)
    throw mismatch(file, fmt::format("config.heads {} does not divide config.channels {}", heads, channels));
  if (!keyValueHeads) return;
  const int64_t headDim = channels / heads, kvHeads = configValue(info, "kv_heads", file);
  if (headDim % 2 != 0)
    throw mismatch(file, fmt::format("config.heads {} gives an odd head size {} / {} = {}; rotary embeddings need "
                                     "an even one",
                                     heads, channels, heads, headDim));
  if (heads % kvHeads != 0)
    throw mismatch(file, fmt::format("config.kv_heads {} does not divide config.heads {}", kvHeads, heads));
  const int i = program.findBuffer("blocks.0.attention.wk.weight");
  if (i < 0) throw mismatch(file, "the llama model needs the parameter 'blocks.0.attention.wk.weight', which "
                                  "program.json lacks");
  const Buffer& wk = program.buffers[static_cast<size_t>(i)];
  const std::vector<int64_t>& shape = wk.globalShape.empty() ? wk.shape : wk.globalShape;
  if (shape.empty() || shape[0] != kvHeads * headDim)
    throw mismatch(file, fmt::format("config.kv_heads {} x head size {} (config.channels / config.heads) does not "
                                     "match program.json: '{}' has shape [{}]",
                                     kvHeads, headDim, wk.name, fmt::join(shape, ", ")));
}

/// The optimizer state suffixes ("<parameter>:<suffix>") each optimizer's update keeps
/// (passes/Optimizer.cpp): what a lowered program shows of the optimizer built into it.
const std::map<std::string, std::set<std::string>> kOptimizerState = {{"adamw", {"exp_avg", "exp_avg_sq"}},
                                                                      {"sgd", {"momentum_buffer"}}};

/// Throws unless the plan's mesh is the program's (Program::mesh: names and sizes in order);
/// a program without a mesh (one rank, or data parallelism compiled before meshes) runs on a
/// plan whose axes other than the batch axis have size 1.
void checkPlanMesh(const BundlePlan& plan, const Program& program, const std::string& file) {
  std::vector<std::pair<std::string, int64_t>> mesh;
  for (const MeshAxis& a : program.mesh) mesh.emplace_back(a.name, a.size);
  if (!mesh.empty() && mesh != plan.mesh) {
    std::vector<std::string> text;
    for (const MeshAxis& a : program.mesh) text.push_back(fmt::format("{}={}", a.name, a.size));
    throw mismatch(file, fmt::format("plan {} does not match program.json's mesh {}", plan.meshText(),
                                     fmt::join(text, ",")));
  }
  if (mesh.empty())
    for (const auto& [axis, size] : plan.mesh)
      if (axis != plan.batchAxis && axis != plan.fullyShardAxis && size != 1)
        throw mismatch(file, fmt::format("plan axis {}={} does not match program.json, which has no mesh (it runs "
                                         "one rank or data parallelism only)", axis, size));
}

/// Throws naming the field where the plan or the optimizer disagrees with what the program
/// itself shows (BundleConfig.h's promise).
void checkPlanAndOptimizer(const BundleInfo& info, const Program& program, const std::string& file) {
  const BundlePlan& plan = info.plan;
  checkPlanMesh(plan, program, file);
  const std::vector<std::string> batchAxes = plan.batchAxes();
  auto overBatch = [&](const CollectiveStep& c) {
    return std::any_of(c.axes.begin(), c.axes.end(),
                       [&](const std::string& a) { return std::find(batchAxes.begin(), batchAxes.end(), a) != batchAxes.end(); });
  };
  int gradientReductions = 0;  // gradient buckets and reduce-scatters over the batch axes
  bool movesOverFullyShardAxis = false;  // an all_gather or reduce_scatter over the fully sharded axis
  for (const Function& f : program.functions)
    for (const Step& step : f.steps) {
      const auto* c = std::get_if<CollectiveStep>(&step);
      if (!c || c->kind == CollectiveStep::Kind::AllReduceWait || c->kind == CollectiveStep::Kind::SendRecv) continue;
      const std::string where =
          c->movesShards() ? fmt::format("the {} at {} in @{}", collectiveKindName(collectiveKindIndex(*c)),
                                         c->location.empty() ? "?" : c->location, f.name)
                           : fmt::format("the all-reduce of bucket {} in @{}", c->bucket, f.name);
      // Every collective's group is the plan's ranks along its axes.
      int64_t group = 1;
      for (const std::string& axis : c->axes) {
        auto it = std::find_if(plan.mesh.begin(), plan.mesh.end(), [&](const auto& a) { return a.first == axis; });
        if (it == plan.mesh.end())
          throw mismatch(file, fmt::format("plan {} does not match program.json: {} is over axis '{}', which the "
                                           "plan's mesh lacks", plan.meshText(), where, axis));
        group *= it->second;
      }
      if (c->group != group)
        throw mismatch(file, fmt::format("plan {} does not match program.json: {} is over axes [{}] of {} ranks "
                                         "but over a group of {}",
                                         plan.meshText(), where, fmt::join(c->axes, ", "), group, c->group));
      if (c->movesShards()) {
        // Under a fully sharded plan, gradients are reduce-scattered into the shards over the
        // fully sharded axis (ZeRO-2 and -3); the all-gathers bring parameters back.
        const bool overShardAxis = !plan.fullyShardAxis.empty() &&
                                   std::find(c->axes.begin(), c->axes.end(), plan.fullyShardAxis) != c->axes.end();
        movesOverFullyShardAxis = movesOverFullyShardAxis || overShardAxis;
        gradientReductions += overShardAxis && c->kind == CollectiveStep::Kind::ReduceScatter;
        continue;
      }
      if (c->synchronous) continue;  // a forward/backward all-reduce of the partitioned model
      if (plan.dp() > 1 && !overBatch(*c))
        throw mismatch(file, fmt::format("plan.batch_axis '{}' does not match program.json: {} is over axes [{}]",
                                         plan.batchAxis, where, fmt::join(c->axes, ", ")));
      gradientReductions += overBatch(*c);
      if (c->axes.size() == 1 && overBatch(*c) && c->reduce != "avg")
        throw mismatch(file, fmt::format("plan {} does not match program.json: {} reduces by '{}', but data "
                                         "parallelism averages the gradients (avg)",
                                         plan.meshText(), where, c->reduce));
    }
  if (plan.dp() > 1 && gradientReductions == 0)
    throw mismatch(file, fmt::format("plan {} does not match program.json, which has no gradient all-reduce (it "
                                     "was compiled for one rank)",
                                     plan.meshText()));
  if (plan.dp() == 1 && gradientReductions > 0)
    throw mismatch(file, fmt::format("plan {} (one rank) does not match program.json, which has {} all-reduce "
                                     "step(s)", plan.meshText(), gradientReductions));
  const auto shardAxis = std::find_if(plan.mesh.begin(), plan.mesh.end(),
                                      [&](const auto& a) { return a.first == plan.fullyShardAxis; });
  if (shardAxis != plan.mesh.end() && shardAxis->second > 1 && !movesOverFullyShardAxis)
    throw mismatch(file, fmt::format("plan.fully_shard_axis '{}' does not match program.json, which neither "
                                     "all-gathers nor reduce-scatters over it",
                                     plan.fullyShardAxis));
  const bool accumulates = program.function("accumulate_step") != nullptr;
  if ((plan.microsteps > 1) != accumulates)
    throw mismatch(file, fmt::format("plan.microsteps {} does not match program.json, which has {}@accumulate_step",
                                     plan.microsteps, accumulates ? "" : "no "));
  // The batch shards the program was compiled for are dp x microsteps: with the group above,
  // they fix the microsteps (and so the gradient scaling 1/microsteps built into @train_step).
  for (const Function& f : program.functions) {
    const int64_t shards = std::max<int64_t>(f.batchShards, 1);
    if (shards != plan.dp() * plan.microsteps)
      throw mismatch(file, fmt::format("plan.microsteps {} with dp {} does not match program.json: @{} runs on one "
                                       "of {} batch shards (dp x microsteps)",
                                       plan.microsteps, plan.dp(), f.name, shards));
  }
  auto known = kOptimizerState.find(info.optimizer);
  if (known == kOptimizerState.end())
    throw mismatch(file, fmt::format("optimizer '{}' is neither adamw nor sgd", info.optimizer));
  std::set<std::string> shown;  // the optimizer-state kinds the program keeps
  for (const Buffer& b : program.buffers) {
    if (b.kind != BufferKind::State || b.name.find(':') == std::string::npos) continue;
    const std::string suffix = b.name.substr(b.name.rfind(':') + 1);
    for (const auto& [name, kinds] : kOptimizerState)
      if (kinds.count(suffix)) shown.insert(suffix);
  }
  if (shown != known->second)
    throw mismatch(file, fmt::format("optimizer '{}' does not match program.json, whose optimizer state is [{}] "
                                     "({} keeps [{}])",
                                     info.optimizer, fmt::join(shown, ", "), info.optimizer,
                                     fmt::join(known->second, ", ")));
}

}  // namespace

bool isLabModel(const std::string& model) {
  return model == "lab-ddp" || model == "lab-unused" || model == "lab-fsdp" || model == "lab-tp";
}

bool tesselRunFeeds(const std::string& model) {
  return model == "gpt" || model == "llama" || model == "mlp" || isLabModel(model);
}

void checkConfigFields(const BundleInfo& info, const std::string& file) {
  const std::optional<ModelConfig> spec = configOf(info.model);
  if (!spec) return;
  const nlohmann::json& c = info.config;
  if (!c.is_object())
    throw std::runtime_error(fmt::format("'{}': config is {}; the {} model needs an object of its sizes", file,
                                         abbreviated(c.dump()), info.model));
  if (spec->synthetic) {
    try {
      tessel::syntheticOptions(c);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(fmt::format("'{}': {}", file, e.what()));
    }
  }
  for (const ConfigDim& d : spec->dims)
    if (c.contains(d.field)) configValue(info, d.field, file);
  for (const char* field : spec->counts)
    if (c.contains(field)) configValue(info, field, file);
  for (const char* field : spec->positive)
    if (c.contains(field)) positiveValue(info, field, file);
}

void checkBundleConfig(const BundleInfo& info, const Program& program, const std::string& file) {
  const Function* step = program.function("train_step");
  if (!step || step->inputs.empty())
    throw std::runtime_error(fmt::format("'{}': program.json has no @train_step with inputs; it cannot be trained",
                                         file));
  checkPlanAndOptimizer(info, program, file);
  const Buffer& input = program.buffers.at(static_cast<size_t>(step->inputs[0]));
  const int64_t split = info.plan.dp() * info.plan.microsteps;
  if (info.batch % split != 0 || input.shape.empty() || input.shape[0] * split != info.batch)
    throw mismatch(file, fmt::format("train_flags.batch {} with plan {} and {} microstep(s) does not match "
                                     "program.json: input '{}' has shape [{}], {} rows per rank and microstep",
                                     info.batch, info.plan.meshText(), info.plan.microsteps, input.name,
                                     fmt::join(input.shape, ", "), input.shape.empty() ? 0 : input.shape[0]));
  const std::optional<ModelConfig> spec = configOf(info.model);
  if (!spec) return;
  checkConfigFields(info, file);  // the types and ranges of the fields present
  for (const ConfigDim& d : spec->dims) {
    const int64_t want = configValue(info, d.field, file);
    const Buffer* b = &input;
    if (std::string(d.buffer) != "@0") {
      int i = program.findBuffer(d.buffer);
      if (i < 0 || program.buffers[static_cast<size_t>(i)].kind != BufferKind::Parameter)
        throw mismatch(file, fmt::format("model '{}' needs the parameter '{}', which program.json lacks",
                                         info.model, d.buffer));
      b = &program.buffers[static_cast<size_t>(i)];
    }
    // A sharded parameter's config dimension is its global one.
    const std::vector<int64_t>& shape = b->globalShape.empty() ? b->shape : b->globalShape;
    if (shape.size() <= d.dim || shape[d.dim] != want)
      throw mismatch(file, fmt::format("config.{} {} does not match program.json: '{}' has shape [{}]", d.field,
                                       want, b->name, fmt::join(shape, ", ")));
  }
  for (const char* field : spec->positive) positiveValue(info, field, file);
  if (spec->seqIsTrainSeq)
    if (int64_t seq = configValue(info, "seq", file); seq != info.seq)
      throw mismatch(file, fmt::format("config.seq {} differs from train_flags.seq {}", seq, info.seq));
  if (spec->layersAreBlocks) {
    // Layers: the blocks.<i> groups of parameters.
    std::set<std::string> blocks;
    for (const Buffer& b : program.buffers)
      if (b.kind == BufferKind::Parameter && b.name.rfind("blocks.", 0) == 0)
        blocks.insert(b.name.substr(0, b.name.find('.', 7)));
    if (int64_t layers = configValue(info, "layers", file); layers != static_cast<int64_t>(blocks.size()))
      throw mismatch(file, fmt::format("config.layers {} does not match program.json, which has {} blocks", layers,
                                       blocks.size()));
  }
  if (info.model == "gpt" || info.model == "llama")
    checkHeads(info, program, file, /*keyValueHeads=*/info.model == "llama");
}

}  // namespace tessel::rt
