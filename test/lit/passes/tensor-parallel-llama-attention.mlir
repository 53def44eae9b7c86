// Tensor parallelism of a Llama attention block (grouped-query attention with rope; q, k, v
// and the output projection without biases): the sharding passes through autodiff, as
// tensor-parallel-gpt-block.mlir for the GPT. NH = 4 query heads of D = 4 (C = 16), NKV = 2;
// a parameter scales the input (as an RMSNorm weight would) so that its gradient is needed.
// RUN: tessel-opt %s -split-input-file --tessel-tensor-parallel --tessel-propagate-sharding \
// RUN:   --tessel-insert-reshards --tessel-partition --tessel-reshard-to-collectives \
// RUN:   --tessel-decompose-attention --tessel-autodiff \
// RUN: | FileCheck %s --implicit-check-not=tessel.all_gather --implicit-check-not=tessel.reduce_scatter \
// RUN:   --implicit-check-not=tessel.all_to_all

// tp = 2 divides NKV = 2: wq [16, 16], wk and wv [8, 16] are split on their outputs (rank r:
// query heads 2r, 2r + 1 and kv head r), wo on its inputs. Each rank's rope and attention
// see their local heads (q: 2 heads, k: 1 head; one group G = 2). In @train_step: the
// forward all-reduce after wo, then backward one, the input gradient of the column-parallel
// projections (the transpose of the tessel.replicate in front of them).
// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "wq" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<8x16xf32>
// CHECK: tessel.param "wk" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<4x16xf32>
// CHECK: tessel.param "wv" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<4x16xf32>
// CHECK: tessel.param "wo" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]]>]} : tensor<16x8xf32>
// CHECK: tessel.rope %{{.*}} heads 2 theta 1.000000e+04 : tensor<2x4x8xf32>
// CHECK: tessel.rope %{{.*}} heads 1 theta 1.000000e+04 : tensor<2x4x4xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x1x8x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x8x4xf32>
// CHECK: %[[O:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[O]] reduce sum on @mesh grid_axes = [0] : tensor<2x4x16xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-COUNT-2: tessel.all_reduce
// CHECK-NOT: tessel.all_reduce
// CHECK: return
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x16xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64} : tensor<16x16xf32>
  %wk = tessel.param "wk" {std = 0.02 : f64} : tensor<8x16xf32>
  %wv = tessel.param "wv" {std = 0.02 : f64} : tensor<8x16xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64} : tensor<16x16xf32>
  %g = tessel.param "norm.weight" init ones : tensor<16xf32>
  %xn = tessel.mul %x, %g : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %q = tessel.matmul %xn, %wq transpose_rhs : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k = tessel.matmul %xn, %wk transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %v = tessel.matmul %xn, %wv transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %qr = tessel.rope %q heads 4 theta 1.0e4 : tensor<2x4x16xf32>
  %kr = tessel.rope %k heads 2 theta 1.0e4 : tensor<2x4x8xf32>
  %a = tessel.grouped_attention %qr, %kr, %v heads 4 kv_heads 2 : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  %o = tessel.matmul %a, %wo transpose_rhs : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %h = tessel.add %x, %o : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %l = tessel.reduce_mean %h [0, 1, 2] : tensor<2x4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// tp = 4 > NKV = 2 (tp a multiple of NKV): wq and wo are split, wk and wv stay replicated;
// every rank computes both kv heads, reads them through a tessel.replicate, repeats each
// head tp / NKV = 2 times into 4 rows and picks row r at its mesh coordinate (rank r uses kv
// head r / 2, the group of its query head r). The attention has one query and one kv head
// per rank. In @train_step: the forward all-reduce after wo, then backward one for each of
// the two replicates (dk, dv: every rank's part of the replicated wk, wv and of the input
// gradient through them) and one for the input gradient of the column-parallel wq.
// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "wq" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<4x16xf32>
// CHECK: tessel.param "wk" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
// CHECK: tessel.param "wv" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
// CHECK: tessel.param "wo" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]]>]} : tensor<16x4xf32>
// CHECK: tessel.rope %{{.*}} heads 1 theta 1.000000e+04 : tensor<2x4x4xf32>
// CHECK: tessel.rope %{{.*}} heads 2 theta 1.000000e+04 : tensor<2x4x8xf32>
// CHECK: %[[R:.*]] = tessel.mesh_coordinate on @mesh grid_axes = [0] : tensor<i32>
// CHECK: %[[KF:.*]] = tessel.replicate %{{.*}} on @mesh grid_axes = [0] : tensor<2x4x8xf32>
// CHECK: tessel.broadcast %{{.*}} [1] : tensor<2x32xf32> -> tensor<2x2x32xf32>
// CHECK: %[[KT:.*]] = tessel.reshape %{{.*}} : tensor<2x2x32xf32> -> tensor<4x32xf32>
// CHECK: tessel.embedding %[[KT]], %[[R]] : (tensor<4x32xf32>, tensor<i32>) -> tensor<32xf32>
// CHECK: tessel.replicate %{{.*}} on @mesh grid_axes = [0] : tensor<2x4x8xf32>
// CHECK: tessel.embedding %{{.*}}, %[[R]] : (tensor<4x32xf32>, tensor<i32>) -> tensor<32xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
// CHECK: %[[O:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[O]] reduce sum on @mesh grid_axes = [0] : tensor<2x4x16xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-COUNT-4: tessel.all_reduce
// CHECK-NOT: tessel.all_reduce
// CHECK: return
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x16xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64} : tensor<16x16xf32>
  %wk = tessel.param "wk" {std = 0.02 : f64} : tensor<8x16xf32>
  %wv = tessel.param "wv" {std = 0.02 : f64} : tensor<8x16xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64} : tensor<16x16xf32>
  %g = tessel.param "norm.weight" init ones : tensor<16xf32>
  %xn = tessel.mul %x, %g : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %q = tessel.matmul %xn, %wq transpose_rhs : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k = tessel.matmul %xn, %wk transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %v = tessel.matmul %xn, %wv transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %qr = tessel.rope %q heads 4 theta 1.0e4 : tensor<2x4x16xf32>
  %kr = tessel.rope %k heads 2 theta 1.0e4 : tensor<2x4x8xf32>
  %a = tessel.grouped_attention %qr, %kr, %v heads 4 kv_heads 2 : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  %o = tessel.matmul %a, %wo transpose_rhs : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %h = tessel.add %x, %o : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %l = tessel.reduce_mean %h [0, 1, 2] : tensor<2x4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
