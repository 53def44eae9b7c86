// Lowering the pipeline-parallel parts of a stage's module (passes/PassesPipeline.td) to the
// program format (runtime/exec/Program.h): a group of tessel.send / tessel.recv to one
// send_recv step, each op's schedule action to the function's action spans, and the
// function's tessel.pipeline to Program::pipeline. codegen/Lowering.cpp allocates the
// buffers; this file decides the rest.
#pragma once

#include "runtime/exec/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <optional>
#include <string>

namespace tessel {

/// The transfers that progress together with `ops[i]` (a tessel.send or tessel.recv): it and
/// the p2p ops right after it with the same tessel.pp_group (an ungrouped transfer is alone).
/// Members must be contiguous in `ops`: a later op of the group after another op is an error at
/// it (fails).
mlir::FailureOr<llvm::SmallVector<mlir::Operation*>> p2pGroup(llvm::ArrayRef<mlir::Operation*> ops, size_t i);

/// The send_recv step of a group, without buffers (Lowering fills `tensors` with the sends'
/// operands, then the recvs' results, in `sendsFirst` order): axes (the one pipeline axis),
/// group, peers, sends, names ("SEND_F mb 2 chunk 0", or the op's path), location. `sendsFirst`
/// receives the members reordered: sends, then recvs.
rt::CollectiveStep lowerP2PGroup(llvm::ArrayRef<mlir::Operation*> members,
                                 llvm::SmallVectorImpl<mlir::Operation*>& sendsFirst);

/// The schedule action an op carries out, in runtime/pipeline's text ("0F2": chunk 0,
/// forward, microbatch 2; "1SEND_B3"), or "" for an op of no action (shared ops, the step's
/// end).
std::string actionName(mlir::Operation* op);

/// Program::pipeline from the module's functions' tessel.pipeline (the one of @train_step,
/// else any), or nullopt when no function is a pipeline stage.
std::optional<rt::PipelineInfo> programPipeline(mlir::ModuleOp module);

}  // namespace tessel
