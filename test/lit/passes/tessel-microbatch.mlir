// --tessel-microbatch (passes/Microbatch.cpp) on the two stages of a 2-layer model whose
// embedding is tied to its head (tessel-split-stages and tessel-autodiff first):
//  - the signature repeats per microbatch (tokens, targets, tokens.mb1, targets.mb1, ...);
//  - the parameters (shared) stay first, once; every op reading the data is cloned per
//    microbatch and tagged tessel.pp_microbatch, the clone of microbatch m reading its copy;
//  - each gradient is summed in microbatch order ((g0 + g1) + g2) and scaled by 1/M, the
//    loss likewise, then all-reduced (sum) over pp once at the end;
//  - the tied embedding's gradient is summed across its two stages: stage 1 sends its part
//    to stage 0, which adds it to its own and sends the sum back.
// RUN: tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 | FileCheck %s --check-prefix=S0
// RUN: tessel-opt %s -tessel-split-stages=stage=1 -tessel-autodiff -tessel-microbatch=microbatches=2 | FileCheck %s --check-prefix=S1
// RUN: tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=3 | FileCheck %s --check-prefix=M3
// The loss is all-reduced once per step, not once per microbatch:
// RUN: tessel-opt %s -tessel-split-stages=stage=1 -tessel-autodiff -tessel-microbatch=microbatches=3 | FileCheck %s --check-prefix=ONCE
// ONCE-LABEL: func.func @train_step
// ONCE-NOT: tessel.all_reduce
// ONCE: tessel.cross_entropy {{.*}}tessel.pp_microbatch = 2
// ONCE: tessel.all_reduce {{.*}} reduce sum on @mesh grid_axes = [0] : tensor<f32>
// ONCE-NOT: tessel.all_reduce
// Errors: a function of no pipeline stage, M < 1, a second run, and the wrong stage (after
// the optimizer: each microbatch would update the parameters).
// RUN: not tessel-opt %s -tessel-autodiff -tessel-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefix=NOPP
// NOPP: error: tessel-microbatch: @train_step is not a pipeline stage (tessel-split-stages did not run)
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: tessel-microbatch: microbatches must be >= 1, got 0
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: tessel-microbatch: @train_step already runs 2 microbatches
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-optimizer -tessel-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefix=LATE
// LATE: error: tessel-microbatch: @train_step already updates the parameters (tessel.global_norm, tessel.adamw or tessel.sgd present); it runs once, after tessel-autodiff and before tessel-gradient-all-reduce and tessel-optimizer

// S0-LABEL: func.func @train_step
// S0-SAME: (%[[T0:.*]]: tensor<2x4xi32> {tessel.input = "tokens"}, %{{.*}}: tensor<2x4xi32> {tessel.input = "targets"}, %[[T1:.*]]: tensor<2x4xi32> {tessel.input = "tokens.mb1"}, %{{.*}}: tensor<2x4xi32> {tessel.input = "targets.mb1"})
// S0-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<32x8xf32> {tessel.grad = "wte.weight"}, tensor<8x8xf32> {tessel.grad = "blocks.0.fc.weight"})
// S0-SAME: tessel.pipeline = {axis = "pp", microbatches = 2 : i64, stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64}
// S0-NEXT: %[[WTE:.*]] = tessel.param "wte.weight"
// S0-NEXT: tessel.param "blocks.0.fc.weight"
// S0-NEXT: %[[ZR:.*]] = tessel.constant 0.000000e+00 : tensor<f32>
// S0-NEXT: tessel.embedding %[[WTE]], %[[T0]] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// S0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// S0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// S0: %[[W0:.*]] = tessel.matmul {{.*}} transpose_lhs {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// S0: %[[E0:.*]] = tessel.embedding_grad %[[T0]], {{.*}}tessel.pp_microbatch = 0 : i64
// S0-NEXT: tessel.embedding %[[WTE]], %[[T1]] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// S0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// S0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// S0: %[[W1:.*]] = tessel.matmul {{.*}} transpose_lhs {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// S0: %[[E1:.*]] = tessel.embedding_grad %[[T1]], {{.*}}tessel.pp_microbatch = 1 : i64
// S0-NEXT: %[[ES:.*]] = tessel.add %[[E0]], %[[E1]]
// S0-NEXT: %[[WS:.*]] = tessel.add %[[W0]], %[[W1]]
// S0-NEXT: %[[EM:.*]] = tessel.scale %[[ES]], 5.000000e-01 : tensor<32x8xf32>
// S0-NEXT: %[[WM:.*]] = tessel.scale %[[WS]], 5.000000e-01 : tensor<8x8xf32>
// S0-NEXT: %[[L:.*]] = tessel.all_reduce %[[ZR]] reduce sum on @mesh grid_axes = [0] : tensor<f32>
// S0-NEXT: %[[EO:.*]] = tessel.recv from 1 on @mesh grid_axes = [0] : tensor<32x8xf32>
// S0-NEXT: %[[ET:.*]] = tessel.add %[[EM]], %[[EO]]
// S0-NEXT: tessel.send %[[ET]] to 1 on @mesh grid_axes = [0] : tensor<32x8xf32>
// S0-NEXT: return %[[L]], %[[ET]], %[[WM]]
// S0-NOT: tessel.all_reduce

