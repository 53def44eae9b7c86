// Matmuls are library GEMM steps (OpenBLAS on the CPU, cuBLASLt on the GPU), not generated
// kernels, in both targets: a Linear layer's shared weight [out, in] folds the batch into
// the rows (one call, m = B x T), a batched matmul keeps its batch and strides, and the
// transpose flags pass through.
// RUN: tessel-translate --tessel-to-cpp %s | FileCheck %s
// RUN: tessel-translate --tessel-to-cuda %s | FileCheck %s

// CHECK-LABEL: // func @linear: 2 steps
// CHECK-NEXT: //   gemm %[[Y:[0-9]+]] = linear.arg0 x linear.arg1^T (batch 1, m 128, n 192, k 64)
// CHECK-NEXT: //   gemm %{{[0-9]+}} = linear.arg2^T x linear.arg3^T (batch 2, m 5, n 33, k 7)
// CHECK-NOT: //   kernel
// CHECK-NOT: tessel.matmul at
func.func @linear(%x: tensor<4x32x64xf32>, %w: tensor<192x64xf32>, %a: tensor<2x7x5xf32>, %b: tensor<2x33x7xf32>) -> (tensor<4x32x192xf32>, tensor<2x5x33xf32>) {
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
  %z = tessel.matmul %a, %b transpose_lhs transpose_rhs : (tensor<2x7x5xf32>, tensor<2x33x7xf32>) -> tensor<2x5x33xf32>
  return %y, %z : tensor<4x32x192xf32>, tensor<2x5x33xf32>
}
