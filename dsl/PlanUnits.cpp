// Plan::fully_shard's FSDP units: the checks of FullyShardConfig's unit options and their
// resolution against the model's modules (see Plan.h and compiler/FsdpUnits.h).
#include "dsl/tessel.h"

#include "compiler/FsdpUnits.h"
#include "compiler/Glob.h"

#include <algorithm>
#include <set>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessel {
namespace {

[[noreturn]] void fail(const PlanSite& site, std::string message) {
  throw ModelError(Diagnostic{site.file, site.line, site.column, "", std::move(message)});
}

}  // namespace

void Plan::checkFsdpUnits(const std::string& axis, const FullyShardConfig& options, const PlanSite& site) {
  for (const std::string& glob : options.unit.globs)
    if (glob.empty()) fail(site, fmt::format("fully_shard(\"{}\"): a unit glob must not be empty", axis));
  if (options.min_unit_params && !options.unit.globs.empty())
    fail(site, fmt::format("fully_shard(\"{}\"): give the units as globs (.unit) or by size (.min_unit_params), "
                           "not both",
                           axis));
  if (options.min_unit_params && *options.min_unit_params < 1)
    fail(site, fmt::format("fully_shard(\"{}\"): min_unit_params={} must be at least 1 (the parameter elements a "
                           "module needs to become a unit)",
                           axis, *options.min_unit_params));
  if (options.prefetch < 0)
    fail(site, fmt::format("fully_shard(\"{}\"): prefetch={} must be at least 0 (0: no prefetch)", axis,
                           options.prefetch));
  // Units and prefetch group the all-gathers of stored shards: only stage 3 stores
  // parameters sharded (stages 1 and 2 gather the updated blocks once, after the optimizer).
  if (options.stage != 3 && (!options.unit.globs.empty() || options.min_unit_params || options.prefetch != 1))
    fail(site, fmt::format("fully_shard(\"{}\"): units and prefetch apply to ZeRO stage 3, which stores "
                           "parameters sharded; stage {} keeps them replicated",
                           axis, options.stage));
}

std::string Plan::describeFsdpUnits() const {
  std::string s;
  if (!fsdpUnitGlobs_.empty()) s += fmt::format(" unit={}", fmt::join(fsdpUnitGlobs_, ","));
  if (fsdpMinUnitParams_ > 0) s += fmt::format(" min_unit_params={}", fsdpMinUnitParams_);
  if (!s.empty()) s += fmt::format(" prefetch={}", fsdpPrefetch_);
  return s;
}

std::vector<std::string> Plan::resolve_fsdp_units(
    const std::vector<std::string>& modules, const std::vector<std::pair<std::string, int64_t>>& parameters) const {
  if (fullyShardAxis_.empty()) return {};
  const std::string call = fmt::format("fully_shard(\"{}\")", fullyShardAxis_);
  if (fsdpMinUnitParams_ > 0) {
    std::vector<std::string> units = sizeBasedFsdpUnits(parameters, fsdpMinUnitParams_);
    if (units.empty()) {
      int64_t total = 0;
      for (const auto& [name, count] : parameters) total += count;
      fail(fullyShardSite_, fmt::format("{}: no module has min_unit_params={} parameter elements (the model has {} "
                                        "in all); every parameter would be in the root unit",
                                        call, fsdpMinUnitParams_, total));
    }
    return units;
  }
  // The modules that hold parameters: the DSL's modules that prefix a parameter's name.
  std::set<std::string> holding;
  for (const auto& [name, count] : parameters)
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      holding.insert(name.substr(0, dot));
  std::vector<std::string> candidates;
  for (const std::string& m : modules)
    if (holding.count(m)) candidates.push_back(m);
  std::set<std::string> units;
  for (const std::string& glob : fsdpUnitGlobs_) {
    std::vector<std::string> matched;
    for (const std::string& m : candidates)
      if (globMatches(glob, m)) matched.push_back(m);
    if (matched.empty()) {
      auto parameter = std::find_if(parameters.begin(), parameters.end(),
                                    [&](const auto& p) { return globMatches(glob, p.first); });
      if (parameter != parameters.end())
        fail(fullyShardSite_, fmt::format("{}: the unit glob '{}' names parameter '{}', not a module; a unit is a "
                                          "module whose parameters are gathered together (name the module, e.g. "
                                          "'{}')",
                                          call, glob, parameter->first,
                                          parameter->first.substr(0, parameter->first.rfind('.'))));
      const size_t shown = std::min<size_t>(candidates.size(), 4);  // a few paths as examples
      fail(fullyShardSite_,
           fmt::format("{}: the unit glob '{}' matches no module of the model that holds parameters{}", call, glob,
                       candidates.empty() ? std::string(" (it has none)")
                                          : fmt::format(" (its modules: {}{})",
                                                        fmt::join(candidates.begin(), candidates.begin() + shown, ", "),
                                                        candidates.size() > shown ? ", ..." : "")));
    }
    // The outermost modules the glob matches ("blocks.*": the blocks, not their layers).
    for (const std::string& m : matched)
      if (std::none_of(matched.begin(), matched.end(), [&](const std::string& outer) {
            return m.size() > outer.size() && m.compare(0, outer.size(), outer) == 0 && m[outer.size()] == '.';
          }))
        units.insert(m);
  }
  return {units.begin(), units.end()};
}

}  // namespace tessel