// S1-LABEL: func.func @train_step
// S1-SAME: tessel.input = "tokens.mb1"
// S1-SAME: tessel.pipeline = {axis = "pp", microbatches = 2 : i64, stage = 1 : i64, stages = 2 : i64, virtual_stages = 1 : i64}
// S1: %[[X0:.*]] = tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// S1: %[[L0:.*]] = tessel.cross_entropy {{.*}}tessel.pp_microbatch = 0 : i64
// S1: %[[H0:.*]] = tessel.matmul {{.*}} transpose_lhs {{.*}}tessel.pp_microbatch = 0 : i64} : (tensor<8x32xf32>, tensor<8x8xf32>) -> tensor<32x8xf32>
// S1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// S1-NEXT: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// S1: %[[L1:.*]] = tessel.cross_entropy {{.*}}tessel.pp_microbatch = 1 : i64
// S1: %[[H1:.*]] = tessel.matmul {{.*}} transpose_lhs {{.*}}tessel.pp_microbatch = 1 : i64} : (tensor<8x32xf32>, tensor<8x8xf32>) -> tensor<32x8xf32>
// S1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// S1-NEXT: %[[LS:.*]] = tessel.add %[[L0]], %[[L1]]
// S1-NEXT: %[[HS:.*]] = tessel.add %[[H0]], %[[H1]]
// S1-NEXT: tessel.add
// S1-NEXT: %[[LM:.*]] = tessel.scale %[[LS]], 5.000000e-01 : tensor<f32>
// S1-NEXT: %[[HM:.*]] = tessel.scale %[[HS]], 5.000000e-01 : tensor<32x8xf32>
// S1-NEXT: tessel.scale
// S1-NEXT: %[[L:.*]] = tessel.all_reduce %[[LM]] reduce sum on @mesh grid_axes = [0] : tensor<f32>
// S1-NEXT: tessel.send %[[HM]] to 0 on @mesh grid_axes = [0] : tensor<32x8xf32>
// S1-NEXT: %[[HT:.*]] = tessel.recv from 0 on @mesh grid_axes = [0] : tensor<32x8xf32>
// S1-NEXT: return %[[L]], %[[HT]],

// M3-LABEL: func.func @train_step
// M3-SAME: {tessel.input = "tokens.mb2"}, %{{.*}}: tensor<2x4xi32> {tessel.input = "targets.mb2"})
// M3: %[[E0:.*]] = tessel.embedding_grad {{.*}}tessel.pp_microbatch = 0 : i64
// M3: %[[E1:.*]] = tessel.embedding_grad {{.*}}tessel.pp_microbatch = 1 : i64
// M3: %[[E2:.*]] = tessel.embedding_grad {{.*}}tessel.pp_microbatch = 2 : i64
// M3-NEXT: %[[S01:.*]] = tessel.add %[[E0]], %[[E1]]
// M3-NEXT: %[[S:.*]] = tessel.add %[[S01]], %[[E2]]
// M3: tessel.scale %[[S]], 0.33333333333333331 : tensor<32x8xf32>
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
