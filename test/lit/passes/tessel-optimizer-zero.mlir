// --tessel-optimizer with shard-state-axis (passes/Optimizer.cpp), ZeRO-1 and ZeRO-2: each
// parameter of rank >= 1 stays replicated, its AdamW state is stored as dimension-0 blocks
// over the axis (tessel.shardings), and the rank updates its block: the parameter's rows at
// its mesh coordinate (tessel.dynamic_slice), the gradient's (sliced at stage 1; at stage 2
// the gradient is the block already), the state blocks; the updated blocks are all-gathered
// into the new parameter. A scalar is updated whole. The global norm counts a whole
// (all-reduced) gradient as it is and a gradient block per rank, the ranks' norms gathered.
// RUN: tessel-opt %s -split-input-file -tessel-optimizer=shard-state-axis=fsdp -verify-diagnostics | FileCheck %s

shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["dp", "fsdp"]}
// Stage 1: whole gradients.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
// CHECK-NEXT: %[[S:.*]] = tessel.param "scale" init ones : tensor<f32>
// CHECK-NEXT: %[[WM:.*]] = tessel.param "fc.weight:exp_avg" state init  zeros {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1], []]>]} : tensor<4x8xf32>
// CHECK-NEXT: %[[WV:.*]] = tessel.param "fc.weight:exp_avg_sq" state init  zeros {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1], []]>]} : tensor<4x8xf32>
// CHECK-NEXT: %[[SM:.*]] = tessel.param "scale:exp_avg" state init zeros : tensor<f32>
// CHECK-NEXT: %[[SV:.*]] = tessel.param "scale:exp_avg_sq" state init zeros : tensor<f32>
// CHECK: %[[GW:.*]] = tessel.constant 2.000000e+00 : tensor<16x8xf32>
// CHECK-NEXT: %[[GS:.*]] = tessel.constant 4.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[NORM:.*]] = tessel.global_norm %[[GW]], %[[GS]] : tensor<16x8xf32>, tensor<f32>
// CHECK-NEXT: %[[COEF:.*]] = tessel.clip_coefficient %[[NORM]]
// CHECK-NEXT: %[[OFF:.*]] = tessel.mesh_coordinate on @mesh grid_axes = [1] stride 4 : tensor<i32>
// CHECK-NEXT: %[[WB:.*]] = tessel.dynamic_slice %[[W]][%[[OFF]]] : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[GB:.*]] = tessel.dynamic_slice %[[GW]][%[[OFF]]] : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[CW:.*]] = tessel.mul %[[GB]], %[[COEF]] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[NW:.*]], %[[NWM:.*]], %[[NWV:.*]] = tessel.adamw %[[WB]], %[[CW]], %[[WM]], %[[WV]], {{.*}} decay : tensor<4x8xf32>
// CHECK-NEXT: %[[AW:.*]] = tessel.all_gather %[[NW]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: tessel.assign "fc.weight", %[[AW]] : tensor<16x8xf32>
// CHECK-NEXT: tessel.assign "fc.weight:exp_avg", %[[NWM]] : tensor<4x8xf32>
// CHECK-NEXT: tessel.assign "fc.weight:exp_avg_sq", %[[NWV]] : tensor<4x8xf32>
// CHECK-NEXT: %[[CS:.*]] = tessel.mul %[[GS]], %[[COEF]]
// CHECK-NEXT: %[[NS:.*]], %{{.*}}, %{{.*}} = tessel.adamw %[[S]], %[[CS]], %[[SM]], %[[SV]]
// CHECK-NEXT: tessel.assign "scale", %[[NS]] : tensor<f32>
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"},
        tensor<f32> {tessel.grad = "scale"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %s = tessel.param "scale" init ones : tensor<f32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<16x8xf32>
  %gs = tessel.constant 4.0 : tensor<f32>
  return %l, %gw, %gs : tensor<f32>, tensor<16x8xf32>, tensor<f32>
}

// -----

shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["dp", "fsdp"]}
// Stage 2: the gradient is this rank's block (reduce-scattered); its norm is gathered over
// fsdp, the scalar's counted whole.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
// CHECK: %[[GW:.*]] = tessel.constant 2.000000e+00 : tensor<4x8xf32>
// CHECK-NEXT: %[[GS:.*]] = tessel.constant 4.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[LOCAL:.*]] = tessel.global_norm %[[GW]] : tensor<4x8xf32>
// CHECK-NEXT: %[[ONE:.*]] = tessel.reshape %[[LOCAL]]
// CHECK-NEXT: %[[ALL:.*]] = tessel.all_gather %[[ONE]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[NORM:.*]] = tessel.global_norm %[[GS]], %[[ALL]] : tensor<f32>, tensor<4xf32>
// CHECK-NEXT: %[[COEF:.*]] = tessel.clip_coefficient %[[NORM]]
// CHECK-NEXT: %[[OFF:.*]] = tessel.mesh_coordinate on @mesh grid_axes = [1] stride 4 : tensor<i32>
// CHECK-NEXT: %[[WB:.*]] = tessel.dynamic_slice %[[W]][%[[OFF]]] : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[CW:.*]] = tessel.mul %[[GW]], %[[COEF]] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[NW:.*]], %{{.*}}, %{{.*}} = tessel.adamw %[[WB]], %[[CW]]
// CHECK-NEXT: %[[AW:.*]] = tessel.all_gather %[[NW]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: tessel.assign "fc.weight", %[[AW]] : tensor<16x8xf32>
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<4x8xf32> {tessel.grad = "fc.weight"},
        tensor<f32> {tessel.grad = "scale"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %s = tessel.param "scale" init ones : tensor<f32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<4x8xf32>
  %gs = tessel.constant 4.0 : tensor<f32>
  return %l, %gw, %gs : tensor<f32>, tensor<4x8xf32>, tensor<f32>
}

// -----

shard.grid @mesh(shape = 4) {tessel.axis_names = ["fsdp"]}
// A gradient that is neither the parameter nor its block.
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<8x8xf32> {tessel.grad = "fc.weight"}) {
  // expected-error @+1 {{tessel-optimizer: the gradient of 'fc.weight' is 'tensor<8x8xf32>', not the parameter's type 'tensor<16x8xf32>' nor its block's 'tensor<4x8xf32>'}}
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<8x8xf32>
  return %l, %gw : tensor<f32>, tensor<8x8xf32>
}

// -----

shard.grid @mesh(shape = 3) {tessel.axis_names = ["fsdp"]}
// Uneven blocks are refused at the parameter (stage 1: nothing reduce-scattered them yet).
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"}) {
  // expected-error @+1 {{parameter 'fc.weight': dimension 0 has 16 rows, which fsdp=3 does not divide}}
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<16x8xf32>
  return %l, %gw : tensor<f32>, tensor<16x8xf32>
}
