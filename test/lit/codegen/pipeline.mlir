// Lowering of a pipeline stage (codegen/PipelineLowering.cpp): each tessel.pp_group of
// tessel.send / tessel.recv becomes one send_recv step (sends first, then recvs, each with
// its peer on the pp axis and its action's label), the actions become spans of steps, and
// the program records its stage (Program::pipeline). Stage 0 and stage 1 of a 2-layer model
// with a tied embedding, 2 microbatches, 1F1B (tessel-schedule-pipeline's order).
// RUN: tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-schedule-pipeline=schedule=1f1b \
// RUN:   | tessel-translate --tessel-to-cpp | FileCheck %s --check-prefix=S0
// RUN: tessel-opt %s -tessel-split-stages=stage=1 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-schedule-pipeline=schedule=1f1b \
// RUN:   | tessel-translate --tessel-to-cpp | FileCheck %s --check-prefix=S1

// S0: // mesh pp=2
// S0-NEXT: // pipeline over pp: stage 0 of 2, 2 microbatches, 1 virtual stage(s), schedule 1f1b
// S0-LABEL: // func @train_step: 27 steps
// Step 0: the loss of stage 0 (a constant 0); steps 1-3: F0; 4: SEND_F0; 5-7: F1; 8: SEND_F1
// with RECV_B0 (one group); 9-12: B0; 13: RECV_B1; 14-19: B1 (with the microbatch sums).
// S0-NEXT: kernel {{.*}}_constant
// S0-NEXT: kernel {{.*}}_embedding(%{{[0-9]+}}, wte.weight, train_step.tokens)
// S0-NEXT: gemm
// S0-NEXT: kernel {{.*}}_add(%[[Y0:[0-9]+]],
// S0-NEXT: send_recv over pp (2 ranks): send %[[Y0]] to 1 [0SEND_F0]
// S0-NEXT: kernel {{.*}}_embedding(%{{[0-9]+}}, wte.weight, train_step.tokens.mb1)
// S0-NEXT: gemm
// S0-NEXT: kernel {{.*}}_add(%[[Y1:[0-9]+]],
// S0-NEXT: send_recv over pp (2 ranks): send %[[Y1]] to 1 [0SEND_F1], recv %[[G0:[0-9]+]] from 1 [0RECV_B0]
// S0-NEXT: gemm %{{[0-9]+}} = %[[G0]] x blocks.0.fc.weight
// S0: kernel {{.*}}_embedding_grad(%{{[0-9]+}}, train_step.tokens,
// S0-NEXT: send_recv over pp (2 ranks): recv %[[G1:[0-9]+]] from 1 [0RECV_B1]
// S0-NEXT: gemm %{{[0-9]+}} = %[[G1]] x blocks.0.fc.weight
// The step's end, outside every action: the loss all-reduce, then the tied embedding's
// gradient: received from stage 1, added, the sum sent back.
// S0: all_reduce_start sum over pp (2 ranks), synchronous
// S0-NEXT: all_reduce_wait sum over pp (2 ranks), synchronous
// S0-NEXT: send_recv over pp (2 ranks): recv %[[T:[0-9]+]] from 1
// S0-NEXT: kernel {{.*}}_add(%[[TS:[0-9]+]], %{{[0-9]+}}, %[[T]])
// S0-NEXT: send_recv over pp (2 ranks): send %[[TS]] to 1
// S0-NEXT: action 0F0 steps [1, 4)
// S0-NEXT: action 0SEND_F0 steps [4, 5)
// S0-NEXT: action 0F1 steps [5, 8)
// S0-NEXT: action 0SEND_F1+0RECV_B0 steps [8, 9)
// S0-NEXT: action 0B0 steps [9, 13)
// S0-NEXT: action 0RECV_B1 steps [13, 14)
// S0-NEXT: action 0B1 steps [14, 20)
// S0-NOT: action

// The last stage: RECV_F0, F0, B0, then SEND_B0 and RECV_F1 in one step, F1, B1, SEND_B1;
// at the end it sends its part of the tied gradient and receives the sum.
// S1: // pipeline over pp: stage 1 of 2, 2 microbatches, 1 virtual stage(s), schedule 1f1b
// S1-LABEL: // func @train_step: 34 steps
// S1: send_recv over pp (2 ranks): recv %[[X0:[0-9]+]] from 0 [1RECV_F0]
// S1-NEXT: gemm %{{[0-9]+}} = %[[X0]] x blocks.1.fc.weight^T
// S1: send_recv over pp (2 ranks): send %{{[0-9]+}} to 0 [1SEND_B0], recv %[[X1:[0-9]+]] from 0 [1RECV_F1]
// S1-NEXT: gemm %{{[0-9]+}} = %[[X1]] x blocks.1.fc.weight^T
// S1: send_recv over pp (2 ranks): send %{{[0-9]+}} to 0 [1SEND_B1]
// S1: all_reduce_wait sum over pp (2 ranks), synchronous
// S1-NEXT: send_recv over pp (2 ranks): send %{{[0-9]+}} to 0
// S1-NEXT: send_recv over pp (2 ranks): recv %{{[0-9]+}} from 0
// S1-NEXT: action 1RECV_F0 steps [1, 2)
// S1-NEXT: action 1F0 steps [2, 6)
// S1-NEXT: action 1B0 steps [6, 12)
// S1-NEXT: action 1SEND_B0+1RECV_F1 steps [12, 13)
// S1-NEXT: action 1F1 steps [13, 18)
// S1-NEXT: action 1B1 steps [18, 26)
// S1-NEXT: action 1SEND_B1 steps [26, 27)
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
