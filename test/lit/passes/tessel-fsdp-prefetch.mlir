// FSDP units and prefetch on a small stack under fsdp = 2 (B = 8 split into 4 rows per rank):
// an input projection emb.weight, two blocks (blocks.0.fc, blocks.1.fc: weight and bias) and
// a head head.weight, with the mean cross-entropy. With units=blocks.* (tessel-fully-shard)
// emb.weight and head.weight are in no block: the root unit.
//   UNITS (tessel-fully-shard units + tessel-reshard-after-forward): each unit's gathers
//     stand together before the unit's first forward use (the root unit's before emb's
//     use, head.weight's with it); in backward each block is gathered again as a whole
//     (its bias too, which the backward pass does not read) right before the first backward
//     reader of one of its parameters; the root unit is not gathered again: the head's input
//     gradient reads the forward gather.
//   PF (tessel-fsdp-prefetch, prefetch=1): the five gather groups (root, blocks.0, blocks.1
//     forward; blocks.1, blocks.0 backward) become start/wait pairs; the waits stay where the
//     gathers were, group k starts where group k - 1 starts (groups 0 and 1 at the first).
//   PF2 (prefetch=2): group 2 (blocks.1) starts with groups 0 and 1, before any wait.
//   OFF (prefetch=0): nothing changes.
// RUN: tessel-opt %s --tessel-shard-batch=parts=2 --tessel-propagate-sharding --tessel-insert-reshards \
// RUN:   "--tessel-fully-shard=axis=fsdp units=blocks.*" --tessel-partition=batch-axes=fsdp \
// RUN:   --tessel-reshard-to-collectives --tessel-autodiff "--tessel-gradient-all-reduce=axis=fsdp group=2" \
// RUN:   --tessel-optimizer=optimizer=sgd --canonicalize --cse --tessel-reshard-after-forward -o %t.mlir
// RUN: FileCheck %s --check-prefix=UNITS --implicit-check-not=tessel.all_gather < %t.mlir
// RUN: tessel-opt %t.mlir --tessel-fsdp-prefetch=prefetch=1 \
// RUN:   | FileCheck %s --check-prefix=PF
// RUN: tessel-opt %t.mlir --tessel-fsdp-prefetch=prefetch=2 | FileCheck %s --check-prefix=PF2
// RUN: tessel-opt %t.mlir --tessel-fsdp-prefetch=prefetch=0 | FileCheck %s --check-prefix=OFF
// Refusals: a unit glob that matches no module (at the plan's fully_shard line), a negative
// prefetch, and the same through the whole pipeline's options.
// RUN: not tessel-opt %s --tessel-shard-batch=parts=2 --tessel-propagate-sharding --tessel-insert-reshards \
// RUN:   "--tessel-fully-shard=axis=fsdp units=decoder.* plan-site=plan.h:7:5" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not tessel-opt %t.mlir --tessel-fsdp-prefetch=prefetch=-1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not tessel-opt %s "--tessel-pipeline=dp=2 batch-axis=fsdp fully-shard=fsdp fsdp-unit=blocks.* fsdp-prefetch=-2" \
// RUN:   2>&1 | FileCheck %s --check-prefix=PIPENEG
// RUN: tessel-opt %s "--tessel-pipeline=dp=2 batch-axis=fsdp fully-shard=fsdp fsdp-unit=blocks.* fsdp-prefetch=1" \
// RUN:   | FileCheck %s --check-prefix=PIPE

// NOMATCH: plan.h:7:5: error: tessel-fully-shard: the unit glob 'decoder.*' matches no module that holds a parameter
// NEG: error: tessel-fsdp-prefetch: prefetch=-1 must be at least 0 (0: gathers stay synchronous)
// PIPENEG: tessel-pipeline: fsdp-prefetch=-2: must be at least 0 (0: off)

