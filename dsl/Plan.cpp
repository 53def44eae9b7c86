// Mesh and Plan; see Plan.h.
#include "dsl/tessel.h"

#include <cmath>
#include <fmt/format.h>

namespace tessel {
namespace {

[[noreturn]] void fail(const PlanSite& site, std::string message) {
  throw ModelError(Diagnostic{site.file, site.line, site.column, "", std::move(message)});
}

std::string axesString(const Mesh& mesh) {
  std::string s;
  for (const auto& [name, size] : mesh.axes()) s += fmt::format("{}{}={}", s.empty() ? "" : ",", name, size);
  return s;
}

}  // namespace

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

int64_t Plan::dp() const { return batchAxis_.empty() ? 1 : mesh_.size(batchAxis_); }

void Plan::check_world_size(int64_t worldSize) const {
  for (const auto& [name, size] : mesh_.axes())
    if (size > 1 && name != batchAxis_)
      fail(mesh_.site(), fmt::format("mesh axis {}={}: {} is not supported yet (only data parallelism: "
                                     "shard_batch over one axis)",
                                     name, size,
                                     name == "tp"   ? "tensor parallelism"
                                     : name == "pp" ? "pipeline parallelism"
                                                    : "an axis other than the batch axis"));
  if (mesh_.size() != worldSize)
    fail(mesh_.site(), fmt::format("the mesh ({}) has {} rank{} but the job has {} (the world size{})",
                                   axesString(mesh_), mesh_.size(), mesh_.size() == 1 ? "" : "s", worldSize,
                                   worldSize == 1 ? "; launch with mpirun -np " + std::to_string(mesh_.size())
                                                  : ""));
}

void Plan::check_batch(int64_t globalBatch) const {
  int64_t dp = this->dp();
  if (globalBatch % dp != 0)
    fail(batchSite_, fmt::format("the global batch {} is not divisible by the data-parallel degree {} "
                                 "({}={})",
                                 globalBatch, dp, batchAxis_, dp));
  if (globalBatch % (dp * microsteps_) != 0)
    fail(accumulationSite_, fmt::format("the global batch {} is not divisible by {} data-parallel ranks x {} "
                                        "microsteps",
                                        globalBatch, dp, microsteps_));
}

std::string Plan::describe() const {
  std::string s = axesString(mesh_);
  if (microsteps_ > 1) s += fmt::format(" microsteps={}", microsteps_);
  if (dp() > 1) s += fmt::format(" bucket_mb={} overlap={}", bucketMb_, overlap_ ? "on" : "off");
  return s;
}

Plan parsePlan(const std::string& text, int64_t microsteps) {
  std::vector<std::pair<std::string, int64_t>> axes;
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
    if (name != "dp" && name != "tp" && name != "pp")
      fail(site(pos), fmt::format("unknown mesh axis '{}' (expected dp, tp or pp)", name));
    int64_t size = 0;
    bool digits = value.size() <= 9 && value.find_first_not_of("0123456789") == std::string::npos;
    if (digits) size = std::stoll(value);
    if (!digits || size < 1 || size > kMaxMeshRanks)
      fail(site(pos + eq + 1), fmt::format("the size of axis '{}' must be an integer in [1, 2^20], got '{}'",
                                           name, value));
    for (const auto& a : axes)
      if (a.first == name) fail(site(pos), fmt::format("axis '{}' appears twice", name));
    axes.emplace_back(name, size);
    pos = end + 1;
  }
  Plan plan = Plan(Mesh(axes, site(0)));
  plan.site_ = site(0);
  if (microsteps < 1)
    fail(PlanSite{"--grad-accumulation", 1, 1}, fmt::format("{} microsteps; must be >= 1", microsteps));
  plan.microsteps_ = microsteps;
  plan.accumulationSite_ = PlanSite{"--grad-accumulation", 1, 1};
  if (size_t at = text.find("dp="); at != std::string::npos) {
    plan.batchAxis_ = "dp";
    plan.batchSite_ = site(at);
  }
  return plan;
}

}  // namespace tessel
