// --tessel-tensor-parallel (passes/TensorParallel.cpp): the Megatron-LM layout as weight
// shardings on the plan's mesh. The projection into attention is split on its outputs by
// heads (3 blocks: q, k, v), the one after it on its inputs; linear -> gelu -> linear is split
// column then row. Biases are left to tessel-propagate-sharding; a weight the plan already
// shards keeps the plan's sharding; the embedding table is split on its rows (vocab-parallel),
// and the tied LM head (the same weight) is not split again as a linear layer.
// RUN: tessel-opt %s -split-input-file -tessel-tensor-parallel='site=plan.cpp:12:7' -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "wte" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1], []]>]} : tensor<32x8xf32>
// CHECK: tessel.param "qkv.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1], []], blocks = [3, 1]>]} : tensor<24x8xf32>
// CHECK: tessel.param "qkv.b" {std = 2.000000e-02 : f64} : tensor<24xf32>
// CHECK: tessel.param "proj.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [1]]>]} : tensor<8x8xf32>
// The plan's own entry for fc2.w (split over dp instead) is kept, and its pair is left to the
// plan: fc.w is not split either.
// CHECK: tessel.param "fc.w" {std = 2.000000e-02 : f64} : tensor<32x8xf32>
// CHECK: tessel.param "fc2.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<8x32xf32>
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @forward(%t: tensor<2x4xi32> {tessel.input = "tokens"}) -> (tensor<2x4x32xf32> {tessel.output = "logits"}) {
  %wte = tessel.param "wte" {std = 0.02 : f64} : tensor<32x8xf32>
  %wq = tessel.param "qkv.w" {std = 0.02 : f64} : tensor<24x8xf32>
  %bq = tessel.param "qkv.b" {std = 0.02 : f64} : tensor<24xf32>
  %wp = tessel.param "proj.w" {std = 0.02 : f64} : tensor<8x8xf32>
  %w1 = tessel.param "fc.w" {std = 0.02 : f64} : tensor<32x8xf32>
  %w2 = tessel.param "fc2.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<8x32xf32>
  %x = tessel.embedding %wte, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %qb = tessel.add %q, %bq : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
  %a = tessel.causal_attention %qb heads 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %p = tessel.matmul %a, %wp transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h = tessel.matmul %p, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %g = tessel.gelu %h : tensor<2x4x32xf32>
  %o = tessel.matmul %g, %w2 transpose_rhs : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
  %l = tessel.matmul %o, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  return %l : tensor<2x4x32xf32>
}

// -----

// Wrong stage: the shardings are already propagated.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
// expected-error @+1 {{tessel-tensor-parallel: @forward already has shardings on its ops (tessel-propagate-sharding has run); it runs once, on the forward function before tessel-propagate-sharding}}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) {
  %y = tessel.scale %x, 2.0 {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]} : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Sizes tp does not divide are split all the same (tessel-partition pads them): a vocabulary
// of 5 rows and an MLP of 5 hidden units over tp = 2.
// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "wte" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<5x8xf32>
// CHECK: tessel.param "fc.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<5x8xf32>
// CHECK: tessel.param "proj.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]]>]} : tensor<8x5xf32>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%t: tensor<2x4xi32> {tessel.input = "tokens"}) -> (tensor<2x4x8xf32> {tessel.output = "y"}) {
  %wte = tessel.param "wte" {std = 0.02 : f64} : tensor<5x8xf32>
  %w1 = tessel.param "fc.w" {std = 0.02 : f64} : tensor<5x8xf32>
  %w2 = tessel.param "proj.w" {std = 0.02 : f64} : tensor<8x5xf32>
  %x = tessel.embedding %wte, %t : (tensor<5x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h = tessel.matmul %x, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<5x8xf32>) -> tensor<2x4x5xf32>
  %g = tessel.relu %h : tensor<2x4x5xf32>
  %y = tessel.matmul %g, %w2 transpose_rhs : (tensor<2x4x5xf32>, tensor<8x5xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
