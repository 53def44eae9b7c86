// Sequence parallelism (Korthikanti et al. 2022) on the same one-block GPT (tp = 2): the
// layer-norm and residual regions are split along T, so each all-reduce of the plain tensor
// parallel block becomes a pair. Forward: the embedding's pending sum is reduce-scattered
// into rows; per block, the rows are all-gathered before the qkv and fc projections and the
// projections' pending sums reduce-scattered back into rows; the final norm's rows are
// gathered for the vocab-parallel LM head, whose loss statistics are still all-reduced over
// [B, T]. Backward: each all-gather's transpose is a reduce-scatter and each
// reduce-scatter's an all-gather. The layer norms' weights, replicated while their rows are
// split, are read through tessel.replicate (their gradients are summed over tp: the only
// all-reduces besides the loss statistics, of [C] = [16]; none of [B, T, C] is left).
// RUN: tessel-opt %s --tessel-tensor-parallel --tessel-propagate-sharding=sequence-axis=tp \
// RUN:   --tessel-insert-reshards --tessel-partition --tessel-reshard-to-collectives \
// RUN:   --tessel-decompose-attention --tessel-autodiff \
// RUN: | FileCheck %s --implicit-check-not=tessel.all_gather --implicit-check-not=tessel.reduce_scatter \
// RUN:   --implicit-check-not=tessel.all_to_all --implicit-check-not="tessel.all_reduce %{{.*}} : tensor<4x8x16xf32>"

// Local shapes: rows [4, 4, 16] (T = 8 split over 2), gathered [4, 8, 16].
// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "wpe.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<4x16xf32>
// CHECK: tessel.param "blocks.0.ln1.weight"
// CHECK-NEXT: tessel.replicate %{{.*}} on @mesh grid_axes = [0] : tensor<16xf32>
// CHECK: tessel.embedding_shard
// CHECK-NEXT: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 1 : tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 1 : tensor<4x4x16xf32> -> tensor<4x8x16xf32>
// CHECK: tessel.reduce_scatter %{{.*}} scatter_axis = 1 : tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// CHECK: tessel.all_gather %{{.*}} gather_axis = 1 : tensor<4x4x16xf32> -> tensor<4x8x16xf32>
// CHECK: tessel.reduce_scatter %{{.*}} scatter_axis = 1 : tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// CHECK: tessel.all_gather %{{.*}} gather_axis = 1 : tensor<4x4x16xf32> -> tensor<4x8x16xf32>
// CHECK: tessel.all_reduce %{{.*}} reduce max
// CHECK: tessel.all_reduce %{{.*}} reduce sum
// CHECK: tessel.all_reduce %{{.*}} reduce sum
// CHECK: return
// CHECK-LABEL: func.func @train_step
// CHECK: tessel.reduce_scatter
// CHECK: tessel.all_gather
// CHECK: tessel.reduce_scatter
// CHECK: tessel.all_gather
// CHECK: tessel.reduce_scatter
// CHECK: tessel.all_gather
// CHECK: tessel.cross_entropy_from_stats_grad
// Backward, in reverse: the LM head's gather, then per block the reduce-scatters' and the
// gathers' transposes, then the embedding's.
// CHECK: tessel.reduce_scatter %{{.*}} scatter_axis = 1 : tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// CHECK: tessel.all_gather %{{.*}} gather_axis = 1 : tensor<4x4x16xf32> -> tensor<4x8x16xf32>
// CHECK: tessel.reduce_scatter %{{.*}} scatter_axis = 1 : tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// CHECK: tessel.all_gather %{{.*}} gather_axis = 1 : tensor<4x4x16xf32> -> tensor<4x8x16xf32>
// CHECK: tessel.reduce_scatter %{{.*}} scatter_axis = 1 : tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// CHECK: tessel.all_gather %{{.*}} gather_axis = 1 : tensor<4x4x16xf32> -> tensor<4x8x16xf32>
// CHECK: tessel.embedding_shard_grad
// CHECK: return
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
  func.func @forward(%tokens: tensor<4x8xi32> {tessel.input = "tokens"}, %targets: tensor<4x8xi32> {tessel.input = "targets"}) -> (tensor<f32> {tessel.output = "loss"}) {
    %0 = tessel.param "wte.weight" {std = 2.000000e-02 : f64} : tensor<256x16xf32>
    %1 = tessel.param "wpe.weight" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
    %2 = tessel.param "ln_f.weight" init  ones : tensor<16xf32>
    %3 = tessel.param "ln_f.bias" init  zeros : tensor<16xf32>
    %4 = tessel.param "blocks.0.ln1.weight" init  ones : tensor<16xf32>
    %5 = tessel.param "blocks.0.ln1.bias" init  zeros : tensor<16xf32>
    %6 = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<48x16xf32>
    %7 = tessel.param "blocks.0.attn.qkv.bias" init  zeros : tensor<48xf32>
    %8 = tessel.param "blocks.0.attn.proj.weight" {std = 0.014142135623730949 : f64} : tensor<16x16xf32>
    %9 = tessel.param "blocks.0.attn.proj.bias" init  zeros : tensor<16xf32>
    %10 = tessel.param "blocks.0.ln2.weight" init  ones : tensor<16xf32>
    %11 = tessel.param "blocks.0.ln2.bias" init  zeros : tensor<16xf32>
    %12 = tessel.param "blocks.0.mlp.fc.weight" {std = 2.000000e-02 : f64} : tensor<64x16xf32>
    %13 = tessel.param "blocks.0.mlp.fc.bias" init  zeros : tensor<64xf32>
    %14 = tessel.param "blocks.0.mlp.proj.weight" {std = 0.014142135623730949 : f64} : tensor<16x64xf32>
    %15 = tessel.param "blocks.0.mlp.proj.bias" init  zeros : tensor<16xf32>
    %16 = tessel.embedding %0, %tokens : (tensor<256x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
    %17 = tessel.add %16, %1 : (tensor<4x8x16xf32>, tensor<8x16xf32>) -> tensor<4x8x16xf32>
    %18 = tessel.layer_norm %17, %4, %5 : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %19 = tessel.matmul %18, %6 transpose_rhs : (tensor<4x8x16xf32>, tensor<48x16xf32>) -> tensor<4x8x48xf32>
    %20 = tessel.add %19, %7 : (tensor<4x8x48xf32>, tensor<48xf32>) -> tensor<4x8x48xf32>
    %21 = tessel.causal_attention %20 heads 2 : tensor<4x8x48xf32> -> tensor<4x8x16xf32>
    %22 = tessel.matmul %21, %8 transpose_rhs : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
    %23 = tessel.add %22, %9 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %24 = tessel.add %17, %23 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
    %25 = tessel.layer_norm %24, %10, %11 : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %26 = tessel.matmul %25, %12 transpose_rhs : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
    %27 = tessel.add %26, %13 : (tensor<4x8x64xf32>, tensor<64xf32>) -> tensor<4x8x64xf32>
    %28 = tessel.gelu %27 : tensor<4x8x64xf32>
    %29 = tessel.matmul %28, %14 transpose_rhs : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
    %30 = tessel.add %29, %15 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %31 = tessel.add %24, %30 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
    %32 = tessel.layer_norm %31, %2, %3 : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %33 = tessel.matmul %32, %0 transpose_rhs : (tensor<4x8x16xf32>, tensor<256x16xf32>) -> tensor<4x8x256xf32>
    %34 = tessel.cross_entropy %33, %targets : (tensor<4x8x256xf32>, tensor<4x8xi32>) -> tensor<f32>
    return %34 : tensor<f32>
  }
