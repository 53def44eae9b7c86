// The ZeRO closed forms and memory sizes; see ZeroMemory.h.
#include "runtime/tools/tessel/ZeroMemory.h"

#include <fmt/format.h>

#include <cmath>
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

}  // namespace tessel::cli
