// --tessel-split-stages (passes/SplitStages.cpp) without layer ranges: the cost model
// (passes/StageBalance.h, roofline of FLOPs and bytes) cuts 4 equal blocks over 2 stages, and
// the embedding and the head count in the balance. Without them the cut would be 0-1 | 2-3.
//  - First model: a 512-row embedding tied to the head (the head's logits and the loss read
//    and write 2x4x512 floats, about 20 times a block's bytes), so the last layer is the
//    costliest: the cut is 0-2 | 3.
//  - Second model: the same embedding but no head (the loss is a mean), so layer 0 is the
//    costliest: the cut is 0 | 1-3.
// With 2 virtual stages (4 chunks, one layer each) chunk c runs on stage c % 2 ("loop"
// placement): stage 0 runs blocks 0 and 2, stage 1 blocks 1 and 3, each chunk's output sent
// to the other stage and its input received from it.
// RUN: tessel-opt %s -split-input-file -tessel-split-stages=stage=0 | FileCheck %s --check-prefix=BAL0
// RUN: tessel-opt %s -split-input-file -tessel-split-stages=stage=1 | FileCheck %s --check-prefix=BAL1
// RUN: tessel-opt %s -split-input-file "-tessel-split-stages=stage=0 virtual-stages=2" | FileCheck %s --check-prefix=V0
// RUN: tessel-opt %s -split-input-file "-tessel-split-stages=stage=1 virtual-stages=2" | FileCheck %s --check-prefix=V1

// BAL0-LABEL: func.func @forward
// BAL0-NEXT: tessel.param "wte.weight" {{.*}}tessel.pp_stages = array<i64: 0, 1>
// BAL0-NEXT: tessel.param "blocks.0.fc.weight"
// BAL0-NEXT: tessel.param "blocks.1.fc.weight"
// BAL0-NEXT: tessel.param "blocks.2.fc.weight"
// BAL0-NEXT: tessel.embedding {{.*}}tessel.pp_chunk = 0
// BAL0-COUNT-6: {{^ +%.* = tessel.(matmul|add) .*}}tessel.pp_chunk = 0
// BAL0-NEXT: tessel.send %{{.*}} to 1 on @mesh
// BAL0-NEXT: tessel.constant 0.0
// BAL0-LABEL: func.func @forward
// BAL0-NEXT: tessel.param "wte.weight" {std = 2.000000e-02 : f64} :
// BAL0-NEXT: tessel.param "blocks.0.fc.weight"
// BAL0-NEXT: tessel.embedding {{.*}}tessel.pp_chunk = 0
// BAL0-COUNT-2: {{^ +%.* = tessel.(matmul|add) .*}}tessel.pp_chunk = 0
// BAL0-NEXT: tessel.send %{{.*}} to 1 on @mesh
// BAL0-NEXT: tessel.constant 0.0

// BAL1-LABEL: func.func @forward
// BAL1-NEXT: tessel.param "wte.weight" {{.*}}tessel.pp_stages = array<i64: 0, 1>
// BAL1-NEXT: tessel.param "blocks.3.fc.weight"
// BAL1-NEXT: tessel.recv from 0 on @mesh
// BAL1-NEXT: tessel.matmul {{.*}}tessel.pp_chunk = 1
// BAL1-NEXT: tessel.add {{.*}}tessel.pp_chunk = 1
// BAL1-NEXT: tessel.matmul {{.*}}tessel.pp_chunk = 1
// BAL1-NEXT: tessel.cross_entropy {{.*}}tessel.pp_chunk = 1
// BAL1-NEXT: tessel.all_reduce
// BAL1-LABEL: func.func @forward
// BAL1-NEXT: tessel.param "blocks.1.fc.weight"
// BAL1-NEXT: tessel.param "blocks.2.fc.weight"
// BAL1-NEXT: tessel.param "blocks.3.fc.weight"
// BAL1-NEXT: tessel.recv from 0 on @mesh
// BAL1-COUNT-6: {{^ +%.* = tessel.(matmul|add) .*}}tessel.pp_chunk = 1
// BAL1-NEXT: tessel.reduce_mean {{.*}}tessel.pp_chunk = 1
// BAL1-NEXT: tessel.all_reduce

