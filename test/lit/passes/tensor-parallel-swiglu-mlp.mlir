// Tensor parallelism of a Llama-style SwiGLU MLP sublayer, h = x + down(silu(gate(n(x))) * up(n(x)))
// with n an RMS norm, as Megatron-LM lays it out (tp = 2): gate and up column-parallel (their
// weights split on the output dimension, so each rank holds half of the H = 48 hidden units),
// down row-parallel (its weight split on the input dimension). Each rank computes silu(gate) * up
// on its own hidden units without communicating; the forward pass has exactly one all-reduce,
// of down's [B, T, C] output, and the backward pass exactly one, of the input gradient that
// the two column-parallel projections add up (the transpose of the tessel.replicate in front of
// them). The untied head stays replicated. --implicit-check-not makes any other collective a
// failure.
// RUN: tessel-opt %s -split-input-file --tessel-tensor-parallel | FileCheck %s --check-prefix=SEED
// RUN: tessel-opt %s -split-input-file --tessel-tensor-parallel --tessel-propagate-sharding --tessel-insert-reshards \
// RUN:   --tessel-partition --tessel-reshard-to-collectives --tessel-autodiff \
// RUN: | FileCheck %s --implicit-check-not=tessel.all_reduce --implicit-check-not=tessel.all_gather \
// RUN:   --implicit-check-not=tessel.reduce_scatter --implicit-check-not=tessel.all_to_all

// SEED-LABEL: func.func @forward
// SEED: tessel.param "ffn_norm.weight" init  ones : tensor<16xf32>
// SEED: tessel.param "w1.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<48x16xf32>
// SEED: tessel.param "w3.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<48x16xf32>
// SEED: tessel.param "w2.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]]>]} : tensor<16x48xf32>
// SEED: tessel.param "output.weight" {std = 2.000000e-02 : f64} : tensor<32x16xf32>

// Local shapes on each rank: B = 4, T = 8, C = 16, H / 2 = 24.
// CHECK-LABEL: func.func @forward
// CHECK: tessel.rms_norm %{{.*}}, %{{.*}} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
// CHECK: %[[G:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x16xf32>, tensor<24x16xf32>) -> tensor<4x8x24xf32>
// CHECK: %[[U:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x16xf32>, tensor<24x16xf32>) -> tensor<4x8x24xf32>
// CHECK: %[[S:.*]] = tessel.silu %[[G]] : tensor<4x8x24xf32>
// CHECK: %[[P:.*]] = tessel.mul %[[S]], %[[U]] : (tensor<4x8x24xf32>, tensor<4x8x24xf32>) -> tensor<4x8x24xf32>
// CHECK: %[[D:.*]] = tessel.matmul %[[P]], %{{.*}} transpose_rhs : (tensor<4x8x24xf32>, tensor<16x24xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[D]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
// CHECK: tessel.cross_entropy
// CHECK: return

