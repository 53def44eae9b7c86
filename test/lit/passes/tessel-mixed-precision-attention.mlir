// --tessel-mixed-precision treats tessel.rope like an elementwise op: reading a bf16 input it
// computes in bf16, and its VJP (rope inverse) then runs in bf16 too.
// RUN: tessel-opt %s -verify-diagnostics -tessel-mixed-precision | FileCheck %s
// RUN: tessel-opt %s -verify-diagnostics -tessel-mixed-precision -tessel-autodiff | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[R:.*]] = tessel.rope %[[Q]] heads 2 theta 1.000000e+04 : tensor<2x4x8xbf16>
// CHECK-NEXT: tessel.reduce_mean %[[R]] [0, 1, 2] : tensor<2x4x8xbf16> -> tensor<bf16>
// GRAD-LABEL: func.func @train_step
// GRAD: tessel.rope %{{.*}} heads 2 theta 1.000000e+04 inverse : tensor<2x4x8xbf16>
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "wq" {std = 0.02 : f64} : tensor<8x8xf32>
  %q = tessel.matmul %x, %w transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = tessel.rope %q heads 2 theta 1.0e4 : tensor<2x4x8xf32>
  %l = tessel.reduce_mean %r [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
