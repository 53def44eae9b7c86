// Internal to the C++ kernel emitter (CppEmitter*.cpp): the kernel writer and the shape
// helpers every op's emitter shares. Not part of the public API; include CppEmitter.h instead.
//
// A kernel is written in three parts: its arguments (outputs first, then inputs, each with a
// shape comment), its compile-time constants (`constexpr int64_t N = 128;`), and a body
// written as a raw C++ template in which `$KEY` placeholders are replaced (the body refers to
// the constants by name, so templates stay readable and need no brace escaping).
#pragma once

#include "codegen/KernelCommon.h"
#include "compiler/TesselDialect.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::cppgen {

/// Dimension letters of one tensor, e.g. {"B", "T", "C"}; {} for a scalar.
using Letters = std::vector<std::string>;
/// `$KEY` -> replacement text, for KernelWriter::code.
using Subst = std::map<std::string, std::string, std::less<>>;

std::vector<int64_t> shapeOf(mlir::Value v);
int64_t numel(const std::vector<int64_t>& shape);
/// Product of shape[begin, end).
int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end);

/// A C++ float literal that reads back as (float)v: "0.5f", "1.0f", "INFINITY", "NAN".
std::string floatLit(double v);
/// "float", "tessel_bf16" or "int32_t": the element type of a supported tensor.
std::string elementType(mlir::Value v);

/// Letters for the leading dimensions of a row-wise op: {}, {N}, {B, T}, else {d0, d1, ...}.
Letters leadingLetters(size_t count);
/// Letters for a tensor whose last dimension is a feature dimension `last`: leading letters
/// followed by `last`; rank 0 gives {}.
Letters rowLetters(size_t rank, const std::string& last = "C");
/// Letters of a tensor with no particular meaning per dimension: [C], [N, C], [B, T, C],
/// else d0, d1, ...
Letters genericLetters(size_t rank);
/// The trailing `count` letters of `letters`.
Letters suffixLetters(const Letters& letters, size_t count);

/// The pragma for a loop of `iterations` independent iterations doing `work` in all
/// (elements touched, weighted by cost): "#pragma omp parallel for[ simd] schedule(static)"
/// when the work pays for waking the thread pool (32 Ki elements, ~10 us on one core) and
/// there is more than one iteration; else "#pragma omp simd" if `simd`, else "".
std::string parallelFor(int64_t work, int64_t iterations, bool simd = false);

// The layout ops' index spaces (Group, stridesOf, simplify, sizeOf) and indent are shared
// with the CUDA emitter (KernelCommon.h).
using kernelcommon::Group;
using kernelcommon::indent;
using kernelcommon::shapeComment;
using kernelcommon::simplify;
using kernelcommon::sizeOf;
using kernelcommon::stridesOf;
using kernelcommon::withComment;

/// Code that splits the flat index `index` (an int64_t expression) over the sizes of
/// `groups` (row-major, last fastest) and adds each coordinate times the group's inStride to
/// `inOffset` and times its outStride to `outOffset` (either name may be empty to skip it).
/// Both offsets are declared by the returned code.
std::string decompose(std::string_view index, const std::vector<Group>& groups,
                      std::string_view inOffset, std::string_view outOffset);

/// Builds one kernel's source.
class KernelWriter {
 public:
  KernelWriter(mlir::Operation* op, std::string symbol);

  /// One line under the location comment saying what the kernel computes.
  void describe(std::string_view formula);
  /// Declares the next argument as a pointer `name` to `value`'s elements.
  void output(std::string_view name, mlir::Value value, const Letters& letters);
  void input(std::string_view name, mlir::Value value, const Letters& letters);
  /// Declares the next `values.size()` arguments as an array of pointers `name[i]`.
  void outputs(std::string_view name, mlir::ValueRange values,
               const std::vector<Letters>& letters);
  void inputs(std::string_view name, mlir::ValueRange values,
              const std::vector<Letters>& letters);
  /// `constexpr int64_t name = value;` with an optional trailing comment.
  void constant(std::string_view name, int64_t value, std::string_view comment = "");
  /// `constexpr float name = value;`.
  void constantF(std::string_view name, double value, std::string_view comment = "");
  /// Appends a body template, indented, with every `$KEY` replaced from `subst`. Throws
  /// std::logic_error on a placeholder missing from `subst` (an emitter bug).
  void code(std::string_view text, const Subst& subst = {});

  /// The finished `extern "C"` function; throws std::logic_error if the arguments declared
  /// are not exactly the op's results and operands.
  std::string finish() const;

  mlir::Operation* op() const { return op_; }

 private:
  void declare(std::string_view name, mlir::Value value, const Letters& letters, bool isOutput);
  std::string pointerDecl(mlir::Value value, bool isOutput) const;

  mlir::Operation* op_;
  std::string symbol_, description_, args_, constants_, body_;
  unsigned next_ = 0;
};

// The per-op emitters, by file. Each fills the writer for an op that hasCppKernel accepts.
// CppEmitterElementwise.cpp
void emitBinary(KernelWriter& w);
void emitUnary(KernelWriter& w);
void emitConstant(KernelWriter& w);
// CppEmitterRows.cpp
void emitLayerNorm(KernelWriter& w);
void emitSoftmax(KernelWriter& w);
void emitCrossEntropy(KernelWriter& w);
void emitEmbedding(KernelWriter& w);
// CppEmitterGrad.cpp
void emitSoftmaxGrad(KernelWriter& w);
void emitLayerNormGrad(KernelWriter& w);
void emitEmbeddingGrad(KernelWriter& w);
void emitCrossEntropyGrad(KernelWriter& w);
void emitFusedClassifier(KernelWriter& w);
/// The body of a deterministic scatter-add of rows (embedding_grad, embedding_shard_grad):
/// dtable[v, :] = sum of dout[n, :] over the n (in order) whose row `index` (an expression in
/// n) is v; rows outside [0, V) are skipped. Needs the arguments `dtable` and `dout` and the
/// constants N (indices), V (table rows) and C declared; `n`, `v`, `c` are their values.
void scatterRows(KernelWriter& w, int64_t n, int64_t v, int64_t c, std::string_view index);
// CppEmitterNorm.cpp
void emitRmsNorm(KernelWriter& w);
void emitRmsNormGrad(KernelWriter& w);
// CppEmitterVocab.cpp
void emitEmbeddingShard(KernelWriter& w);
void emitEmbeddingShardGrad(KernelWriter& w);
void emitRowMax(KernelWriter& w);
void emitSumExp(KernelWriter& w);
void emitSumExpGrad(KernelWriter& w);
void emitTargetLogit(KernelWriter& w);
void emitMaskVocabPadding(KernelWriter& w);
void emitTargetLogitGrad(KernelWriter& w);
void emitCrossEntropyFromStats(KernelWriter& w);
void emitCrossEntropyFromStatsGrad(KernelWriter& w);
// CppEmitterLayout.cpp
void emitDynamicSlice(KernelWriter& w);
void emitTranspose(KernelWriter& w);
void emitSplit(KernelWriter& w);
void emitConcat(KernelWriter& w);
void emitReduce(KernelWriter& w);
void emitBroadcast(KernelWriter& w);
// CppEmitterOptim.cpp
void emitAdamW(KernelWriter& w);
void emitSGD(KernelWriter& w);
void emitGlobalNorm(KernelWriter& w);
void emitClipCoefficient(KernelWriter& w);
// CppEmitterAttention.cpp
void emitRope(KernelWriter& w);

// CppEmitterAttentionFused.cpp
void emitAttention(KernelWriter& w);
void emitAttentionGrad(KernelWriter& w);

}  // namespace tessel::cppgen
