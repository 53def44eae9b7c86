// --tessel-gradient-accumulation (passes/GradientAccumulation.cpp) with k = 2 microsteps of a
// reduce-scattered gradient (ZeRO-2/3: a sum of the ranks' gradients into this rank's block).
// every-microstep (the default, EVERY): each microstep reduce-scatters and accumulates the
// block, [4] here. last-microstep (LAST): @accumulate_step accumulates the whole local
// gradient, [16], with no collective, and @train_step reduce-scatters grad_accum + g once;
// under mixed precision (the second case, cast(reduce_scatter(bf16))) the whole gradient is
// cast to f32 first, so the microsteps and the ranks are summed in f32.
// RUN: tessel-opt %s -split-input-file -tessel-gradient-accumulation=microsteps=2 | FileCheck %s --check-prefix=EVERY
// RUN: tessel-opt %s -split-input-file -tessel-gradient-accumulation="microsteps=2 reduce-scatter=last-microstep" \
// RUN:   | FileCheck %s --check-prefix=LAST
// RUN: not tessel-opt %s -split-input-file -tessel-gradient-accumulation="microsteps=2 reduce-scatter=never" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD

// BAD: error: tessel-gradient-accumulation: reduce-scatter=never (expected every-microstep or last-microstep)

shard.grid @mesh(shape = 4) {tessel.axis_names = ["fsdp"]}
// EVERY-LABEL: func.func @train_step
// EVERY-SAME: tensor<4xf32> {tessel.grad = "w"}
// EVERY: %[[A:.*]] = tessel.param "w:grad_accum" state init zeros : tensor<4xf32>
// EVERY: %[[R:.*]] = tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<4xf32>
// EVERY-NEXT: %[[S:.*]] = tessel.add %[[A]], %[[R]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// EVERY-NEXT: %[[M:.*]] = tessel.scale %[[S]], 5.000000e-01 : tensor<4xf32>
// EVERY-LABEL: func.func @accumulate_step
// EVERY: %[[A2:.*]] = tessel.param "w:grad_accum" state init zeros : tensor<4xf32>
// EVERY: %[[R2:.*]] = tessel.reduce_scatter
// EVERY-NEXT: %[[S2:.*]] = tessel.add %[[A2]], %[[R2]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// EVERY-NEXT: tessel.assign "w:grad_accum", %[[S2]]

// LAST-LABEL: func.func @train_step
// LAST-SAME: tensor<4xf32> {tessel.grad = "w"}
// LAST: %[[A:.*]] = tessel.param "w:grad_accum" state init zeros : tensor<16xf32>
// LAST: %[[G:.*]] = tessel.scale %{{.*}}, 2.0
// LAST-NEXT: %[[S:.*]] = tessel.add %[[A]], %[[G]] : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
// LAST-NEXT: %[[R:.*]] = tessel.reduce_scatter %[[S]] reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<4xf32>
// LAST-NEXT: %[[M:.*]] = tessel.scale %[[R]], 5.000000e-01 : tensor<4xf32>
// LAST-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<16xf32>
// LAST-NEXT: tessel.assign "w:grad_accum", %[[Z]] : tensor<16xf32>
// LAST-NEXT: return %{{.*}}, %[[M]] : tensor<f32>, tensor<4xf32>
// LAST-LABEL: func.func @accumulate_step
// LAST-NOT: tessel.reduce_scatter
// LAST: %[[S2:.*]] = tessel.add %{{.*}}, %{{.*}} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
// LAST-NEXT: tessel.assign "w:grad_accum", %[[S2]] : tensor<16xf32>
// LAST-NOT: tessel.reduce_scatter
// LAST: return
func.func @train_step(%x: tensor<16xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<4xf32> {tessel.grad = "w"}) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<4xf32>
  %l = tessel.reduce_mean %x [0] : tensor<16xf32> -> tensor<f32>
  %g = tessel.scale %x, 2.0 : tensor<16xf32>
  %r = tessel.reduce_scatter %g reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<4xf32>
  return %l, %r : tensor<f32>, tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 4) {tessel.axis_names = ["fsdp"]}
// EVERY-LABEL: func.func @train_step
// EVERY: %[[A:.*]] = tessel.param "w:grad_accum" state init zeros : tensor<4xf32>
// EVERY: %[[R:.*]] = tessel.reduce_scatter %{{.*}} : tensor<16xbf16> -> tensor<4xbf16>
// EVERY-NEXT: %[[C:.*]] = tessel.cast %[[R]] : tensor<4xbf16> -> tensor<4xf32>

// LAST-LABEL: func.func @train_step
// LAST: %[[A:.*]] = tessel.param "w:grad_accum" state init zeros : tensor<16xf32>
// LAST: %[[G:.*]] = tessel.scale %{{.*}}, 2.0{{.*}} : tensor<16xbf16>
// LAST-NEXT: %[[W:.*]] = tessel.cast %[[G]] : tensor<16xbf16> -> tensor<16xf32>
// LAST-NEXT: %[[S:.*]] = tessel.add %[[A]], %[[W]] : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
// LAST-NEXT: %[[R:.*]] = tessel.reduce_scatter %[[S]] reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<4xf32>
// LAST-NEXT: tessel.scale %[[R]], 5.000000e-01 : tensor<4xf32>
// LAST-LABEL: func.func @accumulate_step
// LAST-NOT: tessel.reduce_scatter
// LAST: return
func.func @train_step(%x: tensor<16xbf16> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<4xf32> {tessel.grad = "w"}) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<4xf32>
  %xf = tessel.cast %x : tensor<16xbf16> -> tensor<16xf32>
  %l = tessel.reduce_mean %xf [0] : tensor<16xf32> -> tensor<f32>
  %g = tessel.scale %x, 2.0 : tensor<16xbf16>
  %r = tessel.reduce_scatter %g reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xbf16> -> tensor<4xbf16>
  %c = tessel.cast %r : tensor<4xbf16> -> tensor<4xf32>
  return %l, %c : tensor<f32>, tensor<4xf32>
}
