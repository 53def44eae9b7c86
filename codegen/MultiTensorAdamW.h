// Multi-tensor AdamW: the clipped AdamW updates of a function's parameters, done in place by
// one kernel (one OpenMP region on the CPU, one launch on the GPU) instead of one kernel per
// parameter whose new values are then copied back.
//
// Promise: the per-element arithmetic is that of today's fused clip-and-update kernel
// (tessel.fused { mul(grad, coef); adamw }, FusedEmitter.cpp / CudaEmitterFused.cpp: the
// hyper-parameter terms in f32, torch's single-tensor operation order), so the results are
// bitwise those of the per-parameter kernels compiled with the same flags. An update is done
// in place only where that cannot change what any op reads (matchInPlaceAdamW).
#pragma once

#include "codegen/CudaEmitter.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

/// At most this many parameters per multi-tensor kernel: 4 pointer arguments each plus 7
/// scalars stay under CUDA's classic 4 KiB of kernel parameters (4 * 96 + 7 = 391 pointers,
/// 3128 bytes). A function with more parameters gets several kernels.
inline constexpr size_t kMultiTensorAdamWMax = 96;

/// One parameter's AdamW update that may run in place: a tessel.fused region whose body is
/// exactly `%c = tessel.mul %grad, %coef` (coef a scalar) and `tessel.adamw %param, %c, %m,
/// %v, ...`, all f32, whose three results are each used once, by a tessel.assign to the
/// tessel.param they update.
struct AdamWUpdate {
  mlir::Operation* op = nullptr;        // the tessel.fused op (for the kernels' comments; may be null)
  mlir::Value param, grad, expAvg, expAvgSq;  // operands of `op` (the first three: tessel.param results)
  mlir::Value coef;                     // the clipping coefficient, tensor<f32>
  std::array<mlir::Value, 6> hyper;     // lr, beta1, beta2, eps, weight_decay, step (tensor<f32>)
  bool decay = false;                   // the adamw op's decay flag
  std::array<mlir::Operation*, 3> assigns{};  // the tessel.assign of the new param, exp_avg, exp_avg_sq
  int64_t numel = 0;
  /// True if `other` shares every scalar operand (coef and hyper-parameters) with this one, so
  /// that both can go into one kernel.
  bool sameScalars(const AdamWUpdate& other) const { return coef == other.coef && hyper == other.hyper; }
};

/// The update `op` performs if it can run in place, else nullopt. In place is legal when, in
/// `op`'s block (ops numbered by `index`), no op after `op` reads the old value of the
/// parameter or of either moment (following tessel.reshape / tessel.replicate aliases), and
/// the new values are only assigned: then writing them over the old ones as the kernel goes
/// is what the assignments would do at the end. Not matched: an unfused adamw, a ZeRO-1/2
/// block update (its parameter is a slice, its new parameter an all-gather), bf16 anywhere.
std::optional<AdamWUpdate> matchInPlaceAdamW(mlir::Operation* op,
                                             const llvm::DenseMap<mlir::Operation*, size_t>& index);

/// The C++ kernel `symbol(void** args)` updating `updates` (1 to kMultiTensorAdamWMax of
/// them, same scalars; only numel, decay and op are read) in place. args: per update its param, exp_avg, exp_avg_sq (read and
/// written), then per update its gradient, then coef, lr, beta1, beta2, eps, weight_decay,
/// step. The elements of all updates, concatenated, are split into equal shares of whole
/// 64-byte lines, one per thread (the largest tensors do not leave threads idle).
std::string emitMultiTensorAdamWCpp(const std::vector<AdamWUpdate>& updates, const std::string& symbol);

/// Its CUDA twin, with the same arguments: one launch; block b updates elements
/// [b * CHUNK, (b + 1) * CHUNK) of one tensor, found in a table of first blocks baked into the
/// source (shapes are compile-time), one thread per element.
CudaKernel emitMultiTensorAdamWCuda(const std::vector<AdamWUpdate>& updates, const std::string& symbol);

}  // namespace tessel
