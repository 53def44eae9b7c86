// The collectives that move shards (compiler/TesselGatherScatterOps.td): tessel.all_gather,
// tessel.reduce_scatter and tessel.all_to_all, synchronous and as start/wait pairs. The
// first RUN lines round-trip the syntax in the custom and the generic form; every case
// after the first split is an error the verifier must report (shape rules name the sizes).
// RUN: tessel-opt %s -split-input-file -verify-diagnostics | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// On a 2x4 mesh: a group of 4 (tp), a group of 8 (both axes, listed in any order), and the
// asynchronous forms.
// CHECK: shard.grid @mesh_dp2_tp4(shape = 2x4) {tessel.axis_names = ["dp", "tp"]}
// CHECK-LABEL: func.func @sync
// CHECK: tessel.all_gather %{{.*}} on @mesh_dp2_tp4 grid_axes = [1] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh_dp2_tp4 grid_axes = [1, 0] gather_axis = 1 : tensor<2x6xbf16> -> tensor<2x48xbf16>
// CHECK: tessel.reduce_scatter %{{.*}} reduce sum on @mesh_dp2_tp4 grid_axes = [1] scatter_axis = 0 : tensor<8x6xf32> -> tensor<2x6xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce avg on @mesh_dp2_tp4 grid_axes = [0, 1] scatter_axis = 1 : tensor<2x16xf32> -> tensor<2x2xf32>
// CHECK: tessel.all_to_all %{{.*}} on @mesh_dp2_tp4 grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
// CHECK: tessel.all_to_all %{{.*}} on @mesh_dp2_tp4 grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<8x3xf32> -> tensor<8x3xf32>
// Gather-then-trim and its transpose: 7 rows in shards of 2 over 4 ranks (1 row of padding).
// CHECK: tessel.all_gather %{{.*}} on @mesh_dp2_tp4 grid_axes = [1] gather_axis = 0 : tensor<2x6xf32> -> tensor<7x6xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce sum on @mesh_dp2_tp4 grid_axes = [1] scatter_axis = 0 : tensor<7x6xf32> -> tensor<2x6xf32>
// GENERIC: "tessel.all_gather"(%{{.*}}) <{gather_axis = 0 : i64, grid = @mesh_dp2_tp4, grid_axes = array<i16: 1>}> : (tensor<2x6xf32>) -> tensor<8x6xf32>
// GENERIC: "tessel.reduce_scatter"(%{{.*}}) <{grid = @mesh_dp2_tp4, grid_axes = array<i16: 1>, reduce = #tessel<reduce_kind sum>, scatter_axis = 0 : i64}> : (tensor<8x6xf32>) -> tensor<2x6xf32>
// GENERIC: "tessel.all_to_all"(%{{.*}}) <{concat_axis = 0 : i64, grid = @mesh_dp2_tp4, grid_axes = array<i16: 1>, split_axis = 1 : i64}> : (tensor<2x8xf32>) -> tensor<8x2xf32>
shard.grid @mesh_dp2_tp4(shape = 2x4) {tessel.axis_names = ["dp", "tp"]}
func.func @sync(%x: tensor<2x6xf32>, %h: tensor<2x6xbf16>, %p: tensor<8x6xf32>, %q: tensor<2x16xf32>,
                %t: tensor<2x8xf32>, %u: tensor<8x3xf32>) {
  %0 = tessel.all_gather %x on @mesh_dp2_tp4 grid_axes = [1] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
  %1 = tessel.all_gather %h on @mesh_dp2_tp4 grid_axes = [1, 0] gather_axis = 1 : tensor<2x6xbf16> -> tensor<2x48xbf16>
  %2 = tessel.reduce_scatter %p reduce sum on @mesh_dp2_tp4 grid_axes = [1] scatter_axis = 0 : tensor<8x6xf32> -> tensor<2x6xf32>
  %3 = tessel.reduce_scatter %q reduce avg on @mesh_dp2_tp4 grid_axes = [0, 1] scatter_axis = 1 : tensor<2x16xf32> -> tensor<2x2xf32>
  %4 = tessel.all_to_all %t on @mesh_dp2_tp4 grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
  %5 = tessel.all_to_all %u on @mesh_dp2_tp4 grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<8x3xf32> -> tensor<8x3xf32>
  %6 = tessel.all_gather %x on @mesh_dp2_tp4 grid_axes = [1] gather_axis = 0 : tensor<2x6xf32> -> tensor<7x6xf32>
  %7 = tessel.reduce_scatter %6 reduce sum on @mesh_dp2_tp4 grid_axes = [1] scatter_axis = 0 : tensor<7x6xf32> -> tensor<2x6xf32>
  return
}

