// --tessel-shard-batch (passes/ShardBatch.cpp): the inputs' leading (batch) dimension is
// divided by `parts`, and so is every result with that leading dimension computed from a
// sharded value; weights, scalars and the loss keep their types; the function type follows.
// RUN: tessel-opt %s -split-input-file -tessel-shard-batch=parts=2 -verify-diagnostics | FileCheck %s

// A Linear layer on [B, T, C] = [8, 4, 16], a [T, C] position table added, and the mean
// cross-entropy; the logits output becomes local too. The weight's first dimension is 8 like
// B but it is not computed from a sharded value, so it stays.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x4x16xf32> {tessel.input = "x"}, %[[T:.*]]: tensor<4x4xi32> {tessel.input = "t"})
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<4x4x8xf32> {tessel.output = "logits"})
// CHECK-SAME: attributes {tessel.batch_shards = 2 : i64}
// CHECK-NEXT: %[[W:.*]] = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
// CHECK-NEXT: %[[P:.*]] = tessel.param "pos" {std = 2.000000e-02 : f64} : tensor<4x16xf32>
// CHECK-NEXT: %[[XP:.*]] = tessel.add %[[X]], %[[P]] : (tensor<4x4x16xf32>, tensor<4x16xf32>) -> tensor<4x4x16xf32>
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul %[[XP]], %[[W]] transpose_rhs : (tensor<4x4x16xf32>, tensor<8x16xf32>) -> tensor<4x4x8xf32>
// CHECK-NEXT: %[[L:.*]] = tessel.cross_entropy %[[Y]], %[[T]] : (tensor<4x4x8xf32>, tensor<4x4xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[L]], %[[Y]]
func.func @forward(%x: tensor<8x4x16xf32> {tessel.input = "x"}, %t: tensor<8x4xi32> {tessel.input = "t"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<8x4x8xf32> {tessel.output = "logits"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
  %p = tessel.param "pos" {std = 2.000000e-02 : f64} : tensor<4x16xf32>
  %xp = tessel.add %x, %p : (tensor<8x4x16xf32>, tensor<4x16xf32>) -> tensor<8x4x16xf32>
  %y = tessel.matmul %xp, %w transpose_rhs : (tensor<8x4x16xf32>, tensor<8x16xf32>) -> tensor<8x4x8xf32>
  %l = tessel.cross_entropy %y, %t : (tensor<8x4x8xf32>, tensor<8x4xi32>) -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<8x4x8xf32>
}

// -----

// Reshapes carry the batch through: [B, T, C] -> [B*T, C] is not sharded by this rule (its
// leading dimension is B*T), so the op fails to verify and the error names the local batch.
func.func @forward(%x: tensor<8x4x16xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  // expected-error @+2 {{'tessel.reshape' op}}
  // expected-error @+1 {{cannot run on a local batch of 4 rows (8 split over 2)}}
  %r = tessel.reshape %x : tensor<8x4x16xf32> -> tensor<32x16xf32>
  %l = tessel.reduce_mean %r [0, 1] : tensor<32x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A batch the degree does not divide: the error is at the input.
// expected-error @+1 {{the global batch 7 of input 'x' is not divisible by 2 (the data-parallel degree times the microsteps)}}
func.func @forward(%x: tensor<7x16xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %l = tessel.reduce_mean %x [0, 1] : tensor<7x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Inputs with different batches cannot be split consistently.
// expected-error @+1 {{input 'y' has 4 rows and the first input 8}}
func.func @forward(%x: tensor<8x16xf32> {tessel.input = "x"}, %y: tensor<4xf32> {tessel.input = "y"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %l = tessel.reduce_mean %x [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A summed loss would be wrong under averaging: it must be a batch mean.
func.func @forward(%x: tensor<8x16xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  // expected-error @+1 {{the loss must be a mean over the batch}}
  %l = tessel.reduce_sum %x [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Wrong stage: after autodiff. Sharding @forward alone would leave @train_step on the
// global batch.
// expected-error @+1 {{tessel-shard-batch: @train_step already exists (tessel-autodiff has run); it runs once (parts = data-parallel ranks x microsteps), before tessel-autodiff}}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 1.0 : f64} : tensor<8xf32>
  %y = tessel.mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = tessel.reduce_mean %y [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "w"}) {
  %w = tessel.param "w" {std = 1.0 : f64} : tensor<8xf32>
  %y = tessel.mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = tessel.reduce_mean %y [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 1.0 : tensor<8xf32>
  return %l, %g : tensor<f32>, tensor<8xf32>
}

// -----

// Wrong stage: run twice (the batch would be split again).
// expected-error @+1 {{tessel-shard-batch: @forward already runs on a local batch (tessel.batch_shards = 2); it runs once (parts = data-parallel ranks x microsteps), before tessel-autodiff}}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) attributes {tessel.batch_shards = 2 : i64} {
  %l = tessel.reduce_mean %x [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
