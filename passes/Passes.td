//===- Passes.td - Tessel passes ----------------------------------*- tablegen -*-===//
//
// Every Tessel transformation pass: one pass per file in passes/, one flag, one lit test
// named after the flag in test/lit/passes/.
//
// Every description ends with the pass's precondition ("Stage: ..."): the stage its input
// must be at, in the terms of passes/PipelineStage.h (@train_step exists, gradients
// reduced, bucketed, optimizer present, fused, batch sharded, mixed precision). The pass
// checks it before changing anything and otherwise fails with
// "<flag>: <what the IR shows>; it runs <where>", at the function or module; each lit test
// has a case of an input at the wrong stage.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_PASSES_TD
#define TESSEL_PASSES_TD

include "mlir/Pass/PassBase.td"

include "PassesCore.td"
include "PassesDataParallel.td"
include "PassesSharding.td"
include "PassesPipeline.td"

#endif // TESSEL_PASSES_TD