// CHECK-LABEL: func.func @async
// CHECK: %[[G:.*]] = tessel.all_gather_start %{{.*}} on @mesh_dp2_tp4 grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[S:.*]] = tessel.reduce_scatter_start %{{.*}} reduce avg on @mesh_dp2_tp4 grid_axes = [1] scatter_axis = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
// CHECK: %[[A:.*]] = tessel.all_to_all_start %{{.*}} on @mesh_dp2_tp4 grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<16x2xf32>
// CHECK: tessel.all_to_all_wait %[[A]] : tensor<16x2xf32>
// CHECK: tessel.reduce_scatter_wait %[[S]] : tensor<2x8xf32>
// CHECK: tessel.all_gather_wait %[[G]] : tensor<8x8xf32>
// GENERIC: "tessel.all_gather_start"(%{{.*}}) <{gather_axis = 0 : i64, grid = @mesh_dp2_tp4, grid_axes = array<i16: 0>}> : (tensor<4x8xf32>) -> tensor<8x8xf32>
// GENERIC: "tessel.all_gather_wait"(%{{.*}}) : (tensor<8x8xf32>) -> tensor<8x8xf32>
func.func @async(%w: tensor<4x8xf32>, %g: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<2x8xf32>, tensor<16x2xf32>) {
  %fg = tessel.all_gather_start %w on @mesh_dp2_tp4 grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %fs = tessel.reduce_scatter_start %g reduce avg on @mesh_dp2_tp4 grid_axes = [1] scatter_axis = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  %fa = tessel.all_to_all_start %w on @mesh_dp2_tp4 grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  %a = tessel.all_to_all_wait %fa : tensor<16x2xf32>
  %s = tessel.reduce_scatter_wait %fs : tensor<2x8xf32>
  %y = tessel.all_gather_wait %fg : tensor<8x8xf32>
  return %y, %s, %a : tensor<8x8xf32>, tensor<2x8xf32>, tensor<16x2xf32>
}

// -----

// Shape rules of the synchronous ops.
shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @gather_result(%x: tensor<2x6xf32>) {
  // A result 4 or more rows short of the concatenation drops more than the padding of an
  // uneven dimension (at most group - 1 rows): a whole shard.
  // expected-error @+1 {{result is 4x6, but the input 2x6 over a group of 4 ranks gives 8x6}}
  %0 = tessel.all_gather %x on @mesh_tp4 grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<4x6xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @gather_axis(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{gather_axis 2 is out of range for 2x6}}
  %0 = tessel.all_gather %x on @mesh_tp4 grid_axes = [0] gather_axis = 2 : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @gather_element_type(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = tessel.all_gather %x on @mesh_tp4 grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xbf16>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @scatter_uneven(%x: tensor<6x8xf32>) {
  // An uneven input is padded to 4 x ceil(6 / 4) = 8 rows: shards of 2, not 1.
  // expected-error @+1 {{result is 1x8, but the input 6x8 over a group of 4 ranks gives 2x8}}
  %0 = tessel.reduce_scatter %x reduce sum on @mesh_tp4 grid_axes = [0] scatter_axis = 0 : tensor<6x8xf32> -> tensor<1x8xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @scatter_result(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{result is 8x2, but the input 8x8 over a group of 4 ranks gives 2x8}}
  %0 = tessel.reduce_scatter %x reduce sum on @mesh_tp4 grid_axes = [0] scatter_axis = 0 : tensor<8x8xf32> -> tensor<8x2xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @scatter_axis(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{scatter_axis -1 is out of range for 8x8}}
  %0 = tessel.reduce_scatter %x reduce sum on @mesh_tp4 grid_axes = [0] scatter_axis = -1 : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @scatter_max(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{reduce max is not supported (the runtime has no max collective and a max has no VJP); use sum or avg}}
  %0 = tessel.reduce_scatter %x reduce max on @mesh_tp4 grid_axes = [0] scatter_axis = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @all_to_all_uneven(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{split_axis 1 of 4x6 (size 6) is not divisible by the group size 4 (uneven shards are not supported yet)}}
  %0 = tessel.all_to_all %x on @mesh_tp4 grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x6xf32> -> tensor<16x1xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @all_to_all_result(%x: tensor<4x8xf32>) {
  // The axes swapped in the result type: split 1, concat 0 gives 16x2, not 1x32.
  // expected-error @+1 {{result is 1x32, but the input 4x8 over a group of 4 ranks gives 16x2}}
  %0 = tessel.all_to_all %x on @mesh_tp4 grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<1x32xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @all_to_all_concat_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{concat_axis 3 is out of range for 4x8}}
  %0 = tessel.all_to_all %x on @mesh_tp4 grid_axes = [0] split_axis = 1 concat_axis = 3 : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// The grid reference is checked as for every collective (verifyGridAxes; grid-collectives.mlir
// has every case), for each op.
shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @gather_grid_axis(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{grid axis 1 is out of range for grid @mesh_tp4 of rank 1}}
  %0 = tessel.all_gather %x on @mesh_tp4 grid_axes = [1] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
  return
}

// -----

func.func @scatter_no_grid(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{grid @mesh_tp4 is not a symbol of the module}}
  %0 = tessel.reduce_scatter %x reduce sum on @mesh_tp4 grid_axes = [0] scatter_axis = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @all_to_all_no_axes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{grid_axes must name at least one axis}}
  %0 = tessel.all_to_all %x on @mesh_tp4 grid_axes = [] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @gather_start_twice(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{grid axis 0 appears twice in grid_axes}}
  %f = tessel.all_gather_start %x on @mesh_tp4 grid_axes = [0, 0] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
  %y = tessel.all_gather_wait %f : tensor<8x6xf32>
  return
}

