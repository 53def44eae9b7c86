// The trainer state in a checkpoint's index: writing it, checking that a saved one is complete
// and well-typed, and comparing it (and the data) with the run that resumes it; see
// Checkpointing.h. A state is either weights only (an import) or complete: a missing or
// ill-typed field is an error naming it, never a check silently skipped.
#include "runtime/train/Checkpointing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace tessel::trainer {

namespace {

/// "axis=size,..." of a mesh, as Plan::describe and BundlePlan::meshText begin.
std::string meshText(const std::vector<std::pair<std::string, int64_t>>& mesh) {
  std::string text;
  for (const auto& [axis, size] : mesh) text += fmt::format("{}{}={}", text.empty() ? "" : ",", axis, size);
  return text;
}

std::string fingerprintHex(const DataFingerprint& f) { return fmt::format("{:016x}", f.hash); }

}  // namespace

nlohmann::json trainerState(const RunIdentity& run, const TrainOptions& o, int64_t step) {
  nlohmann::json mesh = nlohmann::json::array();
  for (const auto& [axis, size] : run.mesh) mesh.push_back({axis, size});
  return {{"step", step},
          {"steps", o.steps},
          {"seed", run.seed},
          {"sampler", {{"global_batches_consumed", step}, {"global_batch", run.globalBatch}}},
          {"lr_schedule",
           {{"lr", o.lr}, {"warmup", o.warmup}, {"schedule", o.schedule}, {"min_lr_ratio", o.minLrRatio},
            {"steps", o.steps}}},
          // No random stream advances while training (no dropout): parameters are drawn from the
          // seed once, and the sampler's order is a pure function of the seed and the step.
          {"rng", {{"kind", "stateless"}, {"parameter_init_seed", run.seed}, {"sampler_seed", run.seed}}},
          {"plan", run.plan},
          {"mesh", mesh},
          {"world_size", run.worldSize},
          {"model", run.model},
          {"config", run.config},
          {"optimizer", run.optimizer},
          {"precision", run.precision},
          {"data", {{"where", run.dataWhere}, {"fingerprint", fingerprintHex(run.data)}, {"bytes", run.data.bytes}}}};
}

bool isWeightsOnly(const ckpt::Index& index) {
  if (index.optimizerState) return false;
  if (!index.trainer.is_object()) return true;
  for (const auto& [key, value] : index.trainer.items())
    if (key != "step" && key != "imported_from") return false;
  return true;
}

namespace {

/// Whether `v` is an integer in [min, max] (JSON read from a file holds non-negative integers
/// as unsigned, one built in memory as signed).
bool integerIn(const nlohmann::json& v, int64_t min, int64_t max) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(max) &&
                                     static_cast<int64_t>(v.get<uint64_t>()) >= min;
  return v.is_number_integer() && v.get<int64_t>() >= min && v.get<int64_t>() <= max;
}

/// Reads the fields of a trainer state, each once, and remembers the first problem.
class StateReader {
 public:
  explicit StateReader(const nlohmann::json& state) : state_(state) {}

