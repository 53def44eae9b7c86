// --tessel-fully-shard (passes/FullyShard.cpp) in its pipeline, on a Linear layer and the mean
// cross-entropy under HSDP: the batch B = 8 split over dp = 2 and fsdp = 2 (2 rows per
// rank), every parameter stored split on dimension 0 over fsdp. Forward: each parameter is
// all-gathered over fsdp right before its first use. Backward: autodiff transposes each
// gather into a reduce-scatter over fsdp, which tessel-gradient-all-reduce makes an average
// (the ranks' gradients are means over their rows), then the shards are averaged over dp
// (the replicas). The optimizer's state is laid out like the parameter, and global-norm
// clipping gathers the per-rank norms of the shards over fsdp. Nothing else communicates.
// RUN: tessel-opt %s -split-input-file --tessel-shard-batch=parts=4 --tessel-propagate-sharding \
// RUN:   --tessel-insert-reshards --tessel-fully-shard=axis=fsdp --tessel-partition=batch-axes=dp,fsdp \
// RUN:   --tessel-reshard-to-collectives --tessel-autodiff --tessel-gradient-all-reduce="axis=dp,fsdp group=4" \
// RUN:   --tessel-optimizer -verify-diagnostics \
// RUN: | FileCheck %s --implicit-check-not=tessel.all_reduce{{[^_]}} --implicit-check-not=tessel.all_reduce_start \
// RUN:   --implicit-check-not=tessel.all_gather \
// RUN:   --implicit-check-not=tessel.reduce_scatter --implicit-check-not=tessel.all_to_all

// Mixed precision: the bf16 casts of the shards are gathered (half the bytes), and each
// gradient is cast to f32 before its reduce-scatter, so the ranks' parts are summed in f32.
// RUN: tessel-opt %s -split-input-file --tessel-shard-batch=parts=4 --tessel-propagate-sharding \
// RUN:   --tessel-insert-reshards --tessel-fully-shard=axis=fsdp --tessel-partition=batch-axes=dp,fsdp \
// RUN:   --tessel-reshard-to-collectives --tessel-mixed-precision --tessel-autodiff \
// RUN:   --tessel-gradient-all-reduce="axis=dp,fsdp group=4" -verify-diagnostics | FileCheck %s --check-prefix=BF16
// BF16-LABEL: func.func @train_step
// BF16: tessel.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
// BF16: tessel.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<4xbf16> -> tensor<8xbf16>
// BF16: %[[DB16:.*]] = tessel.cast %{{.*}} : tensor<8xbf16> -> tensor<8xf32>
// BF16-NEXT: tessel.reduce_scatter %[[DB16]] reduce avg on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
// BF16: %[[DW16:.*]] = tessel.cast %{{.*}} : tensor<8x16xbf16> -> tensor<8x16xf32>
// BF16-NEXT: tessel.reduce_scatter %[[DW16]] reduce avg on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// BF16-NOT: tessel.reduce_scatter

// The whole pipeline takes the same plan (tessel-pipeline's batch-axis and fully-shard), and
// refuses a fully sharded axis that does not split the batch.
// RUN: tessel-opt %s -split-input-file "--tessel-pipeline=dp=4 batch-axis=dp,fsdp fully-shard=fsdp" \
// RUN:   -verify-diagnostics | FileCheck %s --check-prefix=PIPE
// PIPE-LABEL: func.func @train_step
// PIPE: tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// RUN: not tessel-opt %s -split-input-file "--tessel-pipeline=dp=4 batch-axis=dp,fsdp fully-shard=tp" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OPTION
// OPTION: tessel-pipeline: fully-shard=tp: must be one of the batch axes (batch-axis=dp,fsdp, dp=4)

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x16xf32> {tessel.input = "x"}
// CHECK: %[[W:.*]] = tessel.param "fc.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1], []]>]} : tensor<4x16xf32>
// CHECK: %[[B:.*]] = tessel.param "fc.bias" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1]]>]} : tensor<4xf32>
// CHECK-NEXT: %[[WG:.*]] = tessel.all_gather %[[W]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul %[[X]], %[[WG]] transpose_rhs
// CHECK-NEXT: %[[BG:.*]] = tessel.all_gather %[[B]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: tessel.add %[[Y]], %[[BG]]
// CHECK: return

// CHECK-LABEL: func.func @train_step
// CHECK: tessel.param "fc.weight:exp_avg" state init  zeros {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1], []]>]} : tensor<4x16xf32>
// CHECK: %[[WG2:.*]] = tessel.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
// CHECK: tessel.cross_entropy_grad
// CHECK: %[[DB:.*]] = tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
// The input gradient reads the gathered weight kept from the forward pass.
// CHECK: tessel.matmul %{{.*}}, %[[WG2]] :
// CHECK: %[[DW:.*]] = tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: tessel.all_reduce_start %[[DW]] reduce avg on @mesh grid_axes = [0] bucket 0 params ["fc.weight"] : tensor<4x16xf32>
// CHECK: tessel.all_reduce_start %[[DB]] reduce avg on @mesh grid_axes = [0] bucket 1 params ["fc.bias"] : tensor<4xf32>
// CHECK: tessel.global_norm
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<1xf32> -> tensor<2xf32>
// CHECK: tessel.adamw
// CHECK: return
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "fsdp"]}
func.func @forward(%x: tensor<8x4x16xf32> {tessel.input = "x"}, %t: tensor<8x4xi32> {tessel.input = "t"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
  %b = tessel.param "fc.bias" init zeros : tensor<8xf32>
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<8x4x16xf32>, tensor<8x16xf32>) -> tensor<8x4x8xf32>
  %yb = tessel.add %y, %b : (tensor<8x4x8xf32>, tensor<8xf32>) -> tensor<8x4x8xf32>
  %l = tessel.cross_entropy %yb, %t : (tensor<8x4x8xf32>, tensor<8x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