// UNITS-LABEL: func.func @forward
// UNITS-COUNT-6: tessel.all_gather
// UNITS-LABEL: func.func @train_step
// UNITS-DAG: %[[E:.*]] = tessel.param "emb.weight" {{.*}}tessel.fsdp_unit = ""
// UNITS-DAG: %[[W0:.*]] = tessel.param "blocks.0.fc.weight" {{.*}}tessel.fsdp_unit = "blocks.0"
// UNITS-DAG: %[[B0:.*]] = tessel.param "blocks.0.fc.bias" {{.*}}tessel.fsdp_unit = "blocks.0"
// UNITS-DAG: %[[W1:.*]] = tessel.param "blocks.1.fc.weight" {{.*}}tessel.fsdp_unit = "blocks.1"
// UNITS-DAG: %[[B1:.*]] = tessel.param "blocks.1.fc.bias" {{.*}}tessel.fsdp_unit = "blocks.1"
// UNITS-DAG: %[[H:.*]] = tessel.param "head.weight" {{.*}}tessel.fsdp_unit = ""
// UNITS: %[[EG:.*]] = tessel.all_gather %[[E]] {{.*}}{tessel.fsdp_unit = ""}
// UNITS-NEXT: %[[HG:.*]] = tessel.all_gather %[[H]] {{.*}}{tessel.fsdp_unit = ""}
// UNITS-NEXT: tessel.matmul %{{.*}}, %[[EG]] transpose_rhs
// UNITS-NEXT: %[[W0G:.*]] = tessel.all_gather %[[W0]] {{.*}}{tessel.fsdp_unit = "blocks.0"}
// UNITS-NEXT: tessel.all_gather %[[B0]] {{.*}}{tessel.fsdp_unit = "blocks.0"}
// UNITS-NEXT: tessel.matmul %{{.*}}, %[[W0G]] transpose_rhs
// UNITS: %[[W1G:.*]] = tessel.all_gather %[[W1]] {{.*}}{tessel.fsdp_unit = "blocks.1"}
// UNITS-NEXT: tessel.all_gather %[[B1]] {{.*}}{tessel.fsdp_unit = "blocks.1"}
// UNITS-NEXT: tessel.matmul %{{.*}}, %[[W1G]] transpose_rhs
// UNITS: tessel.matmul %{{.*}}, %[[HG]] transpose_rhs
// UNITS: tessel.cross_entropy_grad
// The root unit's forward gather is read by the backward pass: no second gather of it.
// UNITS-NEXT: tessel.matmul %{{.*}}, %[[HG]] :
// UNITS: %[[W1B:.*]] = tessel.all_gather %[[W1]] {{.*}}{tessel.fsdp_unit = "blocks.1"}
// UNITS-NEXT: tessel.all_gather %[[B1]] {{.*}}{tessel.fsdp_unit = "blocks.1"}
// UNITS-NEXT: tessel.matmul %{{.*}}, %[[W1B]] :
// UNITS: %[[W0B:.*]] = tessel.all_gather %[[W0]] {{.*}}{tessel.fsdp_unit = "blocks.0"}
// UNITS-NEXT: tessel.all_gather %[[B0]] {{.*}}{tessel.fsdp_unit = "blocks.0"}
// UNITS-NEXT: tessel.matmul %{{.*}}, %[[W0B]] :
// The global norm's gather of the per-rank norms belongs to no unit.
// UNITS: tessel.all_gather %{{.*}} : tensor<1xf32> -> tensor<2xf32>

