// Lowering of the pipeline-parallel ops and tags; see PipelineLowering.h.
#include "codegen/PipelineLowering.h"

#include "codegen/MeshLowering.h"
#include "compiler/Location.h"
#include "compiler/PipelineAttrs.h"
#include "runtime/pipeline/Schedule.h"

#include <fmt/format.h>

namespace tessel {

namespace {

/// The action kind of a tagged op, or nullopt.
std::optional<rt::pipeline::ActionKind> actionKind(mlir::Operation* op) {
  namespace pl = rt::pipeline;
  llvm::StringRef letter = actionLetter(op);
  if (letter.empty()) return std::nullopt;
  const bool backward = letter != "F";
  if (mlir::isa<SendOp>(op)) return backward ? pl::ActionKind::SendB : pl::ActionKind::SendF;
  if (mlir::isa<RecvOp>(op)) return backward ? pl::ActionKind::RecvB : pl::ActionKind::RecvF;
  return letter == "F" ? pl::ActionKind::F
         : letter == "I" ? pl::ActionKind::I
         : letter == "W" ? pl::ActionKind::W
                         : pl::ActionKind::B;
}

}  // namespace

mlir::FailureOr<llvm::SmallVector<mlir::Operation*>> p2pGroup(llvm::ArrayRef<mlir::Operation*> ops, size_t i) {
  llvm::SmallVector<mlir::Operation*> members{ops[i]};
  std::optional<int64_t> group = pipelineTag(ops[i], PipelineTag::Group);
  if (!group) return members;
  size_t last = i;
  for (size_t j = i + 1; j < ops.size(); ++j)
    if (mlir::isa<SendOp, RecvOp>(ops[j]) && pipelineTag(ops[j], PipelineTag::Group) == group) {
      if (j != last + 1)
        return ops[j]->emitError() << "a transfer of send/recv group " << *group
                                   << " is not next to the group's other transfers (an op lies between them)";
      members.push_back(ops[j]);
      last = j;
    }
  return members;
}

std::string actionName(mlir::Operation* op) {
  std::optional<int64_t> m = pipelineTag(op, PipelineTag::Microbatch);
  std::optional<int64_t> c = pipelineTag(op, PipelineTag::Chunk);
  std::optional<rt::pipeline::ActionKind> kind = actionKind(op);
  if (!m || !c || !kind) return "";
  return rt::pipeline::Action{*kind, *m, *c}.text();
}

rt::CollectiveStep lowerP2PGroup(llvm::ArrayRef<mlir::Operation*> members,
                                 llvm::SmallVectorImpl<mlir::Operation*>& sendsFirst) {
  rt::CollectiveStep step;
  step.kind = rt::CollectiveStep::Kind::SendRecv;
  step.buffer = -1;
  for (bool sends : {true, false})
    for (mlir::Operation* op : members)
      if (mlir::isa<SendOp>(op) == sends) sendsFirst.push_back(op);
  for (mlir::Operation* op : sendsFirst) {
    auto send = mlir::dyn_cast<SendOp>(op);
    auto recv = mlir::dyn_cast<RecvOp>(op);
    mlir::FlatSymbolRefAttr grid = send ? send.getGridAttr() : recv.getGridAttr();
    llvm::ArrayRef<int16_t> axes = send ? send.getGridAxes() : recv.getGridAxes();
    step.axes = axisNames(op, grid, axes);
    step.group = gridGroupSize(op, grid, axes);
    step.peers.push_back(static_cast<int64_t>(send ? send.getPeer() : recv.getPeer()));
    step.sends += send ? 1 : 0;
    std::string action = actionName(op);
    step.names.push_back(action.empty() ? locationPath(op->getLoc()) : action);
  }
  step.location = locationString(members.front()->getLoc());
  return step;
}

std::optional<rt::PipelineInfo> programPipeline(mlir::ModuleOp module) {
  std::optional<PipelineInfo> found;
  for (auto f : module.getOps<mlir::func::FuncOp>())
    if (auto info = pipelineInfo(f); info && (!found || f.getSymName() == "train_step")) found = info;
  if (!found) return std::nullopt;
  rt::PipelineInfo p;
  p.axis = found->axis;
  p.stages = found->stages;
  p.stage = found->stage;
  p.microbatches = std::max<int64_t>(found->microbatches, 1);
  p.virtualStages = found->virtualStages;
  p.schedule = found->schedule;
  return p;
}

}  // namespace tessel