  /// The field at `path` ("sampler.global_batch"), or null when it is missing (or a parent is
  /// not an object). No problem recorded.
  const nlohmann::json* lookup(const std::string& path) const {
    const nlohmann::json* at = &state_;
    size_t from = 0;
    while (true) {
      const size_t dot = path.find('.', from);
      const std::string key = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      if (!at->is_object() || !at->contains(key)) return nullptr;
      at = &at->at(key);
      if (dot == std::string::npos) return at;
      from = dot + 1;
    }
  }
  /// The value at `path` for a message (null when missing).
  nlohmann::json value(const std::string& path) const {
    const nlohmann::json* v = lookup(path);
    return v ? *v : nlohmann::json();
  }
  /// The field at `path`, or null after a problem (also its own: "lacks "path"" naming the
  /// first missing part, or a parent that is not an object: "has "sampler" 4, not an object").
  const nlohmann::json* find(const std::string& path) {
    if (!problem_.empty()) return nullptr;
    for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) {
      const nlohmann::json* parent = lookup(path.substr(0, dot));
      if (!parent) problem_ = fmt::format("lacks \"{}\"", path.substr(0, dot));
      else if (!parent->is_object())
        problem_ = fmt::format("has \"{}\" {}, not an object", path.substr(0, dot), parent->dump());
      if (!problem_.empty()) return nullptr;
    }
    const nlohmann::json* v = lookup(path);
    if (!v) problem_ = fmt::format("lacks \"{}\"", path);
    return v;
  }
  /// Records "has "path" VALUE, not WANT" unless `ok`; returns `ok` and no earlier problem.
  bool require(bool ok, const std::string& path, const nlohmann::json& value, const std::string& want) {
    if (ok || !problem_.empty()) return ok && problem_.empty();
    problem_ = fmt::format("has \"{}\" {}, not {}", path, value.dump(), want);
    return false;
  }
  /// An integer field >= `min` (0 after a problem).
  int64_t integer(const std::string& path, int64_t min) {
    const nlohmann::json* v = find(path);
    if (!v) return 0;
    const bool ok = integerIn(*v, min, INT64_MAX);
    return require(ok, path, *v, fmt::format("an integer >= {}", min)) ? v->get<int64_t>() : 0;
  }
  /// An unsigned integer field (a seed, a byte count).
  uint64_t unsignedInteger(const std::string& path) {
    const nlohmann::json* v = find(path);
    const bool ok = v && (v->is_number_unsigned() || integerIn(*v, 0, INT64_MAX));
    return v && require(ok, path, *v, "an unsigned integer") ? v->get<uint64_t>() : 0;
  }
  /// A finite number field >= `min`.
  void number(const std::string& path, double min) {
    const nlohmann::json* v = find(path);
    if (v) require(v->is_number() && std::isfinite(v->get<double>()) && v->get<double>() >= min, path, *v,
                   fmt::format("a finite number >= {}", min));
  }
  /// A string field, one of `allowed` when given ({}: any; `nonEmpty`: not "").
  std::string string(const std::string& path, std::vector<std::string> allowed = {}, bool nonEmpty = false) {
    const nlohmann::json* v = find(path);
    if (!v) return "";
    bool ok = v->is_string() && (!nonEmpty || !v->get<std::string>().empty());
    if (ok && !allowed.empty()) ok = std::find(allowed.begin(), allowed.end(), v->get<std::string>()) != allowed.end();
    const std::string want = !allowed.empty() ? fmt::format("one of \"{}\"", fmt::join(allowed, "\", \""))
                             : nonEmpty      ? "a non-empty string"
                                             : "a string";
    return require(ok, path, *v, want) ? v->get<std::string>() : "";
  }
  /// A field of JSON type `type` ("object", "array").
  const nlohmann::json* typed(const std::string& path, nlohmann::json::value_t type, const char* name) {
    const nlohmann::json* v = find(path);
    return v && require(v->type() == type, path, *v, name) ? v : nullptr;
  }
  const std::string& problem() const { return problem_; }

 private:
  const nlohmann::json& state_;
  std::string problem_;
};

}  // namespace

std::string trainerStateProblem(const nlohmann::json& saved, int64_t step) {
  if (!saved.is_object()) return fmt::format("is {}, not an object", saved.dump());
  StateReader r(saved);
  const int64_t savedStep = r.integer("step", 0);
  r.require(savedStep == step, "step", r.value("step"), fmt::format("the index's step {}", step));
  const int64_t steps = r.integer("steps", 1);
  r.require(steps >= savedStep, "steps", r.value("steps"), fmt::format("a count >= its step {}", savedStep));
  const uint64_t seed = r.unsignedInteger("seed");
  const int64_t consumed = r.integer("sampler.global_batches_consumed", 0);
  if (r.problem().empty())
    r.require(consumed == savedStep, "sampler.global_batches_consumed", r.value("sampler.global_batches_consumed"),
              fmt::format("its step {}", savedStep));
  r.integer("sampler.global_batch", 1);
  r.number("lr_schedule.lr", 0);
  r.integer("lr_schedule.warmup", 0);
  r.string("lr_schedule.schedule", {"cosine", "constant"});
  r.number("lr_schedule.min_lr_ratio", 0);
  const int64_t scheduleSteps = r.integer("lr_schedule.steps", 1);
  if (r.problem().empty())
    r.require(scheduleSteps == steps, "lr_schedule.steps", r.value("lr_schedule.steps"),
              fmt::format("its \"steps\" {}", steps));
  if (r.typed("rng", nlohmann::json::value_t::object, "an object") &&
      !r.string("rng.kind", {"stateless"}).empty())
    for (const char* path : {"rng.parameter_init_seed", "rng.sampler_seed"}) {
      const uint64_t s = r.unsignedInteger(path);
      if (r.problem().empty())
        r.require(s == seed, path, r.value(path), fmt::format("its \"seed\" {}", seed));
    }
  const std::string plan = r.string("plan");
  std::vector<std::pair<std::string, int64_t>> mesh;
  if (const nlohmann::json* m = r.typed("mesh", nlohmann::json::value_t::array, "an array of [axis, size] pairs"))
    for (const nlohmann::json& axis : *m) {
      const bool ok = axis.is_array() && axis.size() == 2 && axis[0].is_string() &&
                      !axis[0].get<std::string>().empty() && integerIn(axis[1], 1, int64_t{1} << 20);
      if (!r.require(ok, "mesh", *m, "an array of [axis, size >= 1] pairs")) break;
      mesh.emplace_back(axis[0].get<std::string>(), axis[1].get<int64_t>());
    }
  const int64_t world = r.integer("world_size", 1);
  if (r.problem().empty()) {
    // The ranks the mesh spans (1 without axes), saturated at 2^40 (each size <= 2^20, so the
    // product never overflows): no world is that large.
    int64_t product = 1;
    for (const auto& [axis, size] : mesh) product = std::min(product * size, int64_t{1} << 40);
    r.require(product == world, "world_size", r.value("world_size"),
              fmt::format("the product {} of its mesh \"{}\"", product, meshText(mesh)));
    r.require(plan.substr(0, plan.find(' ')) == meshText(mesh), "plan", r.value("plan"),
              fmt::format("a plan beginning with its mesh \"{}\"", meshText(mesh)));
  }
  r.string("model", {}, true);
  r.typed("config", nlohmann::json::value_t::object, "an object");
  r.string("optimizer", {}, true);
  r.string("precision", {"f32", "bf16"});
  r.string("data.where");
  const std::string hash = r.string("data.fingerprint");
  r.require(hash.size() == 16 && hash.find_first_not_of("0123456789abcdef") == std::string::npos, "data.fingerprint",
            hash, "16 hexadecimal digits");
  r.unsignedInteger("data.bytes");
  return r.problem();
}

