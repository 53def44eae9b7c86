// RUN: tessel-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tessel-fuse-classifier))' | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tessel-fuse-classifier))' -mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// Rule: autodiff's pair (the loss, later its grad seeded with the constant 1.0) becomes one
// fused op where the loss was; the seed moves before it; both results are replaced.
// CHECK-LABEL: func.func @autodiff_pair
// CHECK-SAME: (%[[L:.*]]: tensor<4x8x16xf32>, %[[T:.*]]: tensor<4x8xi32>)
// CHECK-NEXT: %[[ONE:.*]] = tessel.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[LOSS:[^,]*]], %[[DL:[^ ]*]] = tessel.fused_classifier %[[L]], %[[T]], %[[ONE]] : (tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x8x16xf32>)
// CHECK-NEXT: %[[S:.*]] = tessel.scale %[[DL]]
// CHECK-NOT: tessel.cross_entropy
// CHECK: return %[[LOSS]], %[[S]]
// The fused op keeps the loss's location (the user's line).
// LOC-LABEL: func.func @autodiff_pair
// LOC: tessel.fused_classifier {{.*}} loc([[FLOC:#loc[0-9]*]])
// LOC: [[FLOC]] = loc("model.h":3:7)
func.func @autodiff_pair(%logits: tensor<4x8x16xf32>, %targets: tensor<4x8xi32>) -> (tensor<f32>, tensor<4x8x16xf32>) {
  %loss = tessel.cross_entropy %logits, %targets : (tensor<4x8x16xf32>, tensor<4x8xi32>) -> tensor<f32> loc("model.h":3:7)
  %one = tessel.constant 1.000000e+00 : tensor<f32>
  %d = tessel.cross_entropy_grad %logits, %targets, %one : (tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<f32>) -> tensor<4x8x16xf32>
  %s = tessel.scale %d, 2.000000e+00 : tensor<4x8x16xf32>
  return %loss, %s : tensor<f32>, tensor<4x8x16xf32>
}

// -----

// Rule: a dloss computed from other values (a scale of the seed, as loss scaling makes)
// moves before the loss with everything it needs, in order; users of the loss between
// the two ops see the fused op's loss. bf16 logits keep an f32 loss and a bf16 gradient.
// CHECK-LABEL: func.func @scaled_seed_bf16
// CHECK-NEXT: %[[ONE:.*]] = tessel.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[K:.*]] = tessel.scale %[[ONE]], 2.500000e-01 : tensor<f32>
// CHECK-NEXT: %[[LOSS:[^,]*]], %[[DL:[^ ]*]] = tessel.fused_classifier %{{.*}}, %{{.*}}, %[[K]] : (tensor<8x32xbf16>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x32xbf16>)
// CHECK-NEXT: %[[M:.*]] = tessel.mul %[[LOSS]], %[[LOSS]]
// CHECK-NEXT: return %[[M]], %[[DL]]
func.func @scaled_seed_bf16(%logits: tensor<8x32xbf16>, %targets: tensor<8xi32>) -> (tensor<f32>, tensor<8x32xbf16>) {
  %loss = tessel.cross_entropy %logits, %targets : (tensor<8x32xbf16>, tensor<8xi32>) -> tensor<f32>
  %sq = tessel.mul %loss, %loss : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %one = tessel.constant 1.000000e+00 : tensor<f32>
  %k = tessel.scale %one, 2.500000e-01 : tensor<f32>
  %d = tessel.cross_entropy_grad %logits, %targets, %k : (tensor<8x32xbf16>, tensor<8xi32>, tensor<f32>) -> tensor<8x32xbf16>
  return %sq, %d : tensor<f32>, tensor<8x32xbf16>
}

// -----

