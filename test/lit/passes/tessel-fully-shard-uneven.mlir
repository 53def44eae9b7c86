// --tessel-fully-shard (passes/FullyShard.cpp) with first dimensions fsdp = 3 does not divide:
// a Linear layer of 7 outputs (weight [7, 16], bias [7]) under fsdp = 3, the batch of 6 split
// over it. Each parameter is stored in shards of ceil(7 / 3) = 3 rows, the last holding row 6
// and 2 rows of padding (recorded in #tessel.sharding, so that the runtime starts them at zero
// and the export drops them). Forward: the all-gather of the [3, 16] shards is trimmed to the
// 7 rows ([9, 16] gathered, the padding dropped: gather-then-trim). Backward: its transpose
// reduce-scatters the [7, 16] gradient into [3, 16] shards (padded with zeros before the
// scatter), averaged over fsdp; the optimizer updates the padded shards, whose gradient
// padding is zero.
// RUN: tessel-opt %s -split-input-file --tessel-shard-batch=parts=3 --tessel-propagate-sharding \
// RUN:   --tessel-insert-reshards --tessel-fully-shard=axis=fsdp --tessel-partition=batch-axes=fsdp \
// RUN:   --tessel-reshard-to-collectives --tessel-autodiff --tessel-gradient-all-reduce="axis=fsdp group=3" \
// RUN:   --tessel-optimizer -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: %[[W:.*]] = tessel.param "fc.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []], padding = [2, 0]>]} : tensor<3x16xf32>
// CHECK: %[[B:.*]] = tessel.param "fc.bias" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0]], padding = [2]>]} : tensor<3xf32>
// CHECK-NEXT: %[[WG:.*]] = tessel.all_gather %[[W]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<3x16xf32> -> tensor<7x16xf32>
// CHECK-NEXT: tessel.matmul %{{.*}}, %[[WG]] transpose_rhs : (tensor<2x4x16xf32>, tensor<7x16xf32>) -> tensor<2x4x7xf32>
// CHECK-NEXT: %[[BG:.*]] = tessel.all_gather %[[B]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<7xf32>
// CHECK: return

// CHECK-LABEL: func.func @train_step
// CHECK: tessel.param "fc.weight:exp_avg" state init  zeros {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []], padding = [2, 0]>]} : tensor<3x16xf32>
// CHECK: %[[DB:.*]] = tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [0] scatter_axis = 0 : tensor<7xf32> -> tensor<3xf32>
// CHECK: %[[DW:.*]] = tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [0] scatter_axis = 0 : tensor<7x16xf32> -> tensor<3x16xf32>
// CHECK: tessel.global_norm %[[DW]], %[[DB]] : tensor<3x16xf32>, tensor<3xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<1xf32> -> tensor<3xf32>
// CHECK: tessel.adamw %{{.*}}, %{{.*}} : tensor<3x16xf32>
// CHECK: tessel.adamw %{{.*}}, %{{.*}} : tensor<3xf32>
// CHECK: return
shard.grid @mesh(shape = 3) {tessel.axis_names = ["fsdp"]}
func.func @forward(%x: tensor<6x4x16xf32> {tessel.input = "x"}, %t: tensor<6x4xi32> {tessel.input = "t"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<7x16xf32>
  %b = tessel.param "fc.bias" init zeros : tensor<7xf32>
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<6x4x16xf32>, tensor<7x16xf32>) -> tensor<6x4x7xf32>
  %yb = tessel.add %y, %b : (tensor<6x4x7xf32>, tensor<7xf32>) -> tensor<6x4x7xf32>
  %l = tessel.cross_entropy %yb, %t : (tensor<6x4x7xf32>, tensor<6x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Padding is not nested: a first dimension already split over tp (the column-parallel fc,
// 8 rows over tp = 2) and then over fsdp = 3 would need padding inside each tensor-parallel
// block; it is refused at the parameter, naming the 6 = tp x fsdp that must divide it.
// RUN: not tessel-opt %s -split-input-file --tessel-shard-batch=parts=3 --tessel-tensor-parallel \
// RUN:   --tessel-propagate-sharding --tessel-insert-reshards --tessel-fully-shard=axis=fsdp 2>&1 \
// RUN: | FileCheck %s --check-prefix=NESTED
// NESTED: error: parameter 'fc.weight': dimension 0 has 8 rows, already split {tp, -}; fully sharding it over fsdp=3 as well needs 6 to divide it (a dimension split over two axes is not padded): choose degrees whose product divides it
shard.grid @mesh(shape = 3x2) {tessel.axis_names = ["fsdp", "tp"]}
func.func @forward(%x: tensor<6x4x16xf32> {tessel.input = "x"}, %t: tensor<6x4xi32> {tessel.input = "t"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %w1 = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
  %w2 = tessel.param "proj.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %h = tessel.matmul %x, %w1 transpose_rhs : (tensor<6x4x16xf32>, tensor<8x16xf32>) -> tensor<6x4x8xf32>
  %g = tessel.gelu %h : tensor<6x4x8xf32>
  %y = tessel.matmul %g, %w2 transpose_rhs : (tensor<6x4x8xf32>, tensor<16x8xf32>) -> tensor<6x4x16xf32>
  %l = tessel.cross_entropy %y, %t : (tensor<6x4x16xf32>, tensor<6x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