// CHECK-LABEL: func.func @train_step
// CHECK: tessel.all_reduce %{{.*}} reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: tessel.cross_entropy_grad
// Backward of the MLP: silu_grad on the local hidden units, then the two column-parallel
// input gradients [4, 8, 24] x [24, 16], added, and one all-reduce before rms_norm_grad.
// CHECK: tessel.silu_grad %{{.*}}, %{{.*}} : tensor<4x8x24xf32>
// CHECK-DAG: %[[DG:.*]] = tessel.matmul %{{.*}}, %{{.*}} : (tensor<4x8x24xf32>, tensor<24x16xf32>) -> tensor<4x8x16xf32>
// CHECK-DAG: %[[DU:.*]] = tessel.matmul %{{.*}}, %{{.*}} : (tensor<4x8x24xf32>, tensor<24x16xf32>) -> tensor<4x8x16xf32>
// CHECK: %[[DN:.*]] = tessel.add %{{.*}}, %{{.*}} : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[DNR:.*]] = tessel.all_reduce %[[DN]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: tessel.rms_norm_grad %{{.*}}, %{{.*}}, %[[DNR]]
// CHECK: return
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8x16xf32> {tessel.input = "x"}, %targets: tensor<4x8xi32> {tessel.input = "targets"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %n = tessel.param "ffn_norm.weight" init ones : tensor<16xf32>
  %w1 = tessel.param "w1.weight" {std = 2.000000e-02 : f64} : tensor<48x16xf32>
  %w3 = tessel.param "w3.weight" {std = 2.000000e-02 : f64} : tensor<48x16xf32>
  %w2 = tessel.param "w2.weight" {std = 2.000000e-02 : f64} : tensor<16x48xf32>
  %wo = tessel.param "output.weight" {std = 2.000000e-02 : f64} : tensor<32x16xf32>
  %h = tessel.rms_norm %x, %n : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %g = tessel.matmul %h, %w1 transpose_rhs : (tensor<4x8x16xf32>, tensor<48x16xf32>) -> tensor<4x8x48xf32>
  %u = tessel.matmul %h, %w3 transpose_rhs : (tensor<4x8x16xf32>, tensor<48x16xf32>) -> tensor<4x8x48xf32>
  %s = tessel.silu %g : tensor<4x8x48xf32>
  %p = tessel.mul %s, %u : (tensor<4x8x48xf32>, tensor<4x8x48xf32>) -> tensor<4x8x48xf32>
  %d = tessel.matmul %p, %w2 transpose_rhs : (tensor<4x8x48xf32>, tensor<16x48xf32>) -> tensor<4x8x16xf32>
  %r = tessel.add %x, %d : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %l = tessel.matmul %r, %wo transpose_rhs : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = tessel.cross_entropy %l, %targets : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The other operand order, mul(up, silu(gate)), and weights in [in, out] layout (no
// transpose_rhs): the same split, on the other weight dimensions. x is an input without a
// gradient, so the backward pass needs no all-reduce of its own: @train_step has only the
// forward's.
// SEED-LABEL: func.func @forward
// SEED: tessel.param "gate" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]]>]} : tensor<16x48xf32>
// SEED: tessel.param "up" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]]>]} : tensor<16x48xf32>
// SEED: tessel.param "down" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<48x16xf32>
// CHECK-LABEL: func.func @forward
// CHECK: %[[D:.*]] = tessel.matmul %{{.*}}, %{{.*}} : (tensor<4x8x24xf32>, tensor<24x16xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[D]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK-LABEL: func.func @train_step
// CHECK: tessel.all_reduce %{{.*}} reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: tessel.silu_grad %{{.*}}, %{{.*}} : tensor<4x8x24xf32>
// CHECK: return
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8x16xf32> {tessel.input = "x"}, %targets: tensor<4x8xi32> {tessel.input = "targets"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w1 = tessel.param "gate" {std = 2.000000e-02 : f64} : tensor<16x48xf32>
  %w3 = tessel.param "up" {std = 2.000000e-02 : f64} : tensor<16x48xf32>
  %w2 = tessel.param "down" {std = 2.000000e-02 : f64} : tensor<48x16xf32>
  %g = tessel.matmul %x, %w1 : (tensor<4x8x16xf32>, tensor<16x48xf32>) -> tensor<4x8x48xf32>
  %u = tessel.matmul %x, %w3 : (tensor<4x8x16xf32>, tensor<16x48xf32>) -> tensor<4x8x48xf32>
  %s = tessel.silu %g : tensor<4x8x48xf32>
  %p = tessel.mul %u, %s : (tensor<4x8x48xf32>, tensor<4x8x48xf32>) -> tensor<4x8x48xf32>
  %d = tessel.matmul %p, %w2 : (tensor<4x8x48xf32>, tensor<48x16xf32>) -> tensor<4x8x16xf32>
  %r = tessel.add %x, %d : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %m = tessel.reduce_mean %r [0, 1, 2] : tensor<4x8x16xf32> -> tensor<f32>
  return %m : tensor<f32>
}
