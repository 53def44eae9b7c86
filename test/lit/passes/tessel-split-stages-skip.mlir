// --tessel-split-stages (passes/SplitStages.cpp) on 3 stages with skip connections: each
// channel (source, destination) is FIFO on its own, so stage 2 receives from stage 0 in
// stage 0's send order (the embedding, then blocks.0's output) though it uses them in the
// other order, and independently of what it receives from stage 1 (see
// tessel-split-stages-order.mlir for one channel).
// RUN: tessel-opt %s -tessel-split-stages=stage=0 | FileCheck %s --check-prefix=SEND
// RUN: tessel-opt %s -tessel-split-stages=stage=2 | FileCheck %s --check-prefix=RECV2

// Three stages, skip connections from stage 0 to stage 2: stage 0 sends the embedding, then
// blocks.0's output; stage 2 receives blocks.1's output from stage 1, and from stage 0 the
// embedding before blocks.0's output though it adds them in the other order.
// SEND-LABEL: func.func @forward
// SEND: %[[E:.*]] = tessel.embedding
// SEND-NEXT: tessel.send %[[E]] to 2
// SEND-NEXT: %[[H:.*]] = tessel.matmul
// SEND-NEXT: tessel.send %[[H]] to 1
// SEND-NEXT: tessel.send %[[H]] to 2
// RECV2-LABEL: func.func @forward
// RECV2: %[[H1:.*]] = tessel.recv from 1
// RECV2-NEXT: %[[H2:.*]] = tessel.matmul %[[H1]]
// RECV2-NEXT: %[[E:.*]] = tessel.recv from 0
// RECV2-NEXT: %[[H0:.*]] = tessel.recv from 0
// RECV2-NEXT: %[[R:.*]] = tessel.add %[[H2]], %[[H0]]
// RECV2-NEXT: tessel.add %[[R]], %[[E]]
shard.grid @mesh(shape = 3) {tessel.axis_names = ["pp"]}
func.func @forward(%tok: tensor<2x4xi32> {tessel.input = "tokens"}, %tgt: tensor<2x4xi32> {tessel.input = "targets"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte.weight" {std = 2.0e-02 : f64} : tensor<32x8xf32> loc("wte")
  %w0 = tessel.param "blocks.0.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.0.fc")
  %w1 = tessel.param "blocks.1.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.1.fc")
  %w2 = tessel.param "blocks.2.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.2.fc")
  %e = tessel.embedding %wte, %tok : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32> loc("wte")
  %h0 = tessel.matmul %e, %w0 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0.fc")
  %h1 = tessel.matmul %h0, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1.fc")
  %h2 = tessel.matmul %h1, %w2 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2.fc")
  %r = tessel.add %h2, %h0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2")
  %s = tessel.add %r, %e : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2")
  %lg = tessel.matmul %s, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32> loc("head")
  %l = tessel.cross_entropy %lg, %tgt : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
