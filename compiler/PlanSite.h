// The plan's source lines inside the compiler. A plan is not IR: its calls (tensor_parallel,
// shard, ...) reach the passes as PipelineOptions strings "file:line:col" (for a --plan on
// the command line, "--plan:1:<column>"). Errors that only the IR can find (a tp degree that
// does not divide the attention heads) are reported at that site, with a note at the op.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <string>

namespace tessel {

/// "file:line:col", the form planSiteLocation reads.
std::string planSiteString(const std::string& file, int line, int column);

/// The FileLineColLoc of `site` ("file:line:col"; the file may itself contain ':', so line
/// and column are the last two fields), or `fallback` when `site` is empty or not of that
/// form (e.g. a pipeline run from tessel-opt, which knows no plan).
mlir::Location planSiteLocation(mlir::MLIRContext* ctx, llvm::StringRef site, mlir::Location fallback);

/// Tensor parallelism over `tp` ranks splits every attention's heads over them: checks that
/// `tp` divides the heads of every tessel.causal_attention in `module`. On the first that it
/// does not divide, emits "tensor_parallel(\"<axis>\"): tp=<tp> does not divide the <n>
/// attention heads ..." at `site` with a note at the attention op, and fails.
mlir::LogicalResult checkTensorParallelHeads(mlir::ModuleOp module, llvm::StringRef axis, int64_t tp,
                                             mlir::Location site);

/// Sequence parallelism splits the rows (dimension 1, T) of every layer_norm and rms_norm
/// input [B, T, C] over the tensor-parallel axis `axis`. Checks that `module` has such a norm
/// and no norm whose input lacks a T dimension (rank < 3, e.g. a classifier's [B, C]), for
/// which sequence parallelism would be silently ignored. Otherwise emits the reason at `site`
/// (with a note at the norm without T) and fails.
mlir::LogicalResult checkSequenceParallelNorms(mlir::ModuleOp module, llvm::StringRef axis, mlir::Location site);

}  // namespace tessel
