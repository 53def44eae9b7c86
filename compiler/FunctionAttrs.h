// Typed access to the tessel.* attributes of functions. Their names and types are declared
// once, in TesselDialect.td (the dialect's discardableAttrs, each with who sets and who reads
// it); this header is how passes, codegen and the DSL read and write them, so that no other
// file spells an attribute name (test/unit/IrVocabularyTest.cpp checks the sources).
#pragma once

#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace tessel {

/// Attribute names (tessel.input, ...), for diagnostics that name them.
inline constexpr llvm::StringLiteral kInputAttr = TesselDialect::InputAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kOutputAttr = TesselDialect::OutputAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kGradAttr = TesselDialect::GradAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kBatchShardsAttr =
    TesselDialect::BatchShardsAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kMixedPrecisionAttr =
    TesselDialect::MixedPrecisionAttrHelper::getNameStr();
/// The FSDP unit of a stored parameter shard and of its all-gathers (compiler/FsdpUnits.h).
inline constexpr llvm::StringLiteral kFsdpUnitAttr = TesselDialect::FsdpUnitAttrHelper::getNameStr();

/// The model input that argument `i` of `f` is (`tessel.input`), or null.
mlir::StringAttr inputName(mlir::func::FuncOp f, unsigned i);
/// What result `i` of `f` is (`tessel.output`: "loss", "grad_norm" or a model output), or null.
mlir::StringAttr outputName(mlir::func::FuncOp f, unsigned i);
/// The parameter whose gradient result `i` of `f` is (`tessel.grad`), or null.
mlir::StringAttr gradName(mlir::func::FuncOp f, unsigned i);
/// The index of the result of `f` tagged `tessel.output = <name>`, or nullopt.
std::optional<unsigned> findOutput(mlir::func::FuncOp f, llvm::StringRef name);
/// The ops of `f`'s (single-block) body that result `i` depends on: for the loss, the
/// forward pass of a function that also holds its backward pass.
llvm::DenseSet<mlir::Operation*> opsResultDependsOn(mlir::func::FuncOp f, unsigned i);

/// Tags argument `i` of `f` as the model input `name`.
void setInputName(mlir::func::FuncOp f, unsigned i, llvm::StringRef name);
/// Tags result `i` of `f` as the output `name`.
void setOutputName(mlir::func::FuncOp f, unsigned i, llvm::StringRef name);

/// The attribute dictionary of an argument that is the model input `name` (for
/// FuncOp::insertArgument).
mlir::DictionaryAttr inputAttrs(mlir::MLIRContext* context, llvm::StringRef name);
/// The attribute dictionary of a result that is the output `name` (for setAllResultAttrs).
mlir::DictionaryAttr outputAttrs(mlir::MLIRContext* context, llvm::StringRef name);
/// The attribute dictionary of a result that is the gradient of parameter `name`.
mlir::DictionaryAttr gradAttrs(mlir::MLIRContext* context, llvm::StringRef name);

/// N when `f` runs on the local batch of one of N batch shards (`tessel.batch_shards`,
/// set by tessel-shard-batch), 0 when its batch was never split.
int64_t batchShards(mlir::func::FuncOp f);
/// Records that `f` runs on one of `shards` (>= 1) batch shards.
void setBatchShards(mlir::func::FuncOp f, int64_t shards);

/// True when tessel-mixed-precision rewrote `f` (`tessel.mixed_precision`).
bool isMixedPrecision(mlir::func::FuncOp f);
/// Records that `f` computes in bf16 with f32 master weights.
void setMixedPrecision(mlir::func::FuncOp f);

/// True when tessel-partition gave `f` per-rank local shapes (`tessel.partitioned`).
bool isPartitioned(mlir::func::FuncOp f);
/// Marks `f` as partitioned.
void setPartitioned(mlir::func::FuncOp f);

}  // namespace tessel
