// --tessel-propagate-sharding (passes/PropagateSharding.cpp, rules in compiler/ShardingRules.h):
// every op gets the sharding of its results. A column-parallel weight's output is split on
// its last dimension (3 blocks for qkv: each rank's heads' q, k, v), the free biases adopt the
// split their add asks for, attention keeps the heads split, a row-parallel product is a
// pending sum over tp, and an add of a pending sum and a replicated bias is replicated (the
// sum is resolved first: tessel-insert-reshards). Layer norm and the loss are replicated.
// RUN: tessel-opt %s -split-input-file -tessel-propagate-sharding -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "qkv.b" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0]], blocks = [3]>]} : tensor<24xf32>
// CHECK: tessel.param "proj.b" {std = 2.000000e-02 : f64} : tensor<8xf32>
// CHECK: tessel.layer_norm {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], []]>]}
// CHECK: tessel.matmul {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], [0]], blocks = [1, 1, 3]>]}
// CHECK: tessel.add {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], [0]], blocks = [1, 1, 3]>]}
// CHECK: tessel.causal_attention {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], [0]]>]}
// CHECK: tessel.matmul {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], []], partial = [0]>]}
// CHECK: tessel.add {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], []]>]}
// CHECK: tessel.reduce_mean {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, []>]}
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %g = tessel.param "ln.w" init ones : tensor<8xf32>
  %b = tessel.param "ln.b" init zeros : tensor<8xf32>
  %wq = tessel.param "qkv.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []], blocks = [3, 1]>]} : tensor<24x8xf32>
  %bq = tessel.param "qkv.b" {std = 0.02 : f64} : tensor<24xf32>
  %wp = tessel.param "proj.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<8x8xf32>
  %bp = tessel.param "proj.b" {std = 0.02 : f64} : tensor<8xf32>
  %n = tessel.layer_norm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %q = tessel.matmul %n, %wq transpose_rhs : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %qb = tessel.add %q, %bq : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
  %a = tessel.causal_attention %qb heads 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %p = tessel.matmul %a, %wp transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %pb = tessel.add %p, %bp : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %l = tessel.reduce_mean %pb [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A qkv projection split without blocks would give rank 0 all the queries and half the keys:
// attention asks for it replicated instead (tessel-reshard-to-collectives then says it cannot
// gather it yet), so the attention's result is replicated.
// CHECK-LABEL: func.func @forward
// CHECK: tessel.causal_attention {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], []]>]}
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<2x4x8xf32> {tessel.output = "y"}) {
  %wq = tessel.param "qkv.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<24x8xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %a = tessel.causal_attention %q heads 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  return %a : tensor<2x4x8xf32>
}

// -----

// Wrong stage: after autodiff.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
// expected-error @+1 {{tessel-propagate-sharding: @train_step already exists (tessel-autodiff has run); it runs once, after the plan's seeds and before tessel-insert-reshards}}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) {
  return %x : tensor<2x8xf32>
}
func.func @train_step(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  return %x : tensor<2x8xf32>
}
