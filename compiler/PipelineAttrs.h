// Typed access to the pipeline-parallel attributes of the tessel dialect (declared, with who
// sets and reads each, in TesselDialect.td: tessel.pipeline on a stage's functions,
// tessel.pp_chunk / pp_microbatch / pp_action / pp_group on operations, tessel.pp_stages on a
// tied parameter). No other file spells their names.
#pragma once

#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>

namespace tessel {

/// What tessel.pipeline records about the stage a function computes.
struct PipelineInfo {
  std::string axis;           // the plan's pipeline axis of @mesh ("pp")
  int64_t stage = 0;          // this function's stage: its rank's coordinate on `axis`
  int64_t stages = 1;         // p: ranks along `axis`
  int64_t virtualStages = 1;  // v: chunks per rank (p x v chunks, chunk c on rank c % p)
  int64_t microbatches = 0;   // M, once tessel-microbatch ran (0 before)
  std::string schedule;       // once tessel-schedule-pipeline ran ("" before)
};

/// The function's tessel.pipeline, or nullopt for a function of no pipeline stage.
std::optional<PipelineInfo> pipelineInfo(mlir::func::FuncOp f);
/// Sets tessel.pipeline on `f` (microbatches and schedule only when set).
void setPipelineInfo(mlir::func::FuncOp f, const PipelineInfo& info);

/// An i64 pipeline attribute of an operation: tessel.pp_chunk, pp_microbatch or pp_group.
enum class PipelineTag { Chunk, Microbatch, Group };
std::optional<int64_t> pipelineTag(mlir::Operation* op, PipelineTag tag);
void setPipelineTag(mlir::Operation* op, PipelineTag tag, int64_t value);
/// Whether `op` belongs to its chunk's backward action (tessel.pp_action "B", or its part
/// "I" or "W").
bool isBackwardAction(mlir::Operation* op);
/// tessel.pp_action: "F", "B", "I" or "W"; "" when absent.
llvm::StringRef actionLetter(mlir::Operation* op);
/// Sets tessel.pp_action: "B" when `backward`, else "F".
void setAction(mlir::Operation* op, bool backward);
/// Sets tessel.pp_action of a backward op to its zero-bubble part: "I" (it computes the
/// input gradient) or "W" (a weight gradient).
void setBackwardPart(mlir::Operation* op, bool input);
/// The stages holding a tied parameter (tessel.pp_stages), empty when one stage holds it.
llvm::SmallVector<int64_t> tiedStages(ParamOp param);
void setTiedStages(ParamOp param, llvm::ArrayRef<int64_t> stages);
/// Copies every pipeline attribute of `from` (chunk, microbatch, action) onto `to`.
void copyPipelineTags(mlir::Operation* from, mlir::Operation* to);

}  // namespace tessel
