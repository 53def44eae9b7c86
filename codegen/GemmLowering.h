// Lowering of tessel.matmul and tessel.matmul_epilogue to one rt::GemmStep each (the GEMM
// part of codegen/Lowering.cpp, step 3).
#pragma once

#include "runtime/exec/Program.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"

namespace tessel {

/// The GEMM step of `op`, a tessel.matmul or tessel.matmul_epilogue, whose operands live in
/// buffers `operands` (op order: lhs, rhs, then the epilogue's bias and residual when
/// present) and results in `results` (op order: the product, then the pre-activation and the
/// bias gradient when present). Batch and strides come from the shapes; a rank-2 rhs is
/// shared by every batch, and then the batches of lhs and the result are folded into the
/// rows (one library call). The epilogue's fields name those buffers (Program.h
/// GemmEpilogue). `location` is left empty.
rt::GemmStep lowerGemm(mlir::Operation* op, llvm::ArrayRef<int> operands, llvm::ArrayRef<int> results);

}  // namespace tessel
