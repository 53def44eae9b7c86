// RUN: tessel-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tessel-fuse))' | FileCheck %s

// Rule: an elementwise chain of one shape becomes one fused kernel; only the value used
// outside is yielded.
// CHECK-LABEL: func.func @elementwise_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[F:.*]] = tessel.fused(%[[X]], %[[B]])
// CHECK-NEXT: ^bb0(%[[X0:.*]]: tensor<4x8xf32>, %[[B0:.*]]: tensor<8xf32>):
// CHECK-NEXT:   %[[A:.*]] = tessel.add %[[X0]], %[[B0]]
// CHECK-NEXT:   %[[G:.*]] = tessel.gelu %[[A]]
// CHECK-NEXT:   %[[M:.*]] = tessel.mul %[[G]], %[[X0]]
// CHECK-NEXT:   tessel.yield %[[M]] : tensor<4x8xf32>
// CHECK: return %[[F]]
func.func @elementwise_chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %a = tessel.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %g = tessel.gelu %a : tensor<4x8xf32>
  %m = tessel.mul %g, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}

// -----

// Rule: a row reduction takes its elementwise producers; a producer used outside (the
// residual stream) is yielded too.
// CHECK-LABEL: func.func @residual_layer_norm
// CHECK: %[[F:.*]]:2 = tessel.fused
// CHECK:   tessel.add
// CHECK-NEXT:   tessel.layer_norm
// CHECK-NEXT:   tessel.yield
// CHECK: tessel.matmul %[[F]]#1
// CHECK: return %[[F]]#0
func.func @residual_layer_norm(%x: tensor<2x4x8xf32>, %y: tensor<2x4x8xf32>, %g: tensor<8xf32>,
                               %b: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<2x4x8xf32> {
  %s = tessel.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = tessel.layer_norm %s, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h = tessel.matmul %n, %w transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %s : tensor<2x4x8xf32>
}

// -----

// Rule: attention's scale joins the causal softmax; GEMMs stay outside as library calls.
// CHECK-LABEL: func.func @scaled_softmax
// CHECK: tessel.matmul
// CHECK: tessel.fused
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   tessel.scale
// CHECK-NEXT:   tessel.softmax %{{.*}} causal
// CHECK: tessel.matmul
func.func @scaled_softmax(%q: tensor<2x4x4xf32>, %k: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %s = tessel.matmul %q, %k transpose_rhs : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %t = tessel.scale %s, 5.000000e-01 : tensor<2x4x4xf32>
  %p = tessel.softmax %t causal : tensor<2x4x4xf32>
  %y = tessel.matmul %p, %k : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

// Rule: a row reduction takes its elementwise consumers (the backward of scaled softmax).
// CHECK-LABEL: func.func @softmax_grad_then_scale
// CHECK: tessel.fused
// CHECK:   tessel.softmax_grad
// CHECK-NEXT:   tessel.scale
// CHECK-NEXT:   tessel.yield
func.func @softmax_grad_then_scale(%p: tensor<4x4xf32>, %dp: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %ds = tessel.softmax_grad %p, %dp : tensor<4x4xf32>
  %dt = tessel.scale %ds, 5.000000e-01 : tensor<4x4xf32>
  return %dt : tensor<4x4xf32>
}

// -----

// Rule: shapes must agree; an add on [8] does not join a chain on [4, 8].
// CHECK-LABEL: func.func @different_shapes
// CHECK-NOT: tessel.fused
func.func @different_shapes(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %c = tessel.add %b, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %a = tessel.add %x, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %a, %c : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Rule: no cycles. %b uses %r, which needs %a through a non-fusable reduction, so %a and %b
// cannot share a kernel placed before %r.
// CHECK-LABEL: func.func @no_cycle
// CHECK-NOT: tessel.fused
func.func @no_cycle(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = tessel.gelu %x : tensor<4x8xf32>
  %r = tessel.reduce_sum %a [0] : tensor<4x8xf32> -> tensor<8xf32>
  %b = tessel.add %a, %r : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// Rule: the optimizer update takes the gradient clipping multiply; scalars are inputs.
// CHECK-LABEL: func.func @clip_adamw
// CHECK: %[[F:.*]]:3 = tessel.fused
// CHECK:   tessel.mul
// CHECK-NEXT:   tessel.adamw
// CHECK-NEXT:   tessel.yield
func.func @clip_adamw(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>,
                      %c: tensor<f32>, %lr: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %gc = tessel.mul %g, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %p1, %m1, %v1 = tessel.adamw %p, %gc, %m, %v, %lr, %lr, %lr, %lr, %lr, %lr decay : tensor<4x8xf32>
  return %p1, %m1, %v1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Wrong stage: the function is already fused.
// expected-error @+1 {{tessel-fuse: @twice is already fused (tessel.fused present); it runs once, last}}
func.func @twice(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = tessel.fused(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %b0: tensor<8xf32>):
    %1 = tessel.add %x0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = tessel.gelu %1 : tensor<4x8xf32>
    tessel.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}
