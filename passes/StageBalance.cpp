// The pipeline cost model and the balanced cut; see StageBalance.h.
#include "passes/StageBalance.h"

#include "compiler/TesselDialect.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <limits>

namespace tessel {

namespace {

double elements(mlir::Type t) {
  auto r = mlir::dyn_cast<mlir::RankedTensorType>(t);
  if (!r || !r.hasStaticShape()) return 0;
  return static_cast<double>(r.getNumElements());
}

double bytesOf(mlir::Type t) {
  auto r = mlir::dyn_cast<mlir::RankedTensorType>(t);
  if (!r) return 0;
  return elements(t) * std::max<double>(1, r.getElementTypeBitWidth() / 8.0);
}

}  // namespace

double opFlops(mlir::Operation* op) {
  double out = 0;
  for (mlir::Type t : op->getResultTypes()) out += elements(t);
  if (auto mm = mlir::dyn_cast<MatmulOp>(op)) {
    auto lhs = mlir::cast<mlir::RankedTensorType>(mm.getLhs().getType());
    int64_t rank = lhs.getRank();
    double k = static_cast<double>(lhs.getDimSize(mm.getTransposeLhs() ? rank - 2 : rank - 1));
    return 2.0 * out * k;
  }
  if (mlir::isa<CausalAttentionOp, GroupedAttentionOp>(op)) {
    // q k^T and its product with v: 2 x (2 T C) per output element [B, T, C], halved by
    // the causal mask (grouped: the same per query head).
    auto r = mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    double t = r.getRank() >= 2 ? static_cast<double>(r.getDimSize(r.getRank() - 2)) : 1.0;
    return 2.0 * out * t;
  }
  return 4.0 * out;  // a few operations per element (a norm, a softmax, an add)
}

double opBytes(mlir::Operation* op) {
  double bytes = 0;
  for (mlir::Type t : op->getOperandTypes()) bytes += bytesOf(t);
  for (mlir::Type t : op->getResultTypes()) bytes += bytesOf(t);
  return bytes;
}

double opCost(mlir::Operation* op) {
  return std::max(opFlops(op) / kCostFlopsPerSecond, opBytes(op) / kCostBytesPerSecond);
}

std::vector<int64_t> balanceLayers(const std::vector<double>& costs, int64_t chunks) {
  const int64_t n = static_cast<int64_t>(costs.size());
  std::vector<double> prefix(static_cast<size_t>(n + 1), 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[static_cast<size_t>(i + 1)] = prefix[static_cast<size_t>(i)] + costs[static_cast<size_t>(i)];
  auto range = [&](int64_t a, int64_t b) { return prefix[static_cast<size_t>(b)] - prefix[static_cast<size_t>(a)]; };
  const double inf = std::numeric_limits<double>::infinity();
  // best[c][i]: the least maximum cost of cutting layers [0, i) into c chunks; cut[c][i] the
  // first layer of the last of them.
  std::vector<std::vector<double>> best(static_cast<size_t>(chunks + 1), std::vector<double>(static_cast<size_t>(n + 1), inf));
  std::vector<std::vector<int64_t>> cut(static_cast<size_t>(chunks + 1), std::vector<int64_t>(static_cast<size_t>(n + 1), 0));
  best[0][0] = 0;
  for (int64_t c = 1; c <= chunks; ++c)
    for (int64_t i = c; i <= n - (chunks - c); ++i)
      for (int64_t j = c - 1; j < i; ++j) {
        double v = std::max(best[static_cast<size_t>(c - 1)][static_cast<size_t>(j)], range(j, i));
        // Strictly better only: ties keep the earliest cut.
        if (v < best[static_cast<size_t>(c)][static_cast<size_t>(i)]) {
          best[static_cast<size_t>(c)][static_cast<size_t>(i)] = v;
          cut[static_cast<size_t>(c)][static_cast<size_t>(i)] = j;
        }
      }
  std::vector<int64_t> firsts(static_cast<size_t>(chunks), 0);
  int64_t end = n;
  for (int64_t c = chunks; c >= 1; --c) {
    firsts[static_cast<size_t>(c - 1)] = cut[static_cast<size_t>(c)][static_cast<size_t>(end)];
    end = firsts[static_cast<size_t>(c - 1)];
  }
  return firsts;
}

}  // namespace tessel