// -----

// The asynchronous forms share the shape rules of the synchronous ones.
shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @scatter_start_uneven(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{result is 1x8, but the input 6x8 over a group of 4 ranks gives 2x8}}
  %f = tessel.reduce_scatter_start %x reduce sum on @mesh_tp4 grid_axes = [0] scatter_axis = 0 : tensor<6x8xf32> -> tensor<1x8xf32>
  %y = tessel.reduce_scatter_wait %f : tensor<1x8xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @scatter_start_max(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{reduce max is not supported}}
  %f = tessel.reduce_scatter_start %x reduce max on @mesh_tp4 grid_axes = [0] scatter_axis = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  %y = tessel.reduce_scatter_wait %f : tensor<2x8xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @all_to_all_start_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result is 4x8, but the input 4x8 over a group of 4 ranks gives 16x2}}
  %f = tessel.all_to_all_start %x on @mesh_tp4 grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %y = tessel.all_to_all_wait %f : tensor<4x8xf32>
  return
}

// -----

// Start/wait pairing: every start is waited for exactly once, by its own kind of wait.
shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @never_waited(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{is never waited for: its in-flight result needs a tessel.all_gather_wait}}
  %f = tessel.all_gather_start %x on @mesh_tp4 grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @waited_twice(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{in-flight result goes to more than one tessel.reduce_scatter_wait}}
  %f = tessel.reduce_scatter_start %x reduce sum on @mesh_tp4 grid_axes = [0] scatter_axis = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  %a = tessel.reduce_scatter_wait %f : tensor<2x8xf32>
  %b = tessel.reduce_scatter_wait %f : tensor<2x8xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @used_in_flight(%x: tensor<4x8xf32>) -> tensor<16x2xf32> {
  // expected-error @+1 {{in-flight result used by 'tessel.gelu'; only tessel.all_to_all_wait may use it}}
  %f = tessel.all_to_all_start %x on @mesh_tp4 grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  %g = tessel.gelu %f : tensor<16x2xf32>
  %y = tessel.all_to_all_wait %f : tensor<16x2xf32>
  return %g : tensor<16x2xf32>
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @wrong_wait(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{in-flight result used by 'tessel.reduce_scatter_wait'; only tessel.all_gather_wait may use it}}
  %f = tessel.all_gather_start %x on @mesh_tp4 grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
  %y = tessel.reduce_scatter_wait %f : tensor<8x6xf32>
  return
}

// -----

func.func @wait_without_start(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{operand is not the result of a tessel.all_gather_start}}
  %y = tessel.all_gather_wait %x : tensor<8x6xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @wait_type(%x: tensor<2x6xf32>) {
  %f = tessel.all_gather_start %x on @mesh_tp4 grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "tessel.all_gather_wait"(%f) : (tensor<8x6xf32>) -> tensor<2x6xf32>
  return
}

// -----

shard.grid @mesh_tp4(shape = 4) {tessel.axis_names = ["tp"]}
func.func @wait_before_start(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{waits before its tessel.all_gather_start}}
  %y = tessel.all_gather_wait %f : tensor<8x6xf32>
  %f = tessel.all_gather_start %x on @mesh_tp4 grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<8x6xf32>
  return
}
