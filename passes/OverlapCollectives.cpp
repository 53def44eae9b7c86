//===- OverlapCollectives.cpp - where collectives start and wait ---------------===//
//
// Algorithm (see passes/Passes.td), on the tessel.all_reduce_start/wait pairs of a function:
//   overlap:    start right after the producer of its last input (after the block's
//               arguments and params when every input is one of those), in bucket order
//               among starts at the same place; wait right before its first user.
//   no overlap: every start (bucket order) then every wait right before the first user of
//               any wait result.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "passes/PipelineStage.h"

#include <algorithm>

#define DEBUG_TYPE "tessel-overlap-collectives"

namespace tessel {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

/// The first op of `body` (in block order) that uses a result of `wait`.
mlir::Operation* firstUser(mlir::Operation* wait) {
  mlir::Operation* first = nullptr;
  for (mlir::Value r : wait->getResults())
    for (mlir::Operation* user : r.getUsers()) {
      while (user->getBlock() != wait->getBlock()) user = user->getParentOp();
      if (!first || user->isBeforeInBlock(first)) first = user;
    }
  return first;
}

struct OverlapCollectivesPass : impl::OverlapCollectivesBase<OverlapCollectivesPass> {
  using OverlapCollectivesBase::OverlapCollectivesBase;

  void runOnOperation() override {
    // Stage: after bucketing, before fusion: tessel-fuse groups ops by their place in the
    // block, so the collectives must be in theirs first.
    if (mlir::failed(PipelineStage(getOperation())
                         .require(DEBUG_TYPE, getOperation(), {}, {StageFact::Fused},
                                  "after tessel-bucket-gradients and before tessel-fuse")))
      return signalPassFailure();
    mlir::Block& body = getOperation().getBody().front();
    std::vector<AllReduceStartOp> starts(body.getOps<AllReduceStartOp>().begin(),
                                         body.getOps<AllReduceStartOp>().end());
    if (starts.empty()) return;
    std::stable_sort(starts.begin(), starts.end(), [](AllReduceStartOp a, AllReduceStartOp b) {
      return a.getBucket() < b.getBucket();
    });
    std::vector<mlir::Operation*> waits;
    for (AllReduceStartOp s : starts)
      waits.push_back(*s.getInFlight()[0].getUsers().begin());

    if (!overlap) {
      mlir::Operation* end = nullptr;
      for (mlir::Operation* w : waits)
        if (mlir::Operation* u = firstUser(w); u && (!end || u->isBeforeInBlock(end))) end = u;
      if (!end) end = body.getTerminator();
      for (AllReduceStartOp s : starts) s->moveBefore(end);
      for (mlir::Operation* w : waits) w->moveBefore(end);
      return;
    }
    // Starts: right after their last input's producer. Moving them in bucket order, each
    // after the previous start when both belong at the same place, keeps the issue order.
    mlir::Operation* previous = nullptr;
    for (AllReduceStartOp s : starts) {
      mlir::Operation* after = nullptr;
      for (mlir::Value v : s.getInputs()) {
        mlir::Operation* def = v.getDefiningOp();
        if (def && def->getBlock() == &body && (!after || after->isBeforeInBlock(def)))
          after = def;
      }
      if (previous && (!after || after->isBeforeInBlock(previous))) after = previous;
      if (after) s->moveAfter(after);
      else s->moveBefore(&body.front());
      previous = s;
    }
    for (mlir::Operation* w : waits)
      if (mlir::Operation* u = firstUser(w)) w->moveBefore(u);
  }
};

}  // namespace
}  // namespace tessel
