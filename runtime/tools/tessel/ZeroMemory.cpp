// The ZeRO closed forms and memory sizes; see ZeroMemory.h.
#include "runtime/tools/tessel/ZeroMemory.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace tessel::cli {

double zeroBytesPerGpu(int stage, double params, int64_t gpus) {
  if (!(params > 0) || std::isinf(params))
    throw std::invalid_argument(fmt::format("the parameter count {} is not a positive number", params));
  if (gpus < 1) throw std::invalid_argument(fmt::format("the GPU count {} is not at least 1", gpus));
  const double n = static_cast<double>(gpus);
  const double p = kParamBytes * params, g = kGradBytes * params, o = kOptimizerBytes * params;
  switch (stage) {
    case 0: return p + g + o;
    case 1: return p + g + o / n;
    case 2: return p + (g + o) / n;
    case 3: return (p + g + o) / n;
    default: throw std::invalid_argument(fmt::format("ZeRO stage {} is not 0, 1, 2 or 3", stage));
  }
}

std::vector<ZeroStageMemory> zeroMemoryTable(double params, int64_t gpus) {
  const char* names[] = {"baseline", "1: optimizer state", "2: + gradients", "3: + parameters"};
  const char* formulas[] = {"16Ψ", "4Ψ + 12Ψ/N", "2Ψ + 14Ψ/N", "16Ψ/N"};
  std::vector<ZeroStageMemory> rows;
  for (int s = 0; s < 4; ++s) rows.push_back({s, names[s], formulas[s], zeroBytesPerGpu(s, params, gpus)});
  return rows;
}

int64_t parseMemorySize(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("'{}' is not a memory size such as 80GiB ({})", text, why));
  };
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (end == begin || text.empty() || std::isspace(static_cast<unsigned char>(text[0])))
    throw bad("a number, then a unit B, KB, KiB, MB, MiB, GB, GiB, TB or TiB");
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  struct Unit {
    const char* name;
    double bytes;
  };
  static const Unit units[] = {{"B", 1},     {"KB", 1e3},         {"KiB", 0x1p10}, {"MB", 1e6},
                               {"MiB", 0x1p20}, {"GB", 1e9},      {"GiB", 0x1p30}, {"TB", 1e12},
                               {"TiB", 0x1p40}};
  const Unit* found = nullptr;
  for (const Unit& u : units)
    if (unit == u.name) found = &u;
  if (!found) throw bad(unit.empty() ? "the unit is missing: B, KB, KiB, MB, MiB, GB, GiB, TB or TiB"
                                     : "unknown unit '" + unit + "': use B, KB, KiB, MB, MiB, GB, GiB, TB or TiB");
  const double bytes = value * found->bytes;
  if (!(bytes >= 1) || !(bytes <= 0x1p60)) throw bad("the size must be at least 1 byte and at most 2^60 bytes");
  return static_cast<int64_t>(bytes);
}

}  // namespace tessel::cli
