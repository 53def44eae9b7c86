// --tessel-split-stages (passes/SplitStages.cpp) on a 2-layer model whose embedding is tied
// to its head, cut over a 2-stage pipeline axis: stage 0 keeps the embedding and blocks.0 and
// sends the residual stream to stage 1; stage 1 receives it, runs blocks.1, the head and the
// loss. The tied embedding weight is kept by both stages and tagged with them; the loss is
// all-reduced (sum) over pp, 0 on stage 0. Given layer ranges "0-0,1-1" give the same cut.
// RUN: tessel-opt %s -tessel-split-stages=stage=0 | FileCheck %s --check-prefix=S0
// RUN: tessel-opt %s -tessel-split-stages=stage=1 | FileCheck %s --check-prefix=S1
// RUN: tessel-opt %s "-tessel-split-stages=stage=1 layer-ranges=0-0,1-1" | FileCheck %s --check-prefix=S1
// A second run refuses: the function is already one stage.
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-split-stages=stage=0 2>&1 | FileCheck %s --check-prefix=TWICE

// TWICE: error: tessel-split-stages: @forward is already one pipeline stage

// S0-LABEL: func.func @forward
// S0-SAME: attributes {tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64}}
// S0-NEXT: %[[WTE:.*]] = tessel.param "wte.weight" {std = 2.000000e-02 : f64, tessel.pp_stages = array<i64: 0, 1>}
// S0-NEXT: %[[W0:.*]] = tessel.param "blocks.0.fc.weight" {std = 2.000000e-02 : f64} :
// S0-NEXT: %[[E:.*]] = tessel.embedding %[[WTE]], %arg0 {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64}
// S0-NEXT: %[[H:.*]] = tessel.matmul %[[E]], %[[W0]] transpose_rhs {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64}
// S0-NEXT: %[[R:.*]] = tessel.add %[[E]], %[[H]] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64}
// S0-NEXT: tessel.send %[[R]] to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64} : tensor<2x4x8xf32>
// S0-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<f32>
// S0-NEXT: %[[L:.*]] = tessel.all_reduce %[[Z]] reduce sum on @mesh grid_axes = [0] : tensor<f32>
// S0-NEXT: return %[[L]]
// S0-NOT: blocks.1
// S0-NOT: tessel.recv

// S1-LABEL: func.func @forward
// S1-SAME: attributes {tessel.pipeline = {axis = "pp", stage = 1 : i64, stages = 2 : i64, virtual_stages = 1 : i64}}
// S1-NEXT: %[[WTE:.*]] = tessel.param "wte.weight" {std = 2.000000e-02 : f64, tessel.pp_stages = array<i64: 0, 1>}
// S1-NEXT: %[[W1:.*]] = tessel.param "blocks.1.fc.weight" {std = 2.000000e-02 : f64} :
// S1-NEXT: %[[X:.*]] = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64} : tensor<2x4x8xf32>
// S1-NEXT: %[[H:.*]] = tessel.matmul %[[X]], %[[W1]] transpose_rhs {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// S1-NEXT: %[[R:.*]] = tessel.add %[[X]], %[[H]] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// S1-NEXT: %[[LG:.*]] = tessel.matmul %[[R]], %[[WTE]] transpose_rhs {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// S1-NEXT: %[[CE:.*]] = tessel.cross_entropy %[[LG]], %arg1 {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// S1-NEXT: %[[L:.*]] = tessel.all_reduce %[[CE]] reduce sum on @mesh grid_axes = [0] : tensor<f32>
// S1-NEXT: return %[[L]]
// S1-NOT: blocks.0
// S1-NOT: tessel.send
shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @forward(%tok: tensor<2x4xi32> {tessel.input = "tokens"}, %tgt: tensor<2x4xi32> {tessel.input = "targets"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte.weight" {std = 2.0e-02 : f64} : tensor<32x8xf32> loc("wte")
  %w0 = tessel.param "blocks.0.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.0.fc")
  %w1 = tessel.param "blocks.1.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.1.fc")
  %e = tessel.embedding %wte, %tok : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32> loc("wte")
  %h0 = tessel.matmul %e, %w0 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0.fc")
  %r0 = tessel.add %e, %h0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0")
  %h1 = tessel.matmul %r0, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1.fc")
  %r1 = tessel.add %r0, %h1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1")
  %lg = tessel.matmul %r1, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32> loc("head")
  %l = tessel.cross_entropy %lg, %tgt : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
