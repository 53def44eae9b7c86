// ZeRO-1 and ZeRO-2 over one mesh axis: which parameters have their optimizer state (and at
// stage 2 their gradient) stored as blocks of dimension 0 over the axis, while the parameter
// itself stays replicated. Shared by tessel-reduce-scatter-gradients and tessel-optimizer, so
// that the gradient blocks one makes are the state blocks the other updates.
#pragma once

#include "compiler/ShardingRules.h"
#include "compiler/TesselDialect.h"

namespace tessel {

/// Whether parameter `p` (local shapes) is split into blocks over grid axis `axis` (of
/// `grid`) by ZeRO-1/2: true for rank >= 1; false for a scalar (its state stays replicated).
/// Fails, after an error at the parameter naming `pass`, when `p` is already split over the
/// axis (ZeRO-3 stores it split) or on dimension 0 (tensor parallelism), or when the axis's
/// ranks do not divide its first dimension (uneven blocks are not supported).
mlir::FailureOr<bool> hasZeroBlocks(ParamOp p, const GridInfo& grid, int16_t axis, llvm::StringRef pass);

/// The type of one block of `type` (rank >= 1) over `ranks` ranks: dimension 0 divided.
mlir::RankedTensorType zeroBlockType(mlir::RankedTensorType type, int64_t ranks);

}  // namespace tessel
