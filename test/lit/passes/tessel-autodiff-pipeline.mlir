// --tessel-autodiff (passes/Autodiff.cpp) on one pipeline stage as tessel-split-stages leaves
// it: each forward tessel.send becomes a tessel.recv of its operand's gradient from the same
// peer, each tessel.recv a tessel.send of its result's gradient to the same peer, in the
// reverse order (the peer reverses its own list the same way, so the FIFO channel matches).
// Backward ops carry tessel.pp_action = "B" and the chunk of the forward op they differentiate.
// RUN: tessel-opt %s -split-input-file -tessel-autodiff | FileCheck %s

// Stage 0 of 2 with 2 virtual stages: chunk 0 (the embedding, blocks.0) sends to stage 1,
// chunk 2 (blocks.2) receives from stage 1 and sends back to it. The reverse sweep first
// receives chunk 2's output gradient, sends chunk 2's input gradient, then receives chunk 0's.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 2 : i64}
// CHECK: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64}
// CHECK: %[[X2:.*]] = tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64}
// CHECK: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64}
// CHECK: %[[L:.*]] = tessel.all_reduce
// CHECK-NEXT: %[[G2:.*]] = tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 2 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: tessel.matmul %[[G2]], %{{.*}} {tessel.pp_action = "B", tessel.pp_chunk = 2 : i64}
// CHECK: %[[W2:.*]] = tessel.matmul {{.*}} transpose_lhs {tessel.pp_action = "B", tessel.pp_chunk = 2 : i64}
// CHECK-NEXT: %[[D2:.*]] = tessel.add %[[G2]], %{{.*}} {tessel.pp_action = "B", tessel.pp_chunk = 2 : i64}
// CHECK-NEXT: tessel.send %[[D2]] to 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 2 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[G0:.*]] = tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: tessel.matmul %[[G0]], %{{.*}} {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64}
// CHECK: %[[W0:.*]] = tessel.matmul {{.*}} transpose_lhs {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64}
// CHECK-NEXT: %[[D0:.*]] = tessel.add %[[G0]], %{{.*}} {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64}
// CHECK-NEXT: %[[E:.*]] = tessel.embedding_grad %arg0, %[[D0]] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64}
// CHECK-NEXT: return %[[L]], %[[E]], %[[W0]], %[[W2]]
// CHECK-NOT: tessel.send
shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @forward(%tok: tensor<2x4xi32> {tessel.input = "tokens"}, %tgt: tensor<2x4xi32> {tessel.input = "targets"})
    -> (tensor<f32> {tessel.output = "loss"})
    attributes {tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 2 : i64}} {
  %wte = tessel.param "wte.weight" {std = 2.0e-02 : f64, tessel.pp_stages = array<i64: 0, 1>} : tensor<8x8xf32>
  %w0 = tessel.param "blocks.0.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32>
  %w2 = tessel.param "blocks.2.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32>
  %e = tessel.embedding %wte, %tok {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64} : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h0 = tessel.matmul %e, %w0 transpose_rhs {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r0 = tessel.add %e, %h0 {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  tessel.send %r0 to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64} : tensor<2x4x8xf32>
  %x2 = tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64} : tensor<2x4x8xf32>
  %h2 = tessel.matmul %x2, %w2 transpose_rhs {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r2 = tessel.add %x2, %h2 {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  tessel.send %r2 to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64} : tensor<2x4x8xf32>
  %z = tessel.constant 0.000000e+00 : tensor<f32>
  %l = tessel.all_reduce %z reduce sum on @mesh grid_axes = [0] : tensor<f32>
  return %l : tensor<f32>
}

// -----

// The last stage receives two values from stage 0 (in stage 0's send order: the embedding,
// then the residual stream); the loss ignores the first (its only user is an unused gelu),
// so its gradient is an explicit zero, still sent back so that stage 0's matching recv is
// served. The gradients go back in reverse order: the residual stream's first, then the zeros.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.*]] = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// CHECK-NEXT: %[[X:.*]] = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// CHECK: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64}
// CHECK: %[[DX:.*]] = tessel.add {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64}
// CHECK-NEXT: tessel.send %[[DX]] to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: tessel.send %[[Z]] to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: return
shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @forward(%tok: tensor<2x4xi32> {tessel.input = "tokens"}, %tgt: tensor<2x4xi32> {tessel.input = "targets"})
    -> (tensor<f32> {tessel.output = "loss"})
    attributes {tessel.pipeline = {axis = "pp", stage = 1 : i64, stages = 2 : i64, virtual_stages = 1 : i64}} {
  %wte = tessel.param "wte.weight" {std = 2.0e-02 : f64, tessel.pp_stages = array<i64: 0, 1>} : tensor<32x8xf32>
  %w1 = tessel.param "blocks.1.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32>
  %e = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : tensor<2x4x8xf32>
  %x = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : tensor<2x4x8xf32>
  %h = tessel.matmul %x, %w1 transpose_rhs {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = tessel.add %x, %h {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %u = tessel.gelu %e {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : tensor<2x4x8xf32>
  %lg = tessel.matmul %r, %wte transpose_rhs {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %ce = tessel.cross_entropy %lg, %tgt {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  %l = tessel.all_reduce %ce reduce sum on @mesh grid_axes = [0] : tensor<f32>
  return %l : tensor<f32>
}
