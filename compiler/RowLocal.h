// Row-local ops: the ops the fusion pass groups and the fused-kernel emitter streams row by
// row. Shared by passes/Fuse.cpp and codegen, so both agree on what can be fused.
#pragma once

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace tessel {

/// If `op` is row-local, the common shape [rows..., C] of its results; otherwise nullopt.
/// Row-local: one of add, sub, mul, scale, gelu, relu, silu, gelu_grad, relu_grad, silu_grad,
/// cast, softmax, softmax_grad, layer_norm, rms_norm, adamw, sgd, with float (f32 or bf16)
/// results of one shape S (rank >= 1) and every float operand either of shape S, a proper
/// suffix of S with rank >= 1, or a scalar.
std::optional<llvm::SmallVector<int64_t>> rowLocalShape(mlir::Operation* op);

}  // namespace tessel
