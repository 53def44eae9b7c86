// FSDP units; see FsdpUnits.h.
#include "compiler/FsdpUnits.h"

#include "compiler/Glob.h"

#include <algorithm>
#include <map>

namespace tessel {

std::string fsdpUnitOf(std::string_view name, const std::vector<std::string>& globs) {
  std::string_view unit;
  for (const std::string& glob : globs)
    for (size_t dot = name.find('.'); dot != std::string_view::npos; dot = name.find('.', dot + 1)) {
      std::string_view prefix = name.substr(0, dot);
      if (!globMatches(glob, prefix)) continue;
      if (prefix.size() > unit.size()) unit = prefix;  // the innermost of the globs' outermost matches
      break;
    }
  return std::string(unit);
}

std::vector<std::string> sizeBasedFsdpUnits(const std::vector<std::pair<std::string, int64_t>>& parameters,
                                            int64_t minParams) {
  // Elements not yet in a unit, per module path; a parameter counts in its own module.
  std::map<std::string, int64_t> unwrapped;
  for (const auto& [name, count] : parameters) {
    size_t dot = name.rfind('.');
    if (dot != std::string::npos) unwrapped[name.substr(0, dot)] += count;
    for (dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      unwrapped.try_emplace(name.substr(0, dot), 0);  // every enclosing module exists
  }
  std::vector<std::string> modules;
  for (const auto& [path, count] : unwrapped) modules.push_back(path);
  // Innermost first: more dots first, then by name (deterministic on every rank).
  auto depth = [](const std::string& p) { return std::count(p.begin(), p.end(), '.'); };
  std::stable_sort(modules.begin(), modules.end(),
                   [&](const std::string& a, const std::string& b) { return depth(a) > depth(b); });
  std::vector<std::string> units;
  for (const std::string& m : modules) {
    const int64_t count = unwrapped[m];
    if (count >= minParams) {
      units.push_back(m);
      continue;  // wrapped: its parameters are no longer the parent's
    }
    if (size_t dot = m.rfind('.'); dot != std::string::npos) unwrapped[m.substr(0, dot)] += count;
  }
  return units;
}

}  // namespace tessel
