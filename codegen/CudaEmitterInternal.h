// Internal to the CUDA kernel emitter (CudaEmitter*.cpp): the kernel writer, the launch
// rules and the generators several ops share. Not part of the public API; include
// CudaEmitter.h instead. Shape and text helpers (shapeOf, numel, floatLit, the dimension
// letters) are the C++ emitter's (CppEmitterInternal.h), so both emitters describe tensors
// the same way.
//
// A kernel is written like a C++ one: parameters (outputs first, then inputs, each with a
// shape comment), compile-time constants, and body templates in which `$KEY` placeholders
// are replaced. Inside every body:
//   idx_t      the index type: int when every tensor has under 2^30 elements, else int64_t;
//   THREADS    the block size (threads per block), a compile-time constant;
//   lane, warp the thread's lane and warp in its block (declared when useBlockReductions()).
#pragma once

#include "codegen/CppEmitterInternal.h"
#include "codegen/CudaEmitter.h"

#include <string>
#include <vector>

namespace tessel::cudagen {

using cppgen::floatLit;
using cppgen::genericLetters;
using kernelcommon::indent;
using kernelcommon::shapeComment;
using kernelcommon::sizeOf;
using cppgen::Letters;
using cppgen::numel;
using cppgen::product;
using cppgen::rowLetters;
using cppgen::shapeOf;
using cppgen::Subst;
using cppgen::suffixLetters;

/// Resident threads of the default target (sm_90, H100 SXM: 132 SMs x 2048 threads). Grid-
/// stride kernels launch at most this many threads: more would only queue.
constexpr int64_t kResidentThreads = 132 * 2048;

/// Threads per block of a grid-stride kernel over `work` items: 256, or fewer (a multiple
/// of 32, at least 32) when there is less work.
unsigned flatThreads(int64_t work);
/// Blocks of `threads` for `work` items: enough for one item per thread, at most
/// kResidentThreads / threads, at least 1.
unsigned flatBlocks(int64_t work, unsigned threads);
/// Threads per block of a one-block-per-row kernel over rows of `len` elements: about four
/// elements per thread, a multiple of 32 in [64, 512] (two warps at least, so the block
/// reductions really are block-wide).
unsigned rowThreads(int64_t len);

/// The vector type that moves 4 elements of a tensor at once: "float4" or "int4" (16 bytes),
/// "uint2" for bf16 (8 bytes). Only layout kernels copy through it; arithmetic on bf16
/// takes the scalar paths.
std::string vectorType(mlir::Value v);

/// The text of a block-wide reduction of the float `var` (every thread of the block ends
/// with the result): warp shuffles, one partial per warp in shared memory, then the
/// partials. `op` is "sum" or "max"; "dsum" reduces a double. Needs useBlockReductions().
std::string blockReduce(const std::string& var, const std::string& op);

/// Code that splits `index` (an idx_t expression) over the sizes of `groups` (row-major,
/// last fastest) and declares `inOffset` (and `outOffset` unless empty) as the sums of each
/// coordinate times the group's inStride (outStride).
std::string indexCode(const std::string& index, const std::vector<cppgen::Group>& groups,
                      const std::string& inOffset, const std::string& outOffset);

/// Builds one kernel's source and launch.
class CudaWriter {
 public:
  CudaWriter(mlir::Operation* op, std::string symbol);

