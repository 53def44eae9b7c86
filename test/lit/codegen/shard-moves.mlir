// The synchronous collectives that move shards lower to one step each, in both targets, over
// the op's grid axes (names, group size) along its dimension(s), with a staging temp of the
// size the runtime's repacking needs: all_gather P x input, reduce_scatter the input,
// all_to_all 2 x input (runtime/exec/Program.h). Every dimension moved is the middle one of a
// [B, T, C]-like tensor (and the inverse all_to_all and a last reduce_scatter move dim 2).
// RUN: tessel-translate --tessel-to-cpp %s | FileCheck %s
// RUN: tessel-translate --tessel-to-cuda %s | FileCheck %s

// CHECK: // mesh dp=2,tp=2
// CHECK-LABEL: // func @forward:
// CHECK-NEXT: //   all_gather dim 1 over tp (2 ranks): %[[G:[0-9]+]] = forward.x via %{{[0-9]+}} [64]
// CHECK-NEXT: //   reduce_scatter sum dim 1 over tp (2 ranks): %{{[0-9]+}} = %[[G]] via %{{[0-9]+}} [64]
// CHECK-NEXT: //   reduce_scatter avg dim 1 over dp,tp (4 ranks): %{{[0-9]+}} = %[[G]] via %{{[0-9]+}} [64]
// CHECK-NEXT: //   all_to_all dim 1 concat dim 2 over tp (2 ranks): %[[T:[0-9]+]] = %[[G]] via %{{[0-9]+}} [128]
// CHECK-NEXT: //   all_gather dim 1 over dp,tp (4 ranks): %{{[0-9]+}} = forward.xb via %{{[0-9]+}} [64]
// CHECK-NEXT: //   all_to_all dim 2 concat dim 1 over tp (2 ranks): %[[U:[0-9]+]] = %[[T]] via %{{[0-9]+}} [128]
// CHECK-NEXT: //   reduce_scatter sum dim 2 over dp (2 ranks): %{{[0-9]+}} = %[[U]] via %{{[0-9]+}} [64]
// CHECK-NOT: all_gather
// CHECK-NOT: reduce_scatter
// CHECK-NOT: all_to_all
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @forward(%x: tensor<2x4x4xf32> {tessel.input = "x"}, %xb: tensor<2x2x4xbf16> {tessel.input = "xb"})
    -> (tensor<2x4x4xf32>, tensor<2x2x4xf32>, tensor<2x8x2xf32>, tensor<2x8x4xbf16>) {
  %g = tessel.all_gather %x on @mesh grid_axes = [1] gather_axis = 1 : tensor<2x4x4xf32> -> tensor<2x8x4xf32>
  %s = tessel.reduce_scatter %g reduce sum on @mesh grid_axes = [1] scatter_axis = 1 : tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %a = tessel.reduce_scatter %g reduce avg on @mesh grid_axes = [0, 1] scatter_axis = 1 : tensor<2x8x4xf32> -> tensor<2x2x4xf32>
  %t = tessel.all_to_all %g on @mesh grid_axes = [1] split_axis = 1 concat_axis = 2 : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %b = tessel.all_gather %xb on @mesh grid_axes = [0, 1] gather_axis = 1 : tensor<2x2x4xbf16> -> tensor<2x8x4xbf16>
  %u = tessel.all_to_all %t on @mesh grid_axes = [1] split_axis = 2 concat_axis = 1 : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %v = tessel.reduce_scatter %u reduce sum on @mesh grid_axes = [0] scatter_axis = 2 : tensor<2x8x4xf32> -> tensor<2x8x2xf32>
  return %s, %a, %v, %b : tensor<2x4x4xf32>, tensor<2x2x4xf32>, tensor<2x8x2xf32>, tensor<2x8x4xbf16>
}
