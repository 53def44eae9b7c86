//===- SchedulePipeline.cpp - order a stage's microbatches by its action list ---===//
//
// Algorithm (see passes/PassesPipeline.td), on @train_step as tessel-microbatch leaves it:
//   1. The schedule's action list of this rank: built (runtime/pipeline/Schedule.h:
//      GPipe, 1F1B, interleaved, ZB-H1) or read from a CSV and verified.
//   2. Each unrolled op belongs to one action: (microbatch, chunk) from its tags, the kind
//      from its tessel.pp_action and whether it is a transfer: F, B, SEND_F, RECV_F,
//      SEND_B, RECV_B. When the list splits backward into I and W (zero-bubble), a chunk's
//      backward ops that compute the gradient it sends back (SEND_B) are its I, the others
//      (weight gradients and their sums) its W.
//   3. The ops move into the list's order: shared ops first, then each action's ops in their
//      old relative order, then the step's end (sums, the loss, tied gradients). An action
//      that uses a value a later action computes is an error naming both.
//   4. Transfers of consecutive comm actions share a tessel.pp_group (one send_recv step:
//      they progress together).
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/PipelineAttrs.h"
#include "compiler/PlanSite.h"
#include "passes/PipelineStage.h"
#include "runtime/pipeline/Schedule.h"
#include "runtime/pipeline/Verify.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#define DEBUG_TYPE "tessel-schedule-pipeline"

namespace tessel {
#define GEN_PASS_DEF_SCHEDULEPIPELINE
#include "passes/Passes.h.inc"

namespace {

using mlir::Operation;
using mlir::Value;
namespace pl = rt::pipeline;

/// An action's identity without its rank: (kind, microbatch, chunk).
using Key = std::tuple<pl::ActionKind, int64_t, int64_t>;

struct SchedulePipelinePass : impl::SchedulePipelineBase<SchedulePipelinePass> {
  using SchedulePipelineBase::SchedulePipelineBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto step = unreducedTrainStep(module, trainStepName, DEBUG_TYPE,
                                   "once, after tessel-microbatch and before tessel-gradient-all-reduce and tessel-optimizer");
    if (!step) return signalPassFailure();
    std::optional<PipelineInfo> info = pipelineInfo(step);
    if (!info || info->microbatches < 1 || !info->schedule.empty()) {
      step.emitError() << DEBUG_TYPE << ": @" << trainStepName
                       << (!info || info->microbatches < 1 ? " has no microbatches (tessel-microbatch did not run)"
                                                            : " is already scheduled");
      return signalPassFailure();
    }
    mlir::Location site = planSiteLocation(step.getContext(), planSite, step.getLoc());
    pl::Schedule schedule;
    try {
      schedule = buildOrRead(*info);
    } catch (const std::exception& e) {
      // A CSV's parse errors already start with "FILE:LINE:"; say the file once.
      const llvm::StringRef what = e.what();
      if (what.starts_with(scheduleName + ":"))
        mlir::emitError(site) << "pipeline schedule " << what;
      else
        mlir::emitError(site) << "pipeline schedule '" << scheduleName << "': " << what;
      return signalPassFailure();
    }
    if (mlir::failed(reorder(step, *info, schedule[static_cast<size_t>(info->stage)], site)))
      return signalPassFailure();
    info->schedule = scheduleName;
    setPipelineInfo(step, *info);
  }

  /// The whole schedule, one action list per rank: built, or read from the CSV file and
  /// verified. Throws with the reason.
  pl::Schedule buildOrRead(const PipelineInfo& info) {
    // Any name but a built-in schedule's is a CSV file, whatever its suffix, as the plan
    // decides (dsl/PlanPipeline.cpp), so that a file the plan accepted is read here.
    std::optional<pl::ScheduleKind> kind;
    try {
      kind = pl::parseScheduleKind(scheduleName);
    } catch (const std::invalid_argument&) {
    }
    if (kind) return pl::buildSchedule({*kind, info.stages, info.microbatches, info.virtualStages});
    std::ifstream in(scheduleName);
    if (!in)
      throw std::runtime_error("not a built-in schedule (gpipe, 1f1b, interleaved or zero-bubble), and no "
                               "readable CSV file of that name");
    std::stringstream text;
    text << in.rdbuf();
    pl::Schedule s = pl::parseScheduleCsv(text.str(), scheduleName);
    // Also checks that the file has one row per rank before the stage's row is read.
    pl::verifySchedule(s, info.stages, info.microbatches, info.virtualStages);
    return s;
  }

