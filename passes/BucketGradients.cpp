//===- BucketGradients.cpp - coalesce gradient all-reduces into buckets --------===//
//
// Algorithm (see passes/Passes.td):
//   1. Collect the single-input tessel.all_reduce_start ops (and their waits); sort them by
//      the position of their input's producer in the block (backward production order).
//   2. Pack greedily: a bucket takes gradients until it holds >= cap bytes.
//   3. Each bucket of two or more becomes one start/wait pair at its last wait's place;
//      every bucket is renumbered in issue order.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

#define DEBUG_TYPE "tessel-bucket-gradients"

namespace tessel {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "passes/Passes.h.inc"

namespace {

int64_t bytesOf(mlir::Value v) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  return t.getNumElements() * static_cast<int64_t>(t.getElementTypeBitWidth() / 8);
}

struct BucketGradientsPass : impl::BucketGradientsBase<BucketGradientsPass> {
  using BucketGradientsBase::BucketGradientsBase;

  void runOnOperation() override {
    mlir::func::FuncOp f = getOperation();
    // Stage: one all-reduce per gradient, all of them before the first use of a reduced
    // gradient (tessel-gradient-all-reduce's output, possibly followed by the optimizer).
    // Buckets already made would be renumbered twice, and a bucket's wait goes after its
    // last gradient's, which must not pass a use of an earlier one.
    if (mlir::failed(PipelineStage(f).require(
            DEBUG_TYPE, f, {},
            {StageFact::GradientsBucketed, StageFact::CollectivesInterleaved, StageFact::Fused},
            "once, after tessel-gradient-all-reduce and before tessel-overlap-collectives and "
            "tessel-fuse")))
      return signalPassFailure();
    if (!(bucketMb > 0)) {
      f.emitError() << "tessel-bucket-gradients: bucket-mb must be > 0, got " << static_cast<double>(bucketMb);
      return signalPassFailure();
    }
    mlir::Block& body = f.getBody().front();
    llvm::DenseMap<mlir::Operation*, size_t> position;
    size_t n = 0;
    for (mlir::Operation& op : body) position[&op] = n++;
    // Position of a value's producer (arguments first).
    auto produced = [&](mlir::Value v) -> size_t {
      mlir::Operation* def = v.getDefiningOp();
      return def && def->getBlock() == &body ? position.at(def) + 1 : 0;
    };

    struct Single {
      AllReduceStartOp start;
      AllReduceWaitOp wait;
      size_t at;
    };
    std::vector<Single> singles;
    for (auto start : body.getOps<AllReduceStartOp>()) {
      if (start.getInputs().size() != 1) continue;
      auto wait = llvm::dyn_cast<AllReduceWaitOp>(*start.getInFlight()[0].getUsers().begin());
      if (!wait) continue;
      singles.push_back({start, wait, produced(start.getInputs()[0])});
    }
    if (singles.empty()) return;
    std::stable_sort(singles.begin(), singles.end(),
                     [](const Single& a, const Single& b) { return a.at < b.at; });
    for (Single s : singles)
      if (s.start.getReduce() != singles[0].start.getReduce() ||
          s.start.getGridAttr() != singles[0].start.getGridAttr() ||
          s.start.getGridAxes() != singles[0].start.getGridAxes()) {
        s.start.emitError() << "tessel-bucket-gradients: all-reduces with different reduce, "
                               "grid or grid axes cannot share buckets";
        return signalPassFailure();
      }

    // 2. Greedy packing in production order.
    const double cap = bucketMb * 1024.0 * 1024.0;
    std::vector<std::vector<Single>> buckets(1);
    double filled = 0;
    for (Single s : singles) {
      if (filled >= cap) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(s);
      filled += static_cast<double>(bytesOf(s.start.getInputs()[0]));
    }

    // 3. One pair per bucket, in bucket order, after the last single wait (so every input
    //    is defined before and every user comes after).
    AllReduceWaitOp last = singles.front().wait;
    for (Single s : singles)
      if (last->isBeforeInBlock(s.wait)) last = s.wait;
    mlir::OpBuilder b(last->getNextNode());
    for (auto [index, bucket] : llvm::enumerate(buckets)) {
      llvm::SmallVector<mlir::Value> inputs;
      llvm::SmallVector<llvm::StringRef> params;
      for (Single s : bucket) {
        inputs.push_back(s.start.getInputs()[0]);
        params.push_back(llvm::cast<mlir::StringAttr>(s.start.getParams()[0]).getValue());
      }
      // The location of the last gradient: where the bucket becomes ready.
      mlir::Location loc = bucket.back().start->getLoc();
      AllReduceStartOp first = bucket.front().start;
      auto start = AllReduceStartOp::create(
          b, loc, inputs, first.getReduceAttr(), first.getGridAttr(), first.getGridAxesAttr(),
          b.getI64IntegerAttr(static_cast<int64_t>(index)), b.getStrArrayAttr(params));
      auto wait = AllReduceWaitOp::create(b, loc, start.getInFlight());
      for (auto [k, s] : llvm::enumerate(bucket)) {
        s.wait.getResults()[0].replaceAllUsesWith(wait.getResults()[k]);
        s.wait.erase();
        s.start.erase();
      }
    }
  }
};

}  // namespace
}  // namespace tessel
