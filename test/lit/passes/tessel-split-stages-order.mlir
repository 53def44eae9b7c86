// --tessel-split-stages (passes/SplitStages.cpp): the transfers between two ranks are FIFO
// (MPI's non-overtaking order, NCCL's stream order), so a stage receives another stage's
// values in the order that stage sends them (its program order), whatever the order of
// their first use here. Both models send two values of the same shape across one boundary
// and use them in the other order on the receiving stage; receiving by first use would swap
// them silently.
// RUN: tessel-opt %s -split-input-file -tessel-split-stages=stage=0 | FileCheck %s --check-prefix=SEND
// RUN: tessel-opt %s -split-input-file -tessel-split-stages=stage=1 | FileCheck %s --check-prefix=RECV1

// Two stages: stage 0 sends the embedding (used by a gelu at the end of blocks.1), then
// blocks.0's output (used first on stage 1).
// SEND-LABEL: func.func @forward
// SEND: %[[E:.*]] = tessel.embedding
// SEND-NEXT: tessel.send %[[E]] to 1
// SEND: %[[R:.*]] = tessel.add
// SEND-NEXT: tessel.send %[[R]] to 1
// RECV1-LABEL: func.func @forward
// RECV1: %[[E:.*]] = tessel.recv from 0
// RECV1-NEXT: %[[R:.*]] = tessel.recv from 0
// RECV1-NEXT: tessel.matmul %[[R]], %{{.*}} transpose_rhs
// RECV1-NEXT: tessel.add %[[R]],
// RECV1-NEXT: tessel.gelu %[[E]]
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
  %u = tessel.gelu %e : tensor<2x4x8xf32> loc("blocks.1")
  %lg = tessel.matmul %r1, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32> loc("head")
  %l = tessel.cross_entropy %lg, %tgt : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
