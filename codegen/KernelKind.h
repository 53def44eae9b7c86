// The kernel kinds both emitters (CppEmitter, CudaEmitter) dispatch on: one entry per
// per-op emitter, shared so the two dispatch tables cannot drift apart. Each emitter
// `switch`es over KernelKind without a default, so -Wswitch flags a kind one forgets.
// Internal to codegen/; include CppEmitter.h or CudaEmitter.h instead.
#pragma once

#include "mlir/IR/Operation.h"

#include <optional>

namespace tessel {

/// Which per-op emitter writes an op's kernel.
enum class KernelKind {
  Binary,            // add, sub, mul
  Unary,             // scale, gelu, relu, silu, gelu_grad, relu_grad, silu_grad, cast
  Constant,
  LayerNorm,
  Softmax,
  CrossEntropy,
  Embedding,
  SoftmaxGrad,
  LayerNormGrad,
  RmsNorm,
  RmsNormGrad,
  EmbeddingGrad,
  CrossEntropyGrad,
  FusedClassifier,   // cross_entropy + cross_entropy_grad in one pass
  Transpose,
  Split,
  Concat,
  DynamicSlice,      // dynamic_slice: a block of rows at a runtime offset
  Reduce,            // reduce_sum, reduce_mean
  Broadcast,
  AdamW,
  SGD,
  GlobalNorm,
  ClipCoefficient,
  // The vocab-parallel ops (TesselVocabParallelOps.td).
  EmbeddingShard,
  EmbeddingShardGrad,
  RowMax,
  SumExp,
  SumExpGrad,
  TargetLogit,
  TargetLogitGrad,
  MaskVocabPadding,
  CrossEntropyFromStats,
  CrossEntropyFromStatsGrad,
  Rope,              // rope: rotary position embedding (its own kernel)
  Attention,         // causal_attention, grouped_attention: fused per (batch, head)
  AttentionGrad,     // causal_attention_grad, grouped_attention_grad
  Fused,             // tessel.fused (CUDA emitter only)
};

/// The kind of `op`, or nullopt for an op neither emitter has a kernel for. Says nothing
/// about types: hasCppKernel and hasCudaKernel check those.
std::optional<KernelKind> kernelKindOf(mlir::Operation* op);

}  // namespace tessel