  /// One line under the location comment saying what the kernel computes.
  void describe(std::string_view formula);
  /// Declares the next parameter as a pointer `name` to `value`'s elements.
  void output(std::string_view name, mlir::Value value, const Letters& letters);
  void input(std::string_view name, mlir::Value value, const Letters& letters);
  /// `constexpr idx_t name = value;` (or float), with an optional comment.
  void constant(std::string_view name, int64_t value, std::string_view comment = "");
  void constantF(std::string_view name, double value, std::string_view comment = "");
  /// Declares the last parameter, `unsigned char* scratch`: a counter of finished blocks
  /// (`done`, 4 bytes, 0 at launch) and from kScratchHeaderBytes on `count` chunk sums of
  /// `type` ("float" or "double"), which the body reaches as `chunkSums`. Once per kernel.
  void scratch(const std::string& type, int64_t count);
  /// Declares the lane/warp indices and the shared memory of blockReduce: float partials
  /// (`red`) and/or double partials (`redd`).
  void useBlockReductions(bool floats, bool doubles = false);
  /// Appends a body template with every `$KEY` replaced from `subst`.
  void code(std::string_view text, const Subst& subst = {});
  /// The launch configuration, with a comment saying why.
  void launch(unsigned gridX, unsigned threads, std::string_view why, unsigned gridY = 1,
              unsigned gridZ = 1, unsigned blockY = 1);
  void kind(CudaKernelKind k) { kind_ = k; }

  /// The finished kernel; throws std::logic_error if the parameters are not exactly the op's
  /// results and operands, or no launch was set.
  CudaKernel finish() const;

  mlir::Operation* op() const { return op_; }
  const std::string& symbol() const { return symbol_; }

 private:
  void declare(std::string_view name, mlir::Value value, const Letters& letters, bool isOutput);

