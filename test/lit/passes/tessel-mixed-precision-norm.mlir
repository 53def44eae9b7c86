// --tessel-mixed-precision (passes/MixedPrecision.cpp) on the Llama block's ops: rms_norm is
// treated as layer_norm (its f32 weight read through a cast, the normalised activation bf16;
// the kernels keep the statistics in f32), silu as gelu (bf16 in, bf16 out); and their
// gradients: silu_grad and rms_norm_grad run in bf16, the norm weight's gradient returns to
// f32 through the cast's VJP.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-mixed-precision | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-mixed-precision -tessel-autodiff | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[T:.*]]: tensor<4xi32>)
// CHECK-NEXT: %[[X16:.*]] = tessel.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[N:.*]] = tessel.param "norm.weight"
// CHECK-NEXT: %[[N16:.*]] = tessel.cast %[[N]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK: %[[H:.*]] = tessel.rms_norm %[[X16]], %[[N16]] : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[G:.*]] = tessel.matmul %[[H]], %{{.*}} transpose_rhs : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[U:.*]] = tessel.matmul %[[H]], %{{.*}} transpose_rhs : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[S:.*]] = tessel.silu %[[G]] : tensor<4x16xbf16>
// CHECK-NEXT: %[[P:.*]] = tessel.mul %[[S]], %[[U]] : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: tessel.cross_entropy %[[P]], %[[T]] : (tensor<4x16xbf16>, tensor<4xi32>) -> tensor<f32>

// GRAD-LABEL: func.func @train_step
// GRAD-SAME: tensor<8xf32> {tessel.grad = "norm.weight"}
// GRAD: tessel.silu_grad {{.*}} : tensor<4x16xbf16>
// GRAD: tessel.rms_norm_grad {{.*}} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>)
// GRAD: tessel.cast {{.*}} : tensor<8xbf16> -> tensor<8xf32>
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi32>) -> (tensor<f32> {tessel.output = "loss"}) {
  %n = tessel.param "norm.weight" init ones : tensor<8xf32>
  %w1 = tessel.param "w1.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %w3 = tessel.param "w3.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %h = tessel.rms_norm %x, %n : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %g = tessel.matmul %h, %w1 transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %u = tessel.matmul %h, %w3 transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s = tessel.silu %g : tensor<4x16xf32>
  %p = tessel.mul %s, %u : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = tessel.cross_entropy %p, %t : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