// PF-LABEL: func.func @train_step
// PF: %[[SE:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = ""} : tensor<8x16xf32>
// PF-NEXT: %[[SH:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = ""} : tensor<4x16xf32>
// PF-NEXT: %[[SW0:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.0"}
// PF-NEXT: %[[SB0:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.0"}
// PF-NEXT: %[[EG:.*]] = tessel.all_gather_wait %[[SE]]
// PF-NEXT: %[[HG:.*]] = tessel.all_gather_wait %[[SH]]
// PF-NEXT: tessel.matmul %{{.*}}, %[[EG]] transpose_rhs
// PF-NEXT: %[[SW1:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.1"}
// PF-NEXT: %[[SB1:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.1"}
// PF-NEXT: %[[W0G:.*]] = tessel.all_gather_wait %[[SW0]]
// PF-NEXT: tessel.all_gather_wait %[[SB0]]
// PF-NEXT: tessel.matmul %{{.*}}, %[[W0G]] transpose_rhs
// PF: %[[SW1B:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.1"}
// PF-NEXT: %[[SB1B:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.1"}
// PF-NEXT: %[[W1G:.*]] = tessel.all_gather_wait %[[SW1]]
// PF-NEXT: tessel.all_gather_wait %[[SB1]]
// PF-NEXT: tessel.matmul %{{.*}}, %[[W1G]] transpose_rhs
// PF: tessel.cross_entropy_grad
// PF-NEXT: tessel.matmul %{{.*}}, %[[HG]] :
// PF: %[[SW0B:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.0"}
// PF-NEXT: %[[SB0B:.*]] = tessel.all_gather_start %{{.*}} {tessel.fsdp_unit = "blocks.0"}
// PF-NEXT: %[[W1B:.*]] = tessel.all_gather_wait %[[SW1B]]
// PF-NEXT: tessel.all_gather_wait %[[SB1B]]
// PF-NEXT: tessel.matmul %{{.*}}, %[[W1B]] :
// PF: %[[W0B:.*]] = tessel.all_gather_wait %[[SW0B]]
// PF-NEXT: tessel.all_gather_wait %[[SB0B]]
// PF-NEXT: tessel.matmul %{{.*}}, %[[W0B]] :
// PF: tessel.all_gather %{{.*}} : tensor<1xf32> -> tensor<2xf32>

// PF2-LABEL: func.func @train_step
// PF2-COUNT-6: tessel.all_gather_start
// PF2-NEXT: tessel.all_gather_wait

// OFF-LABEL: func.func @train_step
// OFF-NOT: tessel.all_gather_start
// OFF: return

// PIPE-LABEL: func.func @train_step
// PIPE: tessel.all_gather_start
// PIPE: tessel.all_gather_wait
shard.grid @mesh(shape = 2) {tessel.axis_names = ["fsdp"]}
func.func @forward(%x: tensor<8x4x16xf32> {tessel.input = "x"}, %t: tensor<8x4xi32> {tessel.input = "t"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %e = tessel.param "emb.weight" {std = 2.000000e-02 : f64} : tensor<16x16xf32>
  %w0 = tessel.param "blocks.0.fc.weight" {std = 2.000000e-02 : f64} : tensor<16x16xf32>
  %b0 = tessel.param "blocks.0.fc.bias" init zeros : tensor<16xf32>
  %w1 = tessel.param "blocks.1.fc.weight" {std = 2.000000e-02 : f64} : tensor<16x16xf32>
  %b1 = tessel.param "blocks.1.fc.bias" init zeros : tensor<16xf32>
  %wh = tessel.param "head.weight" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
  %h = tessel.matmul %x, %e transpose_rhs : (tensor<8x4x16xf32>, tensor<16x16xf32>) -> tensor<8x4x16xf32>
  %h0 = tessel.matmul %h, %w0 transpose_rhs : (tensor<8x4x16xf32>, tensor<16x16xf32>) -> tensor<8x4x16xf32>
  %a0 = tessel.add %h0, %b0 : (tensor<8x4x16xf32>, tensor<16xf32>) -> tensor<8x4x16xf32>
  %g0 = tessel.gelu %a0 : tensor<8x4x16xf32>
  %h1 = tessel.matmul %g0, %w1 transpose_rhs : (tensor<8x4x16xf32>, tensor<16x16xf32>) -> tensor<8x4x16xf32>
  %a1 = tessel.add %h1, %b1 : (tensor<8x4x16xf32>, tensor<16xf32>) -> tensor<8x4x16xf32>
  %g1 = tessel.gelu %a1 : tensor<8x4x16xf32>
  %y = tessel.matmul %g1, %wh transpose_rhs : (tensor<8x4x16xf32>, tensor<8x16xf32>) -> tensor<8x4x8xf32>
  %l = tessel.cross_entropy %y, %t : (tensor<8x4x8xf32>, tensor<8x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
