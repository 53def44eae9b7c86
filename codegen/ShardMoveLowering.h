// Lowering the synchronous collectives that move shards (tessel.all_gather,
// tessel.reduce_scatter, tessel.all_to_all; compiler/TesselGatherScatterOps.td) to one
// rt::CollectiveStep each (runtime/exec/Program.h: kinds AllGather, ReduceScatter, AllToAll).
// codegen/Lowering.cpp allocates the output and the staging temp; this file decides the rest.
#pragma once

#include "runtime/exec/Program.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>

namespace tessel {

/// The step of a shard-moving collective, without buffers: kind, dim (and concatDim), reduce
/// (reduce_scatter: sum or avg), axes, group, location and the op's path in `names`.
/// `stagingNumel` is set to the staging temp's elements (Program.h: gather P x input,
/// reduce_scatter P x result: its input padded when P does not divide it, all_to_all 2 x input).
/// A gather of an FSDP unit's parameter names the unit in `step.unit` (compiler/FsdpUnits.h's tag).
struct ShardMove {
  rt::CollectiveStep step;
  int64_t stagingNumel = 0;
};

/// True for tessel.all_gather, tessel.reduce_scatter and tessel.all_to_all (the one-step
/// forms; lowerShardMove also takes tessel.all_gather_start, the Start of a split gather).
bool isShardMove(mlir::Operation* op);

/// The step of `op` (isShardMove). Emits an error at the op and fails for an element type
/// other than f32 or bf16, a reduce_scatter with `max` (no max collective in the runtime),
/// or grid axes out of the grid's order (the runtime's groups number ranks in mesh order).
mlir::FailureOr<ShardMove> lowerShardMove(mlir::Operation* op);

}  // namespace tessel