  mlir::Operation* op_;
  std::string symbol_, description_, params_, constants_, body_, launchComment_;
  std::string scratchParam_, scratchDecls_;  // set by scratch()
  int64_t scratchBytes_ = 0;
  std::vector<std::string> paramLines_, paramComments_;
  CudaLaunch launch_{{0, 0, 0}, {0, 0, 0}, 0};
  CudaKernelKind kind_ = CudaKernelKind::Elementwise;
  bool wideIndex_ = false, reductions_ = false, floatReductions_ = false, doubleReductions_ = false;
  unsigned next_ = 0;
};

/// The second level of a deterministic sum across blocks. Each block has written its
/// partial sums (of chunks fixed by the shapes, not by the grid) into `chunkSums`, `count`
/// values of `type` in the kernel's scratch parameter, which this declares (w.scratch). The
/// returned code, which every thread of every block must reach at the end of the kernel,
/// counts the finished blocks in the scratch's counter; the last one runs `combine` (which
/// reads the chunk sums through `partial`, a volatile pointer: other blocks wrote them) and
/// resets the counter to 0, so the scratch is ready for another launch.
std::string lastBlockCombine(CudaWriter& w, const std::string& type, int64_t count,
                             const std::string& combine);

/// One operand of an elementwise loop: pointer `ptr`, read into the float `var`, at element
/// i (Full), at i % period (Suffix: a tensor repeated over the leading dimensions).
struct EwInput {
  std::string ptr, var;
  int64_t period = 0;  // 0: Full
};
/// One result of an elementwise loop: the float `var` the body assigns, stored to `ptr`.
struct EwOutput {
  std::string ptr, var;
};

/// A grid-stride loop over N elements (N declared by the caller): reads every input into its
/// var, runs `body` (statements computing the outputs' vars, which it declares), and stores
/// the outputs. With `vectorize` (N and every period divisible by 4), a float4 path runs when
/// all pointers are 16-byte aligned, the scalar loop otherwise. Sets the launch.
void emitElementwiseLoop(CudaWriter& w, int64_t n, const std::vector<EwInput>& inputs,
                         const std::vector<EwOutput>& outputs, const std::string& body,
                         bool vectorize);

/// The launch of a one-block-per-row kernel over `rows` rows of `len` elements (at most the
/// resident threads in all, grid-stride over rows); sets the Row kind and the float block
/// reductions.
void rowLaunch(CudaWriter& w, int64_t rows, int64_t len);

/// The launch of a kernel that sums across rows in two levels (layer_norm_grad's dgamma/dbeta,
/// rms_norm_grad's dweight): chunks of 32 rows, one block per chunk (grid-stride over chunks,
/// at most the resident threads), 64..256 threads by C. Declares CHUNK and CHUNKS ("the
/// `sums` sums" in CHUNK's comment), sets the Row kind without block reductions, and returns
/// the number of chunks.
int64_t chunkedRowLaunch(CudaWriter& w, int64_t rows, int64_t c, const std::string& sums);

/// One grid-stride loop over `work` items, index j (`body` is its text); sets the launch.
void flatLoop(CudaWriter& w, int64_t work, const std::string& body, std::string_view why);

/// The deterministic scatter-add of rows of embedding_grad and embedding_shard_grad, as the C++
/// emitter's cppgen::scatterRows: dtable[v, :] = sum over n, in order, of dout[n, :] whose row
/// `index` (an expression in n) is v; rows outside [0, V) are skipped. Needs `dtable`, `dout`,
/// N, V (= v) and C (= c) declared; declares RANGES and sets the kind and the launch.
void scatterRows(CudaWriter& w, int64_t v, int64_t c, const std::string& index);

// The per-op emitters, by file. Each fills the writer for an op that hasCudaKernel accepts.
// CudaEmitterElementwise.cpp
void emitBinary(CudaWriter& w);
void emitUnary(CudaWriter& w);
void emitConstant(CudaWriter& w);
void emitAdamW(CudaWriter& w);
void emitSGD(CudaWriter& w);
void emitClipCoefficient(CudaWriter& w);
// CudaEmitterRows.cpp
void emitLayerNorm(CudaWriter& w);
void emitSoftmax(CudaWriter& w);
void emitSoftmaxGrad(CudaWriter& w);
void emitCrossEntropy(CudaWriter& w);
void emitCrossEntropyGrad(CudaWriter& w);
void emitFusedClassifier(CudaWriter& w);
void emitLayerNormGrad(CudaWriter& w);
// CudaEmitterNorm.cpp
void emitRmsNorm(CudaWriter& w);
void emitRmsNormGrad(CudaWriter& w);
// CudaEmitterLayout.cpp
void emitTranspose(CudaWriter& w);
void emitSplit(CudaWriter& w);
void emitConcat(CudaWriter& w);
void emitDynamicSlice(CudaWriter& w);
void emitBroadcast(CudaWriter& w);
void emitEmbedding(CudaWriter& w);
void emitEmbeddingGrad(CudaWriter& w);
void emitReduce(CudaWriter& w);
void emitGlobalNorm(CudaWriter& w);
// CudaEmitterVocab.cpp
void emitEmbeddingShard(CudaWriter& w);
void emitEmbeddingShardGrad(CudaWriter& w);
void emitRowMax(CudaWriter& w);
void emitSumExp(CudaWriter& w);
void emitSumExpGrad(CudaWriter& w);
void emitTargetLogit(CudaWriter& w);
void emitMaskVocabPadding(CudaWriter& w);
void emitTargetLogitGrad(CudaWriter& w);
void emitCrossEntropyFromStats(CudaWriter& w);
void emitCrossEntropyFromStatsGrad(CudaWriter& w);
// CudaEmitterAttention.cpp
void emitRope(CudaWriter& w);

// CudaEmitterAttentionFused.cpp
/// The most query rows (G * T: a kv head's query heads times the positions) one block of
/// the attention backward keeps statistics for in shared memory (2 floats each, 32 KiB).
constexpr int64_t kMaxAttentionBlockRows = 4096;
/// True if the fused attention backward kernel serves `op` (an attention gradient):
/// G * T <= kMaxAttentionBlockRows and D <= 256 (the per-thread accumulators).
bool attentionFitsCuda(mlir::Operation* op);
void emitAttention(CudaWriter& w);
void emitAttentionGrad(CudaWriter& w);
// CudaEmitterFused.cpp
void emitFused(CudaWriter& w);
bool fusedSupported(mlir::Operation* op);

}  // namespace tessel::cudagen
