// A partitioned program on a dp=2,tp=2 mesh: the grid becomes the program's mesh; a
// column-parallel weight (local [2, 8] of a global [4, 8], split over tp) and its optimizer
// state carry their layout; a fused [6, 8] weight split by blocks keeps its 3 blocks;
// tessel.replicate is no step (its result is its operand's buffer); the synchronous
// tessel.all_reduce over tp is a start and, at the very next step, its wait over a
// one-tensor bucket numbered after the gradient bucket; a max over both axes is lowered too.
// RUN: tessel-translate --tessel-to-cpp %s | FileCheck %s
// RUN: tessel-translate --tessel-to-cuda %s | FileCheck %s

// CHECK: // mesh dp=2,tp=2
// CHECK-NEXT: // sharded fc.weight [2, 8] of [4, 8]: dim 0 over [tp] in 1 block(s), dim 1 whole
// CHECK-NEXT: // sharded fc.weight:exp_avg [2, 8] of [4, 8]: dim 0 over [tp] in 1 block(s), dim 1 whole
// CHECK-NEXT: // sharded qkv.weight [6, 8] of [12, 8]: dim 0 over [tp] in 3 block(s), dim 1 whole
// CHECK-NOT: // sharded
// CHECK-LABEL: // func @train_step:
// CHECK-NEXT: //   all_reduce_start avg over dp (2 ranks): train_step.g
// CHECK-NEXT: //   gemm %[[Y:[0-9]+]] = train_step.x x fc.weight^T (batch 1, m 4, n 2, k 8)
// CHECK-NEXT: //   all_reduce_start sum over tp (2 ranks), synchronous, bucket 1: %[[Y]]
// CHECK-NEXT: //   all_reduce_wait sum over tp (2 ranks), synchronous, bucket 1: %[[S:[0-9]+]]
// CHECK-NEXT: //   all_reduce_start max over dp,tp (4 ranks), synchronous, bucket 2: %[[S]]
// CHECK-NEXT: //   all_reduce_wait max over dp,tp (4 ranks), synchronous, bucket 2: %{{[0-9]+}}
// CHECK-NEXT: //   all_reduce_wait avg over dp (2 ranks): %{{[0-9]+}}
// CHECK-NOT: all_reduce
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @train_step(%x0: tensor<4x8xf32> {tessel.input = "x"}, %g: tensor<4xf32> {tessel.input = "g"}) -> (tensor<4x2xf32>, tensor<4xf32>, tensor<6x8xf32>, tensor<2x8xf32>) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[1], []]>]} : tensor<2x8xf32>
  %m = tessel.param "fc.weight:exp_avg" state init zeros {tessel.shardings = [#tessel.sharding<@mesh, [[1], []]>]} : tensor<2x8xf32>
  %q = tessel.param "qkv.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[1], []], blocks = [3, 1]>]} : tensor<6x8xf32>
  %f = tessel.all_reduce_start %g reduce avg on @mesh grid_axes = [0] bucket 0 params ["g"] : tensor<4xf32>
  %x = tessel.replicate %x0 on @mesh grid_axes = [1] : tensor<4x8xf32>
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
  %s = tessel.all_reduce %y reduce sum on @mesh grid_axes = [1] : tensor<4x2xf32>
  %t = tessel.all_reduce %s reduce max on @mesh grid_axes = [0, 1] : tensor<4x2xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return %t, %r, %q, %m : tensor<4x2xf32>, tensor<4xf32>, tensor<6x8xf32>, tensor<2x8xf32>
}
