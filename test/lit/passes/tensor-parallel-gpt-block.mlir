// The collectives tensor parallelism adds to a one-block GPT (Megatron-LM's layout, tp = 2,
// V = 256 split into 128 rows per rank, tied LM head). Per block: the forward pass has
// exactly two all-reduces of [B, T, C], after the attention projection and after the MLP
// projection (the row-parallel outputs), and the backward pass exactly two, of the input
// gradients of the column-parallel qkv and fc projections (the transposes of the
// tessel.replicate in front of them). Around the blocks: the vocab-parallel embedding's
// all-reduce of [B, T, C], the vocab-parallel cross-entropy's max, sum and sum of [B, T], and
// in backward the LM head's input gradient. Nothing else communicates: --implicit-check-not
// makes any other collective a failure.
// RUN: tessel-opt %s --tessel-tensor-parallel --tessel-propagate-sharding --tessel-insert-reshards \
// RUN:   --tessel-partition --tessel-reshard-to-collectives --tessel-decompose-attention --tessel-autodiff \
// RUN: | FileCheck %s --implicit-check-not=tessel.all_reduce --implicit-check-not=tessel.all_gather \
// RUN:   --implicit-check-not=tessel.reduce_scatter --implicit-check-not=tessel.all_to_all

// Local shapes on each of the two ranks: B = 4, T = 8, C = 16, NH = 2 -> qkv [4, 8, 24],
// one head of 8 channels, fc [4, 8, 32], logits [4, 8, 128].
// CHECK-LABEL: func.func @forward
// CHECK: %[[E:.*]] = tessel.embedding_shard %{{.*}}, %{{.*}}, %{{.*}} vocab 256 : (tensor<128x16xf32>, tensor<4x8xi32>, tensor<i32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[E]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: %[[A:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x8xf32>, tensor<16x8xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[A]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: %[[M:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x32xf32>, tensor<16x32xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[M]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x16xf32>, tensor<128x16xf32>) -> tensor<4x8x128xf32>
// CHECK: tessel.all_reduce %{{.*}} reduce max on @mesh grid_axes = [0] : tensor<4x8xf32>
// CHECK: tessel.all_reduce %{{.*}} reduce sum on @mesh grid_axes = [0] : tensor<4x8xf32>
// CHECK: tessel.all_reduce %{{.*}} reduce sum on @mesh grid_axes = [0] : tensor<4x8xf32>
// CHECK: return

// CHECK-LABEL: func.func @train_step
// CHECK: tessel.all_reduce %{{.*}} reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: %[[A2:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x8xf32>, tensor<16x8xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[A2]] reduce sum
// CHECK: %[[M2:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x32xf32>, tensor<16x32xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: tessel.all_reduce %[[M2]] reduce sum
// CHECK: tessel.all_reduce %{{.*}} reduce max
// CHECK: tessel.all_reduce %{{.*}} reduce sum
// CHECK: tessel.all_reduce %{{.*}} reduce sum
// Backward: the LM head's input gradient [4, 8, 128] x [128, 16], then per block the fc
// input gradient [4, 8, 32] x [32, 16] and the qkv one [4, 8, 24] x [24, 16].
// CHECK: tessel.cross_entropy_from_stats_grad
// CHECK: %[[DH:.*]] = tessel.matmul %{{.*}}, %{{.*}} : (tensor<4x8x128xf32>, tensor<128x16xf32>) -> tensor<4x8x16xf32>
// CHECK: tessel.all_reduce %[[DH]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: %[[DFC:.*]] = tessel.matmul %{{.*}}, %{{.*}} : (tensor<4x8x32xf32>, tensor<32x16xf32>) -> tensor<4x8x16xf32>
// CHECK: tessel.all_reduce %[[DFC]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
// CHECK: %[[DQKV:.*]] = tessel.matmul %{{.*}}, %{{.*}} : (tensor<4x8x24xf32>, tensor<24x16xf32>) -> tensor<4x8x16xf32>
// CHECK: tessel.all_reduce %[[DQKV]] reduce sum on @mesh grid_axes = [0] : tensor<4x8x16xf32>
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