  mlir::LogicalResult reorder(mlir::func::FuncOp f, const PipelineInfo& info,
                              const std::vector<pl::Action>& actions, mlir::Location site) {
    mlir::Block& body = f.getBody().front();
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    const bool splitBackward = llvm::any_of(actions, [](const pl::Action& a) {
      return a.kind == pl::ActionKind::I || a.kind == pl::ActionKind::W;
    });

    // 2. Ops by action; untagged ops before the first tagged one are shared, after the last
    // one the step's end.
    std::map<Key, llvm::SmallVector<Operation*>> groups;
    llvm::SmallVector<Operation*> prefix, suffix;
    bool seenTagged = false;
    for (Operation& op : body.without_terminator()) {
      std::optional<int64_t> m = pipelineTag(&op, PipelineTag::Microbatch);
      std::optional<int64_t> c = pipelineTag(&op, PipelineTag::Chunk);
      if (!m) {
        (seenTagged ? suffix : prefix).push_back(&op);
        continue;
      }
      if (!c) return op.emitError() << DEBUG_TYPE << ": a microbatch op without tessel.pp_chunk";
      if (!suffix.empty())
        return suffix.front()->emitError() << DEBUG_TYPE << ": an op of no microbatch between microbatch ops";
      seenTagged = true;
      const bool backward = isBackwardAction(&op);
      pl::ActionKind kind = llvm::isa<SendOp>(op)   ? (backward ? pl::ActionKind::SendB : pl::ActionKind::SendF)
                            : llvm::isa<RecvOp>(op) ? (backward ? pl::ActionKind::RecvB : pl::ActionKind::RecvF)
                                                    : (backward ? pl::ActionKind::B : pl::ActionKind::F);
      groups[{kind, *m, *c}].push_back(&op);
    }
    if (splitBackward) splitInputAndWeight(groups);

    // 3. The new order.
    llvm::SmallVector<Operation*> order(prefix.begin(), prefix.end());
    llvm::DenseMap<Operation*, size_t> actionOf;  // op -> index in `actions`
    for (auto [index, a] : llvm::enumerate(actions)) {
      auto it = groups.find({a.kind, a.microbatch, a.stage});
      if (it == groups.end()) continue;  // a transfer this model does not make (none crosses)
      for (Operation* op : it->second) {
        order.push_back(op);
        actionOf[op] = index;
      }
      groups.erase(it);
    }
    if (!groups.empty()) {
      auto& [key, ops] = *groups.begin();
      pl::Action missing{std::get<0>(key), std::get<1>(key), std::get<2>(key)};
      return mlir::emitError(site) << "pipeline schedule '" << scheduleName << "': rank " << info.stage
                                   << "'s action list has no " << missing.text() << ", which this stage computes";
    }
    order.append(suffix.begin(), suffix.end());
    llvm::DenseMap<Operation*, size_t> position;
    for (auto [i, op] : llvm::enumerate(order)) position[op] = i;
    for (Operation* op : order)
      for (Value operand : op->getOperands()) {
        Operation* def = operand.getDefiningOp();
        if (!def || def->getBlock() != &body || position.lookup(def) < position.lookup(op)) continue;
        return mlir::emitError(site) << "pipeline schedule '" << scheduleName << "': rank " << info.stage
                                     << "'s action " << actionOf.lookup(op) << " ("
                                     << actions[actionOf.lookup(op)].text() << ") uses a value of action "
                                     << actionOf.lookup(def) << " (" << actions[actionOf.lookup(def)].text()
                                     << "), which the list places later";
      }
    for (Operation* op : order) op->moveBefore(ret);

    // 4. Groups of consecutive comm actions: each action's group number (-1 for compute),
    // then one pass over the transfers.
    std::vector<int64_t> groupOf(actions.size(), -1);
    int64_t group = -1;
    bool previousComm = false;
    for (auto [index, a] : llvm::enumerate(actions)) {
      const bool comm = !a.isCompute();
      if (comm && !previousComm) ++group;
      previousComm = comm;
      if (comm) groupOf[index] = group;
    }
    for (Operation* op : order)
      if (llvm::isa<SendOp, RecvOp>(op) && actionOf.count(op) && groupOf[actionOf.lookup(op)] >= 0)
        setPipelineTag(op, PipelineTag::Group, groupOf[actionOf.lookup(op)]);
    return mlir::success();
  }

  /// Zero-bubble: each backward group B(m, c) becomes I(m, c), the ops the chunk's gradient
  /// sent back (SEND_B) needs, and W(m, c), the rest.
  static void splitInputAndWeight(std::map<Key, llvm::SmallVector<Operation*>>& groups) {
    std::map<Key, llvm::SmallVector<Operation*>> split;
    for (auto& [key, ops] : groups) {
      auto [kind, m, c] = key;
      if (kind != pl::ActionKind::B) {
        split[key] = ops;
        continue;
      }
      llvm::DenseSet<Operation*> members(ops.begin(), ops.end()), input;
      auto sends = groups.find({pl::ActionKind::SendB, m, c});
      llvm::SmallVector<Operation*> work;
      if (sends != groups.end())
        for (Operation* s : sends->second) work.push_back(s);
      while (!work.empty()) {
        Operation* op = work.pop_back_val();
        for (Value v : op->getOperands())
          if (Operation* d = v.getDefiningOp(); d && members.contains(d) && input.insert(d).second) work.push_back(d);
      }
      for (Operation* op : ops) {
        split[{input.contains(op) ? pl::ActionKind::I : pl::ActionKind::W, m, c}].push_back(op);
        setBackwardPart(op, /*input=*/input.contains(op));
      }
    }
    groups = std::move(split);
  }
};

}  // namespace
}  // namespace tessel
