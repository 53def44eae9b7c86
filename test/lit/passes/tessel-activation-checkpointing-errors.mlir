// --tessel-activation-checkpointing around collectives, and its refusals, each at the
// plan's line (plan-site) as the trainer passes it.
// Full mode recomputes around a collective instead: its result is kept.
// RUN: tessel-opt %s -tessel-activation-checkpointing='modules=blocks.* plan-site=plan.h:9:3' | FileCheck %s --check-prefix=FULL
// RUN: not tessel-opt %s -split-input-file -tessel-activation-checkpointing='modules=blocks.* mode=selective plan-site=plan.h:9:3' 2>&1 | FileCheck %s --check-prefix=SEL
// RUN: not tessel-opt %s -split-input-file -tessel-activation-checkpointing='modules=blocks.* mode=some plan-site=plan.h:9:3' 2>&1 | FileCheck %s --check-prefix=MODE

// A block whose forward pass holds a collective (tensor parallelism's all-reduce after the
// row-parallel projection) whose result the backward pass reads: full checkpointing keeps
// the all-reduced value (recomputing it would communicate again) and recomputes the rest.
// FULL-LABEL: func.func @train_step
// FULL: %[[G:.*]] = tessel.gelu %arg0
// FULL-NEXT: %[[R:.*]] = tessel.all_reduce %[[G]]
// FULL-NEXT: %[[H:.*]] = tessel.gelu %[[R]]
// FULL-NEXT: tessel.reduce_mean %[[H]]
// FULL-NEXT: tessel.gelu_grad %[[R]], %[[H]]
// FULL-NOT: tessel.all_reduce
// A block whose gelu output the backward reads through nothing but the collective: the
// GELU is recomputed from the block input, the all-reduce is not.
// FULL-LABEL: func.func @recompute_below
// FULL: tessel.all_reduce
// FULL: tessel.reduce_mean
// FULL-NEXT: %[[G2:.*]] = tessel.gelu %arg0
// FULL-NEXT: tessel.gelu_grad %[[G2]], %arg0
// FULL-NOT: tessel.all_reduce
// Selective checkpointing finds no causal softmax in the block.
// SEL: plan.h:9:3: error: tessel-activation-checkpointing: selective checkpointing found no core attention (a causal softmax) in the checkpointed modules of @train_step
// MODE: plan.h:9:3: error: tessel-activation-checkpointing: mode 'some' must be full or selective
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @train_step(%x: tensor<2x4xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<2x4xf32> {tessel.output = "d"}) {
  %g = tessel.gelu %x : tensor<2x4xf32> loc("blocks.0.mlp"("model.h":4:1))
  %r = tessel.all_reduce %g reduce sum on @mesh grid_axes = [0] : tensor<2x4xf32> loc("blocks.0.mlp"("model.h":5:1))
  %h = tessel.gelu %r : tensor<2x4xf32> loc("blocks.0.mlp"("model.h":6:1))
  %l = tessel.reduce_mean %h [0, 1] : tensor<2x4xf32> -> tensor<f32> loc("head"("model.h":7:1))
  %d = tessel.gelu_grad %r, %h : tensor<2x4xf32>
  return %l, %d : tensor<f32>, tensor<2x4xf32>
}
func.func @recompute_below(%x: tensor<2x4xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<2x4xf32> {tessel.output = "d"}) {
  %g = tessel.gelu %x : tensor<2x4xf32> loc("blocks.0.mlp"("model.h":14:1))
  %r = tessel.all_reduce %g reduce sum on @mesh grid_axes = [0] : tensor<2x4xf32> loc("blocks.0.mlp"("model.h":15:1))
  %h = tessel.gelu %r : tensor<2x4xf32> loc("blocks.0.mlp"("model.h":16:1))
  %l = tessel.reduce_mean %h [0, 1] : tensor<2x4xf32> -> tensor<f32> loc("head"("model.h":17:1))
  %d = tessel.gelu_grad %g, %x : tensor<2x4xf32>
  return %l, %d : tensor<f32>, tensor<2x4xf32>
}
