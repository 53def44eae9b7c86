// --tessel-tensor-parallel's errors point at the plan's tensor_parallel call (the `site`
// option, here plan.cpp:12:7), with a note at the model's op where one is to blame.
// RUN: not tessel-opt %s -split-input-file -tessel-tensor-parallel='site=plan.cpp:12:7' 2>&1 | FileCheck %s

// CHECK: plan.cpp:12:7: error: tensor_parallel("tp") splits attention heads over tp=2, but this attention has 3 heads (tp must divide the number of heads)
// CHECK: tessel-tensor-parallel-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: note: the attention
// CHECK: plan.cpp:12:7: error: tensor_parallel("tp"): the mesh has no axis 'tp'
// CHECK: plan.cpp:12:7: error: tensor_parallel("tp") found no pair of linear layers to split in @forward

// 3 heads cannot be split over tp = 2: the error is at the plan's call, with a note at the
// attention.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x6xf32> {tessel.input = "x"}) -> (tensor<2x4x6xf32> {tessel.output = "y"}) {
  %wq = tessel.param "qkv.w" {std = 0.02 : f64} : tensor<18x6xf32>
  %wp = tessel.param "proj.w" {std = 0.02 : f64} : tensor<6x6xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x6xf32>, tensor<18x6xf32>) -> tensor<2x4x18xf32>
  %a = tessel.causal_attention %q heads 3 : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %p = tessel.matmul %a, %wp transpose_rhs : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  return %p : tensor<2x4x6xf32>
}

// -----

// A mesh without the axis.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) {
  return %x : tensor<2x8xf32>
}

// -----

// Nothing to split: one linear layer alone.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x4xf32> {tessel.output = "y"}) {
  %w = tessel.param "w" {std = 0.02 : f64} : tensor<4x8xf32>
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
