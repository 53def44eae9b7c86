// --tessel-schedule-pipeline (passes/SchedulePipeline.cpp) orders a stage's unrolled
// microbatches (tessel-split-stages, tessel-autodiff, tessel-microbatch first) by its action
// list of runtime/pipeline/Schedule.h, and gives the transfers of consecutive comm actions
// one tessel.pp_group. The model: stage 0 runs the embedding and blocks.0, stage 1 blocks.1,
// the head and the loss. Each action is seen by one op: F by the embedding (stage 0) or the
// loss (stage 1), B by the embedding's gradient (stage 0) or the loss's (stage 1), W (stage 1)
// by the weight-gradient products.
//
// 1F1B, 2 stages, 4 microbatches (the standard one: stage s warms up with p - s - 1 = 1 - s
// forwards, then alternates, the first stage's SEND_F and the next RECV_B forming one group,
// the last stage's SEND_B and the next RECV_F one group; Megatron-LM's
// send_forward_recv_backward / send_backward_recv_forward):
//   stage 0: F0 SEND_F0 | F1 [SEND_F1 RECV_B0] B0 | F2 [SEND_F2 RECV_B1] B1 | F3 [SEND_F3 RECV_B2] B2 | RECV_B3 B3
//   stage 1: RECV_F0 F0 B0 [SEND_B0 RECV_F1] F1 B1 [SEND_B1 RECV_F2] F2 B2 [SEND_B2 RECV_F3] F3 B3 SEND_B3
// RUN: tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=4 -tessel-schedule-pipeline=schedule=1f1b | FileCheck %s --check-prefix=A0
// RUN: tessel-opt %s -tessel-split-stages=stage=1 -tessel-autodiff -tessel-microbatch=microbatches=4 -tessel-schedule-pipeline=schedule=1f1b | FileCheck %s --check-prefix=A1
// GPipe, 4 microbatches: every forward, then every backward.
// RUN: tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=4 -tessel-schedule-pipeline=schedule=gpipe | FileCheck %s --check-prefix=G0
// RUN: tessel-opt %s -tessel-split-stages=stage=1 -tessel-autodiff -tessel-microbatch=microbatches=4 -tessel-schedule-pipeline=schedule=gpipe | FileCheck %s --check-prefix=G1
// Zero-bubble (ZB-H1), 2 microbatches: the backward splits into I (what the gradient sent
// back needs) and W (weight gradients), W deferred to the end; no backward op stays "B" on
// stage 1. Stage 0 sends no gradient back, so its whole backward is W.
// RUN: tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-schedule-pipeline=schedule=zero-bubble | FileCheck %s --check-prefix=Z0
// RUN: tessel-opt %s -tessel-split-stages=stage=1 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-schedule-pipeline=schedule=zero-bubble | FileCheck %s --check-prefix=Z1 --implicit-check-not='{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch'
// A user schedule (CSV, PyTorch's action vocabulary, one row per rank): 1F1B written out.
// RUN: echo '# rank 0, then rank 1' > %t.ok.csv
// RUN: echo '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1' >> %t.ok.csv
// RUN: echo '1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1' >> %t.ok.csv
// RUN: tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-schedule-pipeline=schedule=%t.ok.csv | FileCheck %s --check-prefix=C0
// Bad user schedules, named at the plan's pipeline() call: a missing action (rank 0 has no
// 0B1), and a backward before its forward (both actions named).
// RUN: echo '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1' > %t.missing.csv
// RUN: echo '1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1' >> %t.missing.csv
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 "-tessel-schedule-pipeline=schedule=%t.missing.csv plan-site=train.cpp:9:5" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: train.cpp:9:5: error: pipeline schedule '{{.*}}missing.csv': rank 0, action 7 (the end of its list): chunk 0 microbatch 1 has no backward (0B1 or 0I1)
// RUN: echo '0B0,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0RECV_B1,0B1' > %t.early.csv
// RUN: echo '1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1' >> %t.early.csv
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 "-tessel-schedule-pipeline=schedule=%t.early.csv plan-site=train.cpp:9:5" 2>&1 | FileCheck %s --check-prefix=EARLY
// EARLY: train.cpp:9:5: error: pipeline schedule '{{.*}}early.csv': rank 0, action 0 (0B0) waits for 0F0 (the forward it differentiates), which is not earlier in rank 0's list
// An unknown schedule name, a schedule before tessel-microbatch, and a second run:
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-schedule-pipeline=schedule=pipedream 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: error: pipeline schedule 'pipedream': not a built-in schedule (gpipe, 1f1b, interleaved or zero-bubble), and no readable CSV file of that name
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-schedule-pipeline 2>&1 | FileCheck %s --check-prefix=NOMB
// NOMB: error: tessel-schedule-pipeline: @train_step has no microbatches (tessel-microbatch did not run)
// RUN: not tessel-opt %s -tessel-split-stages=stage=0 -tessel-autodiff -tessel-microbatch=microbatches=2 -tessel-schedule-pipeline -tessel-schedule-pipeline 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: tessel-schedule-pipeline: @train_step is already scheduled