// V0-LABEL: func.func @forward
// V0-SAME: tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 2 : i64}
// V0-NEXT: tessel.param "wte.weight" {{.*}}tessel.pp_stages = array<i64: 0, 1>
// V0-NEXT: %[[W0:.*]] = tessel.param "blocks.0.fc.weight"
// V0-NEXT: %[[W2:.*]] = tessel.param "blocks.2.fc.weight"
// V0-NEXT: tessel.embedding {{.*}}tessel.pp_chunk = 0
// V0-NEXT: tessel.matmul %{{.*}}, %[[W0]] {{.*}}tessel.pp_chunk = 0
// V0-NEXT: %[[A:.*]] = tessel.add {{.*}}tessel.pp_chunk = 0
// V0-NEXT: tessel.send %[[A]] to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64}
// V0-NEXT: %[[X:.*]] = tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64}
// V0-NEXT: tessel.matmul %[[X]], %[[W2]] {{.*}}tessel.pp_chunk = 2
// V0-NEXT: %[[B:.*]] = tessel.add %[[X]], {{.*}}tessel.pp_chunk = 2
// V0-NEXT: tessel.send %[[B]] to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 2 : i64}
// V0-NEXT: tessel.constant 0.0

// V1-LABEL: func.func @forward
// V1-SAME: tessel.pipeline = {axis = "pp", stage = 1 : i64, stages = 2 : i64, virtual_stages = 2 : i64}
// V1-NEXT: tessel.param "wte.weight" {{.*}}tessel.pp_stages = array<i64: 0, 1>
// V1-NEXT: %[[W1:.*]] = tessel.param "blocks.1.fc.weight"
// V1-NEXT: %[[W3:.*]] = tessel.param "blocks.3.fc.weight"
// V1-NEXT: %[[X:.*]] = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// V1-NEXT: tessel.matmul %[[X]], %[[W1]] {{.*}}tessel.pp_chunk = 1
// V1-NEXT: %[[A:.*]] = tessel.add %[[X]], {{.*}}tessel.pp_chunk = 1
// V1-NEXT: tessel.send %[[A]] to 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64}
// V1-NEXT: %[[Y:.*]] = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 3 : i64}
// V1-NEXT: tessel.matmul %[[Y]], %[[W3]] {{.*}}tessel.pp_chunk = 3
// V1-NEXT: tessel.add %[[Y]], {{.*}}tessel.pp_chunk = 3
// V1-NEXT: tessel.matmul {{.*}}tessel.pp_chunk = 3
// V1-NEXT: tessel.cross_entropy {{.*}}tessel.pp_chunk = 3
// V1-NEXT: tessel.all_reduce
shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @forward(%tok: tensor<2x4xi32> {tessel.input = "tokens"}, %tgt: tensor<2x4xi32> {tessel.input = "targets"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte.weight" {std = 2.0e-02 : f64} : tensor<512x8xf32> loc("wte")
  %w0 = tessel.param "blocks.0.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.0.fc")
  %w1 = tessel.param "blocks.1.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.1.fc")
  %w2 = tessel.param "blocks.2.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.2.fc")
  %w3 = tessel.param "blocks.3.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.3.fc")
  %r = tessel.embedding %wte, %tok : (tensor<512x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32> loc("wte")
  %h0 = tessel.matmul %r, %w0 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0.fc")
  %r0 = tessel.add %r, %h0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0")
  %h1 = tessel.matmul %r0, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1.fc")
  %r1 = tessel.add %r0, %h1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1")
  %h2 = tessel.matmul %r1, %w2 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2.fc")
  %r2 = tessel.add %r1, %h2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2")
  %h3 = tessel.matmul %r2, %w3 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.3.fc")
  %r3 = tessel.add %r2, %h3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.3")
  %lg = tessel.matmul %r3, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<512x8xf32>) -> tensor<2x4x512xf32> loc("head")
  %l = tessel.cross_entropy %lg, %tgt : (tensor<2x4x512xf32>, tensor<2x4xi32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @forward(%tok: tensor<2x4xi32> {tessel.input = "tokens"}, %tgt: tensor<2x4xi32> {tessel.input = "targets"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte.weight" {std = 2.0e-02 : f64} : tensor<512x8xf32> loc("wte")
  %w0 = tessel.param "blocks.0.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.0.fc")
  %w1 = tessel.param "blocks.1.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.1.fc")
  %w2 = tessel.param "blocks.2.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.2.fc")
  %w3 = tessel.param "blocks.3.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.3.fc")
  %r = tessel.embedding %wte, %tok : (tensor<512x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32> loc("wte")
  %h0 = tessel.matmul %r, %w0 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0.fc")
  %r0 = tessel.add %r, %h0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0")
  %h1 = tessel.matmul %r0, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1.fc")
  %r1 = tessel.add %r0, %h1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1")
  %h2 = tessel.matmul %r1, %w2 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2.fc")
  %r2 = tessel.add %r1, %h2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2")
  %h3 = tessel.matmul %r2, %w3 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.3.fc")
  %r3 = tessel.add %r2, %h3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.3")
  %l = tessel.reduce_mean %r3 [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
