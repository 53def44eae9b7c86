// --tessel-reduce-scatter-gradients (passes/ReduceScatterGradients.cpp), ZeRO-2: each gradient
// of a parameter replicated over the axis (rank >= 1) becomes a reduce-scatter sum of its
// dimension 0 over the axis, the block of the parameter whose optimizer state the rank holds;
// a scalar and autodiff's explicit zero are left alone. Then --tessel-gradient-all-reduce with
// scattered-axis makes the block's sum the mean over the axis and all-reduces it over the
// other batch axis only (HSDP's replicas), while a whole gradient is all-reduced over both.
// RUN: tessel-opt %s -split-input-file -tessel-reduce-scatter-gradients=axis=fsdp -verify-diagnostics | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-reduce-scatter-gradients=axis=fsdp \
// RUN:   -tessel-gradient-all-reduce="axis=dp,fsdp group=8 scattered-axis=fsdp" -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=MEAN
// The whole pipeline's options: a ZeRO stage that does not exist, an unknown reduce-scatter mode.
// RUN: not tessel-opt %s -split-input-file --tessel-pipeline="zero-stage=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not tessel-opt %s -split-input-file --tessel-pipeline="fsdp-reduce-scatter=never" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MODE

// STAGE: error: tessel-pipeline: zero-stage=4: ZeRO stage 4 does not exist (stages are 1, 2 and 3)
// MODE: error: tessel-pipeline: fsdp-reduce-scatter=never: must be every-microstep or last-microstep

shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["dp", "fsdp"]}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<4x8xf32> {tessel.grad = "fc.weight"}, tensor<4xf32> {tessel.grad = "fc.bias"}, tensor<f32> {tessel.grad = "scale"}, tensor<4xf32> {tessel.grad = "unused"})
// Each reduce-scatter right after its gradient (the whole gradient dies there).
// CHECK: %[[GW:.*]] = tessel.constant 2.000000e+00 : tensor<16x8xf32>
// CHECK-NEXT: %[[RW:.*]] = tessel.reduce_scatter %[[GW]] reduce sum on @mesh grid_axes = [1] scatter_axis = 0 : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[GB:.*]] = tessel.constant 3.000000e+00 : tensor<16xf32>
// CHECK-NEXT: %[[RB:.*]] = tessel.reduce_scatter %[[GB]] reduce sum on @mesh grid_axes = [1] scatter_axis = 0 : tensor<16xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[GS:.*]] = tessel.constant 4.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: return %{{.*}}, %[[RW]], %[[RB]], %[[GS]], %[[Z]]

// MEAN-LABEL: func.func @train_step
// MEAN: %[[RW:.*]] = tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [1] scatter_axis = 0 : tensor<16x8xf32> -> tensor<4x8xf32>
// MEAN: %[[RB:.*]] = tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [1] scatter_axis = 0 : tensor<16xf32> -> tensor<4xf32>
// MEAN: tessel.all_reduce_start %[[RW]] reduce avg on @mesh grid_axes = [0] bucket 0 params ["fc.weight"] : tensor<4x8xf32>
// MEAN: tessel.all_reduce_start %[[RB]] reduce avg on @mesh grid_axes = [0] bucket 1 params ["fc.bias"] : tensor<4xf32>
// MEAN: tessel.all_reduce_start %{{.*}} reduce avg on @mesh grid_axes = [0, 1] bucket 2 params ["scale"] : tensor<f32>
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"},
        tensor<16xf32> {tessel.grad = "fc.bias"}, tensor<f32> {tessel.grad = "scale"},
        tensor<4xf32> {tessel.grad = "unused"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %s = tessel.param "scale" init ones : tensor<f32>
  %u = tessel.param "unused" init zeros : tensor<4xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<16x8xf32>
  %gb = tessel.constant 3.0 : tensor<16xf32>
  %gs = tessel.constant 4.0 : tensor<f32>
  %gu = tessel.constant 0.0 : tensor<4xf32>
  return %l, %gw, %gb, %gs, %gu : tensor<f32>, tensor<16x8xf32>, tensor<16xf32>, tensor<f32>, tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 3) {tessel.axis_names = ["fsdp"]}
// An uneven first dimension: 16 rows over fsdp=3.
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "fc.bias"}) {
  // expected-error @+1 {{parameter 'fc.bias': dimension 0 has 16 rows, which fsdp=3 does not divide; ZeRO stages 1 and 2 of an uneven first dimension are not supported yet}}
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  return %l, %g : tensor<f32>, tensor<16xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["fsdp"]}
// A parameter already stored split over the axis (ZeRO-3) has no ZeRO-2 blocks.
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "fc.bias"}) {
  // expected-error @+1 {{tessel-reduce-scatter-gradients: parameter 'fc.bias' is already split}}
  %b = tessel.param "fc.bias" init zeros {tessel.shardings = [#tessel.sharding<@mesh, [[0]]>]} : tensor<8xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<8xf32>
  return %l, %g : tensor<f32>, tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["fsdp"]}
// Wrong stage: after gradient accumulation (its microsteps would accumulate whole gradients).
// expected-error @+1 {{tessel-reduce-scatter-gradients: }}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "fc.bias"}) {
  %b = tessel.param "fc.bias" init zeros : tensor<8xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<8xf32>
  return %l, %g : tensor<f32>, tensor<8xf32>
}
func.func @accumulate_step(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
