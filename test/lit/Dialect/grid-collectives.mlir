// Collectives name the plan's mesh: a `shard.grid` symbol and a list of its axes
// (compiler/TesselCommOps.td). The first RUN lines round-trip the syntax in the custom and
// the generic form; the last checks that the verifier rejects every way the grid reference
// can be wrong, one case per split.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// A 1-D data-parallel mesh: the all-reduce spans its only axis.
// CHECK: shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
// CHECK-LABEL: func.func @dp
// CHECK: tessel.all_reduce_start %{{.*}} reduce avg on @mesh grid_axes = [0] bucket 0 params ["w"] : tensor<4xf32>
// GENERIC: "shard.grid"() <{shape = array<i64: 2>, sym_name = "mesh"}> {tessel.axis_names = ["dp"]}
// GENERIC: "tessel.all_reduce_start"(%{{.*}}) <{bucket = 0 : i64, grid = @mesh, grid_axes = array<i16: 0>, params = ["w"], reduce = #tessel<reduce_kind avg>}>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @dp(%x: tensor<4xf32>) -> tensor<4xf32> {
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["w"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A 2-D mesh (dp outermost, tp fastest): a reduction over tp only, one over both axes, and
// the axes listed in any order.
// CHECK: shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["dp", "tp"]}
// CHECK-LABEL: func.func @dp_tp
// CHECK: tessel.all_reduce_start %{{.*}} reduce max on @mesh grid_axes = [1] bucket 0
// CHECK: tessel.all_reduce_start %{{.*}} reduce sum on @mesh grid_axes = [1, 0] bucket 1
shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["dp", "tp"]}
func.func @dp_tp(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %f = tessel.all_reduce_start %x reduce max on @mesh grid_axes = [1] bucket 0 params ["row_max"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  %g = tessel.all_reduce_start %x reduce sum on @mesh grid_axes = [1, 0] bucket 1 params ["norm"] : tensor<4xf32>
  %s = tessel.all_reduce_wait %g : tensor<4xf32>
  return %r, %s : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @unknown_grid(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid @mesh is not a symbol of the module}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

func.func private @mesh()
func.func @not_a_grid(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid @mesh names a 'func.func', not a shard.grid}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @axis_out_of_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid axis 2 is out of range for grid @mesh of rank 2}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [2] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @axis_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid axis -1 is out of range for grid @mesh of rank 2}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [-1] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @axis_twice(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid axis 1 appears twice in grid_axes}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [1, 1] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @no_axes(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid_axes must name at least one axis}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2x?) {tessel.axis_names = ["dp", "tp"]}
func.func @dynamic_grid(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid @mesh must have static sizes >= 1 (the group size derives from it)}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @unnamed_axes(%x: tensor<4xf32>) {
  // expected-error @+1 {{grid @mesh has no tessel.axis_names: the runtime needs a name for each axis}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

// The axis names are checked on the grid (TesselDialect.cpp): one per axis, non-empty, unique.
// expected-error @+1 {{'tessel.axis_names' must name each of the 2 axes of the grid with a non-empty string, got ["dp", ""]}}
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", ""]}

// -----

// expected-error @+1 {{'tessel.axis_names' must name each of the 2 axes of the grid with a non-empty string, got ["dp"]}}
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp"]}

// -----

// expected-error @+1 {{'tessel.axis_names' must name each of the 1 axes of the grid with a non-empty string, got [0]}}
shard.grid @mesh(shape = 2) {tessel.axis_names = [0]}

// -----

// expected-error @+1 {{'tessel.axis_names' names axis "dp" twice}}
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "dp"]}

// -----

// The names belong on a grid only.
// expected-error @+1 {{'tessel.axis_names' is not a tessel attribute of a function}}
func.func @f() attributes {tessel.axis_names = ["dp"]} {
  return
}
