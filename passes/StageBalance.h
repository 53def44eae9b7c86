// The cost model that balances pipeline stages (tessel-split-stages): an op's cost from its
// FLOPs and the bytes it reads and writes, and the contiguous cut of a sequence of layers
// into chunks that minimises the most expensive chunk.
#pragma once

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <vector>

namespace tessel {

/// Nominal rates of the cost model: the cost of an op is the time of a roofline model,
/// max(FLOPs / kCostFlopsPerSecond, bytes / kCostBytesPerSecond), in seconds. Only the ratios
/// between ops matter for balancing (a GEMM-bound transformer layer costs its FLOPs, an
/// elementwise op its bytes).
inline constexpr double kCostFlopsPerSecond = 1e11;
inline constexpr double kCostBytesPerSecond = 2e10;

/// The FLOPs of `op`: 2 m n k for a matrix product (batched included), the result's elements
/// times a small per-element count for other ops (attention: its two products).
double opFlops(mlir::Operation* op);
/// The bytes `op` reads and writes: its tensor operands and results.
double opBytes(mlir::Operation* op);
/// The roofline time of `op` in seconds (see kCostFlopsPerSecond).
double opCost(mlir::Operation* op);

/// Cuts layers 0..n-1 (costs[i] each, >= 0) into `chunks` (1 <= chunks <= n) contiguous
/// non-empty ranges minimising the largest range's cost (the linear partition problem,
/// solved exactly by dynamic programming in O(chunks n^2); among equal maxima the earliest
/// cut found wins). Returns the first layer of each chunk (ascending, starting at 0).
std::vector<int64_t> balanceLayers(const std::vector<double>& costs, int64_t chunks);

}  // namespace tessel
