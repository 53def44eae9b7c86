// --tessel-split-stages (passes/SplitStages.cpp) refuses a plan it cannot cut, at the plan's
// pipeline() call (plan-site) when the plan is at fault, naming the cause. The model has 4
// layers (blocks.0 .. blocks.3) and a 2-stage pipeline axis "pp".
// More chunks (2 stages x 3 virtual stages) than layers:
// RUN: not tessel-opt %s "-tessel-split-stages=stage=0 virtual-stages=3 plan-site=train.cpp:12:3" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// CHUNKS: train.cpp:12:3: error: the pipeline has 6 stages (pp=2 x 3 virtual stages) but the model has only 4 layers ('blocks.N'); each stage needs at least one
// A range that leaves a gap, one that overlaps, too few ranges, ranges ending early, and
// text that is no range:
// RUN: not tessel-opt %s "-tessel-split-stages=stage=0 layer-ranges=0-1,3-3 plan-site=train.cpp:12:3" 2>&1 | FileCheck %s --check-prefix=GAP
// GAP: train.cpp:12:3: error: the stages' layer ranges must cover layers 0-3 in order, each range FIRST-LAST with FIRST <= LAST; range 1 is 3-3 (expected to start at 2)
// RUN: not tessel-opt %s "-tessel-split-stages=stage=0 layer-ranges=0-2,1-3" 2>&1 | FileCheck %s --check-prefix=OVERLAP
// OVERLAP: error: the stages' layer ranges must cover layers 0-3 in order, each range FIRST-LAST with FIRST <= LAST; range 1 is 1-3 (expected to start at 3)
// RUN: not tessel-opt %s "-tessel-split-stages=stage=0 layer-ranges=0-3" 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: error: the stages list 1 layer ranges but the pipeline has 2 stages
// RUN: not tessel-opt %s "-tessel-split-stages=stage=0 layer-ranges=0-1,2-2" 2>&1 | FileCheck %s --check-prefix=SHORT
// SHORT: error: the stages' layer ranges end at layer 2 but the model has 4 layers
// RUN: not tessel-opt %s "-tessel-split-stages=stage=0 layer-ranges=a-b" 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT: error: tessel-split-stages: layer-ranges 'a-b' is not a list of FIRST-LAST ranges
// A mesh without the pipeline axis, and a stage outside it (the stage's number is printed):
// RUN: not tessel-opt %s "-tessel-split-stages=stage=0 axis=tp" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: tessel-split-stages: the mesh has no axis 'tp'
// RUN: not tessel-opt %s -tessel-split-stages=stage=2 2>&1 | FileCheck %s --check-prefix=STAGE
// STAGE: error: tessel-split-stages: stage 2 is outside the 2 stages of axis 'pp'
// Wrong stage: after autodiff (@train_step exists), and a second run.
// RUN: not tessel-opt %s -tessel-autodiff -tessel-split-stages=stage=0 2>&1 | FileCheck %s --check-prefix=LATE
// LATE: error: tessel-split-stages: @train_step already exists (tessel-autodiff has run); it runs once, on @forward before tessel-autodiff
// RUN: not tessel-opt %s -tessel-split-stages=stage=1 -tessel-split-stages=stage=1 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: tessel-split-stages: @forward is already one pipeline stage
shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @forward(%tok: tensor<2x4xi32> {tessel.input = "tokens"}, %tgt: tensor<2x4xi32> {tessel.input = "targets"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("wte")
  %w0 = tessel.param "blocks.0.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.0.fc")
  %w1 = tessel.param "blocks.1.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.1.fc")
  %w2 = tessel.param "blocks.2.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.2.fc")
  %w3 = tessel.param "blocks.3.fc.weight" {std = 2.0e-02 : f64} : tensor<8x8xf32> loc("blocks.3.fc")
  %r = tessel.embedding %wte, %tok : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32> loc("wte")
  %h0 = tessel.matmul %r, %w0 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0.fc")
  %r0 = tessel.add %r, %h0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.0")
  %h1 = tessel.matmul %r0, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1.fc")
  %r1 = tessel.add %r0, %h1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.1")
  %h2 = tessel.matmul %r1, %w2 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2.fc")
  %r2 = tessel.add %r1, %h2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.2")
  %h3 = tessel.matmul %r2, %w3 transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("blocks.3.fc")
  %r3 = tessel.add %r2, %h3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("blocks.3")
  %lg = tessel.matmul %r3, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("head")
  %l = tessel.cross_entropy %lg, %tgt : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
