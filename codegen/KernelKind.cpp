// The shared op -> KernelKind table of the C++ and CUDA emitters (KernelKind.h).
#include "codegen/KernelKind.h"

#include "compiler/TesselDialect.h"

#include "llvm/ADT/TypeSwitch.h"

namespace tessel {

std::optional<KernelKind> kernelKindOf(mlir::Operation* op) {
  using K = std::optional<KernelKind>;
  return llvm::TypeSwitch<mlir::Operation*, K>(op)
      .Case<AddOp, SubOp, MulOp>([](auto) { return KernelKind::Binary; })
      .Case<ScaleOp, GeluOp, ReluOp, GeluGradOp, ReluGradOp, CastOp>(
          [](auto) { return KernelKind::Unary; })
      .Case<SiluOp, SiluGradOp>([](auto) { return KernelKind::Unary; })
      .Case([](ConstantOp) { return KernelKind::Constant; })
      .Case([](LayerNormOp) { return KernelKind::LayerNorm; })
      .Case([](SoftmaxOp) { return KernelKind::Softmax; })
      .Case([](CrossEntropyOp) { return KernelKind::CrossEntropy; })
      .Case([](EmbeddingOp) { return KernelKind::Embedding; })
      .Case([](SoftmaxGradOp) { return KernelKind::SoftmaxGrad; })
      .Case([](LayerNormGradOp) { return KernelKind::LayerNormGrad; })
      .Case([](RmsNormOp) { return KernelKind::RmsNorm; })
      .Case([](RmsNormGradOp) { return KernelKind::RmsNormGrad; })
      .Case([](EmbeddingGradOp) { return KernelKind::EmbeddingGrad; })
      .Case([](CrossEntropyGradOp) { return KernelKind::CrossEntropyGrad; })
      .Case([](FusedClassifierOp) { return KernelKind::FusedClassifier; })
      .Case([](TransposeOp) { return KernelKind::Transpose; })
      .Case([](SplitOp) { return KernelKind::Split; })
      .Case([](DynamicSliceOp) { return KernelKind::DynamicSlice; })
      .Case([](ConcatOp) { return KernelKind::Concat; })
      .Case<ReduceSumOp, ReduceMeanOp>([](auto) { return KernelKind::Reduce; })
      .Case([](BroadcastOp) { return KernelKind::Broadcast; })
      .Case([](AdamWOp) { return KernelKind::AdamW; })
      .Case([](SGDOp) { return KernelKind::SGD; })
      .Case([](GlobalNormOp) { return KernelKind::GlobalNorm; })
      .Case([](ClipCoefficientOp) { return KernelKind::ClipCoefficient; })
      .Case([](EmbeddingShardOp) { return KernelKind::EmbeddingShard; })
      .Case([](EmbeddingShardGradOp) { return KernelKind::EmbeddingShardGrad; })
      .Case([](RowMaxOp) { return KernelKind::RowMax; })
      .Case([](SumExpOp) { return KernelKind::SumExp; })
      .Case([](SumExpGradOp) { return KernelKind::SumExpGrad; })
      .Case([](TargetLogitOp) { return KernelKind::TargetLogit; })
      .Case([](MaskVocabPaddingOp) { return KernelKind::MaskVocabPadding; })
      .Case([](TargetLogitGradOp) { return KernelKind::TargetLogitGrad; })
      .Case([](CrossEntropyFromStatsOp) { return KernelKind::CrossEntropyFromStats; })
      .Case([](CrossEntropyFromStatsGradOp) { return KernelKind::CrossEntropyFromStatsGrad; })
      .Case([](RopeOp) { return KernelKind::Rope; })
      .Case<CausalAttentionOp, GroupedAttentionOp>([](auto) { return KernelKind::Attention; })
      .Case<CausalAttentionGradOp, GroupedAttentionGradOp>(
          [](auto) { return KernelKind::AttentionGrad; })
      .Case([](FusedOp) { return KernelKind::Fused; })
      .Default([](mlir::Operation*) -> K { return std::nullopt; });
}

}  // namespace tessel
