// --tessel-activation-checkpointing's refusals, each at the plan's line (plan-site) as the
// trainer passes it, with the IR's op in a note where there is one.
// RUN: not tessel-opt %s -split-input-file -tessel-activation-checkpointing='modules=blocks.* plan-site=plan.h:9:3' 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: not tessel-opt %s -split-input-file -tessel-activation-checkpointing='modules=blocks.* mode=selective plan-site=plan.h:9:3' 2>&1 | FileCheck %s --check-prefix=SEL
// RUN: not tessel-opt %s -split-input-file -tessel-activation-checkpointing='modules=blocks.* mode=some plan-site=plan.h:9:3' 2>&1 | FileCheck %s --check-prefix=MODE

// A block whose forward pass holds a collective (tensor parallelism's all-reduce after the
// row-parallel projection) whose result the backward pass reads: full checkpointing would
// repeat it in the backward pass. (A collective whose result only later forward ops need is
// not recomputed, and is no error.)
// FULL: plan.h:9:3: error: tessel-activation-checkpointing: recomputing 'blocks.0' would repeat its collective 'tessel.all_reduce' in the backward pass; full activation checkpointing does not compose with tensor parallelism yet
// FULL: model.h:5:1: note: the collective is here
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