// A0-LABEL: func.func @train_step
// A0-SAME: tessel.pipeline = {axis = "pp", microbatches = 4 : i64, schedule = "1f1b", stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64}
// A0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// A0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 0 : i64, tessel.pp_microbatch = 0 : i64}
// A0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// A0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 1 : i64}
// A0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 0 : i64}
// A0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// A0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 2 : i64}
// A0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 2 : i64}
// A0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 1 : i64}
// A0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// A0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 3 : i64}
// A0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 3 : i64}
// A0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 2 : i64}
// A0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 2 : i64}
// A0: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 4 : i64, tessel.pp_microbatch = 3 : i64}
// A0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 3 : i64}
// The step's end: the tied embedding's gradient summed with stage 1, outside every action.
// A0: tessel.recv from 1 on @mesh grid_axes = [0] : tensor<32x8xf32>
// A0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] : tensor<32x8xf32>
// A0-NEXT: return

// A1-LABEL: func.func @train_step
// A1-SAME: schedule = "1f1b", stage = 1 : i64
// A1: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 0 : i64, tessel.pp_microbatch = 0 : i64}
// A1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// A1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// A1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 0 : i64}
// A1-NEXT: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 1 : i64}
// A1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// A1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// A1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 1 : i64}
// A1-NEXT: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 2 : i64}
// A1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 2 : i64}
// A1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 2 : i64}
// A1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 2 : i64}
// A1-NEXT: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 3 : i64}
// A1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 3 : i64}
// A1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 3 : i64}
// A1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 4 : i64, tessel.pp_microbatch = 3 : i64}
// A1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] : tensor<32x8xf32>
// A1-NEXT: tessel.recv from 0 on @mesh grid_axes = [0] : tensor<32x8xf32>

// G0-LABEL: func.func @train_step
// G0-SAME: schedule = "gpipe"
// G0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// G0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 0 : i64, tessel.pp_microbatch = 0 : i64}
// G0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// G0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 1 : i64}
// G0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 2 : i64}
// G0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 2 : i64}
// G0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 3 : i64}
// G0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 3 : i64}
// G0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 0 : i64}
// G0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// G0: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 4 : i64, tessel.pp_microbatch = 1 : i64}
// G0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// G0: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 5 : i64, tessel.pp_microbatch = 2 : i64}
// G0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 2 : i64}
// G0: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 6 : i64, tessel.pp_microbatch = 3 : i64}
// G0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 3 : i64}
// G1-LABEL: func.func @train_step
// G1: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 0 : i64, tessel.pp_microbatch = 0 : i64}
// G1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// G1: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 1 : i64}
// G1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// G1: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 2 : i64}
// G1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 2 : i64}
// G1: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 3 : i64}
// G1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 3 : i64}
// G1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// G1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 4 : i64, tessel.pp_microbatch = 0 : i64}
// G1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// G1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 5 : i64, tessel.pp_microbatch = 1 : i64}
// G1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 2 : i64}
// G1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 6 : i64, tessel.pp_microbatch = 2 : i64}
// G1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 3 : i64}
// G1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 7 : i64, tessel.pp_microbatch = 3 : i64}

// Z0-LABEL: func.func @train_step
// Z0-SAME: schedule = "zero-bubble"
// Z0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// Z0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 0 : i64, tessel.pp_microbatch = 0 : i64}
// Z0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// Z0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 1 : i64}
// Z0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 0 : i64}
// Z0: tessel.embedding_grad {{.*}}{tessel.pp_action = "W", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// Z0: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 1 : i64}
// Z0: tessel.embedding_grad {{.*}}{tessel.pp_action = "W", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// Z1-LABEL: func.func @train_step
// Z1: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 0 : i64, tessel.pp_microbatch = 0 : i64}
// Z1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// Z1: tessel.recv from 0 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 1 : i64}
// Z1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "I", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// Z1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 0 : i64}
// Z1: tessel.cross_entropy {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// Z1: tessel.cross_entropy_grad {{.*}}{tessel.pp_action = "I", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}
// Z1: tessel.send %{{.*}} to 0 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 1 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 1 : i64}
// Z1: tessel.matmul {{.*}} transpose_lhs {{.*}}{tessel.pp_action = "W", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 0 : i64}
// Z1: tessel.matmul {{.*}} transpose_lhs {{.*}}{tessel.pp_action = "W", tessel.pp_chunk = 1 : i64, tessel.pp_microbatch = 1 : i64}

// C0-LABEL: func.func @train_step
// C0-SAME: schedule = "{{.*}}ok.csv"
// C0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// C0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 0 : i64, tessel.pp_microbatch = 0 : i64}
// C0: tessel.embedding {{.*}}{tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}
// C0: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 1 : i64}
// C0-NEXT: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 1 : i64, tessel.pp_microbatch = 0 : i64}
// C0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64}
// C0: tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_group = 2 : i64, tessel.pp_microbatch = 1 : i64}
// C0: tessel.embedding_grad {{.*}}{tessel.pp_action = "B", tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64}

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
