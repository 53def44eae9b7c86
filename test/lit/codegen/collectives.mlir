// Collectives are steps, not kernels, in both targets: a bucket's all-reduce starts with
// its gradients packed, compute overlaps it, and the wait unpacks the reduced values into
// new buffers; the reduction kind, mesh axis and group size are those of the op.
// RUN: tessel-translate --tessel-to-cpp %s | FileCheck %s
// RUN: tessel-translate --tessel-to-cuda %s | FileCheck %s

// CHECK-LABEL: // func @train_step: 3 steps
// CHECK-NEXT: //   all_reduce_start avg over dp (2 ranks): train_step.arg0, train_step.arg1
// CHECK-NEXT: //   kernel [[SCALE:k[0-9]+_scale]](%{{[0-9]+}}, train_step.arg0)
// CHECK-NEXT: //   all_reduce_wait avg over dp (2 ranks): %[[R0:[0-9]+]], %[[R1:[0-9]+]]
// CHECK-NOT: all_reduce
// CHECK: void {{(__launch_bounds__\(32, 32\) )?}}[[SCALE]](
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @train_step(%gb: tensor<64xf32>, %gw: tensor<256x64xf32>) -> (tensor<64xf32>, tensor<256x64xf32>) {
  %f:2 = tessel.all_reduce_start %gb, %gw reduce avg on @mesh grid_axes = [0] bucket 0 params ["ln_f.bias", "wte.weight"] : tensor<64xf32>, tensor<256x64xf32>
  %s = tessel.scale %gb, 2.0 : tensor<64xf32>
  %r:2 = tessel.all_reduce_wait %f#0, %f#1 : tensor<64xf32>, tensor<256x64xf32>
  return %r#0, %r#1 : tensor<64xf32>, tensor<256x64xf32>
}