namespace {

/// The keys of two config objects whose values differ, as "config.layers 2, this run has 3".
std::vector<std::string> configDifferences(const nlohmann::json& was, const nlohmann::json& now) {
  std::vector<std::string> out;
  if (!now.is_object()) return {fmt::format("config {}, this run has {}", was.dump(), now.dump())};
  for (const auto& [key, value] : was.items())
    if (!now.contains(key) || now.at(key) != value)
      out.push_back(fmt::format("config.{} {}, this run has {}", key, value.dump(),
                                now.contains(key) ? now.at(key).dump() : std::string("none")));
  for (const auto& [key, value] : now.items())
    if (!was.contains(key)) out.push_back(fmt::format("config.{} none, this run has {}", key, value.dump()));
  return out;
}

/// Throws the differences, or (allowPartial) appends them to `notes` as notes.
void reportDifferences(const std::vector<std::string>& differences, const std::string& dir, bool allowPartial,
                       std::vector<std::string>* notes, const char* remedy) {
  if (differences.empty()) return;
  if (allowPartial) {
    for (const std::string& d : differences)
      if (notes) notes->push_back(fmt::format("--allow-partial: the checkpoint was saved with {}", d));
    return;
  }
  throw std::runtime_error(
      fmt::format("--resume '{}': the checkpoint was saved with {}; {}", dir, fmt::join(differences, "; "), remedy));
}

}  // namespace

void checkTrainerState(const nlohmann::json& saved, int64_t step, bool weightsOnly, const RunIdentity& run,
                       const std::string& dir, bool allowPartial, std::vector<std::string>* notes) {
  if (weightsOnly) return;  // an import: nothing recorded to compare
  // A corrupt state is an error with --allow-partial too: it relaxes what may differ, not
  // what must be recorded.
  if (const std::string problem = trainerStateProblem(saved, step); !problem.empty())
    throw std::runtime_error(fmt::format("--resume '{}': the checkpoint's trainer state {} (a checkpoint of a "
                                         "training run records every field of docs/checkpoints.md)",
                                         dir, problem));
  std::vector<std::string> differences;  // "model gpt, this run has mlp"
  auto compare = [&](const char* key, const std::string& field, const nlohmann::json& now) {
    if (saved.at(key) != now)
      differences.push_back(fmt::format("{} {}, this run has {}", field, saved.at(key).dump(), now.dump()));
  };
  compare("model", "model", run.model);
  if (saved.at("config") != run.config)
    for (std::string& d : configDifferences(saved.at("config"), run.config)) differences.push_back(std::move(d));
  compare("seed", "--seed", run.seed);
  compare("optimizer", "optimizer", run.optimizer);
  const nlohmann::json& batch = saved.at("sampler").at("global_batch");
  if (batch != nlohmann::json(run.globalBatch))
    differences.push_back(fmt::format("global batch (--batch) {}, this run has {}", batch.dump(), run.globalBatch));
  reportDifferences(differences, dir, allowPartial, notes,
                    "a run resumes only with the same model, configuration, global batch, seed and optimizer "
                    "(--allow-partial loads the tensors a checkpoint of another model shares with this one)");
}

void checkResumeData(ResumePoint& resume, const RunIdentity& run, bool allowPartial) {
  if (resume.dir.empty() || resume.weightsOnly) return;
  const nlohmann::json& d = resume.trainer.at("data");  // complete: checkTrainerState
  const std::string mine = fingerprintHex(run.data);
  if (d.at("fingerprint") == mine && d.at("bytes") == run.data.bytes) return;
  const std::string difference =
      fmt::format("data {} ({} bytes, fingerprint {}), this run has {} ({} bytes, fingerprint {})",
                  d.at("where").get<std::string>(), d.at("bytes").dump(), d.at("fingerprint").get<std::string>(),
                  run.dataWhere, run.data.bytes, mine);
  reportDifferences({difference}, resume.dir, allowPartial, &resume.notes,
                    "a resumed run continues the same data order only on the same data (--allow-partial trains "
                    "on the new data)");
}

}  // namespace tessel::trainer