// Rule: a dloss that depends on the loss (here d(loss^2) = 2 loss) cannot be an operand of
// the op computing the loss: the pair stays.
// CHECK-LABEL: func.func @dloss_from_loss
// CHECK-NOT: tessel.fused_classifier
// CHECK: tessel.cross_entropy %
// CHECK: tessel.cross_entropy_grad
func.func @dloss_from_loss(%logits: tensor<8x32xf32>, %targets: tensor<8xi32>) -> (tensor<f32>, tensor<8x32xf32>) {
  %loss = tessel.cross_entropy %logits, %targets : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  %two = tessel.scale %loss, 2.000000e+00 : tensor<f32>
  %d = tessel.cross_entropy_grad %logits, %targets, %two : (tensor<8x32xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x32xf32>
  return %loss, %d : tensor<f32>, tensor<8x32xf32>
}

// -----

// Rule: only a grad on the same targets pairs with the loss; a lone loss (the forward
// function) stays as it is.
// CHECK-LABEL: func.func @other_targets
// CHECK-NOT: tessel.fused_classifier
// CHECK: tessel.cross_entropy %
// CHECK: tessel.cross_entropy_grad
// CHECK-LABEL: func.func @forward_only
// CHECK-NOT: tessel.fused_classifier
// CHECK: tessel.cross_entropy %
func.func @other_targets(%logits: tensor<8x32xf32>, %t0: tensor<8xi32>, %t1: tensor<8xi32>) -> (tensor<f32>, tensor<8x32xf32>) {
  %loss = tessel.cross_entropy %logits, %t0 : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  %one = tessel.constant 1.000000e+00 : tensor<f32>
  %d = tessel.cross_entropy_grad %logits, %t1, %one : (tensor<8x32xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x32xf32>
  return %loss, %d : tensor<f32>, tensor<8x32xf32>
}
func.func @forward_only(%logits: tensor<8x32xf32>, %t: tensor<8xi32>) -> tensor<f32> {
  %loss = tessel.cross_entropy %logits, %t : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Rule: two grads of the same loss (not what autodiff makes: it sums the seeds first) are
// ambiguous: nothing is fused.
// CHECK-LABEL: func.func @two_grads
// CHECK-NOT: tessel.fused_classifier
// CHECK-COUNT-2: tessel.cross_entropy_grad
func.func @two_grads(%logits: tensor<8x32xf32>, %t: tensor<8xi32>, %a: tensor<f32>, %b: tensor<f32>) -> (tensor<f32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %loss = tessel.cross_entropy %logits, %t : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  %d0 = tessel.cross_entropy_grad %logits, %t, %a : (tensor<8x32xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x32xf32>
  %d1 = tessel.cross_entropy_grad %logits, %t, %b : (tensor<8x32xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x32xf32>
  return %loss, %d0, %d1 : tensor<f32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Rule: a grad placed before its loss (dloss an argument) fuses at the grad's position, so
// the gradient's users still follow their producer.
// CHECK-LABEL: func.func @grad_first
// CHECK-NEXT: %[[LOSS:[^,]*]], %[[DL:[^ ]*]] = tessel.fused_classifier
// CHECK-NEXT: tessel.scale %[[DL]]
// CHECK-NEXT: return %[[LOSS]]
func.func @grad_first(%logits: tensor<8x32xf32>, %t: tensor<8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x32xf32>) {
  %d = tessel.cross_entropy_grad %logits, %t, %dl : (tensor<8x32xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x32xf32>
  %s = tessel.scale %d, 2.000000e+00 : tensor<8x32xf32>
  %loss = tessel.cross_entropy %logits, %t : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss, %s : tensor<f32>, tensor<8x32xf32>
}

// -----

// Wrong stage: the function is already fused.
// expected-error @+1 {{tessel-fuse-classifier: @after_fuse is already fused (tessel.fused present); it runs after tessel-autodiff and before tessel-fuse}}
func.func @after_fuse(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = tessel.fused(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %b0: tensor<8xf32>):
    %1 = tessel.add %x0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = tessel.gelu %1 : tensor<4x8xf32>
    tessel.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}
