// FSDP x TP (passes/FullyShard.cpp, ReshardToCollectives.cpp) on a one-block GPT (V = 256,
// C = 16, 2 heads, tied LM head) over the mesh fsdp=2,tp=2 (`--plan fsdp=2,tp=2`: fsdp is
// grid axis 0, tp axis 1), the batch of 4 split over fsdp. Every parameter keeps its
// Megatron layout for compute and is stored with dimension 0 also split over fsdp:
//   - column-parallel qkv (in 3 blocks: q, k, v) and fc weights and biases, and the
//     vocabulary-parallel embedding: dimension 0 over [tp, fsdp] (grid axes [1, 0]: tp
//     major, fsdp minor), so the all-gather over fsdp alone (grid axes [0]) rebuilds the
//     rank's tensor-parallel block; the qkv weight is gathered per block, between reshapes
//     to [3, rows] and back;
//   - row-parallel projection weights (dimension 1 over tp): dimension 0 over fsdp;
//   - norms, projection biases and wpe (replicated over tp): dimension 0 over fsdp.
// Backward: each gather's transpose, a reduce-scatter over fsdp of the tensor-parallel
// gradient (the qkv weight's per block). Nothing else is gathered or scattered: the
// tensor-parallel all-reduces are those of tensor-parallel-gpt-block.mlir.
// RUN: tessel-opt %s --tessel-shard-batch=parts=2 --tessel-tensor-parallel --tessel-propagate-sharding \
// RUN:   --tessel-insert-reshards --tessel-fully-shard=axis=fsdp --tessel-partition=batch-axes=fsdp \
// RUN:   --tessel-reshard-to-collectives --tessel-decompose-attention --tessel-autodiff \
// RUN: | FileCheck %s --implicit-check-not=tessel.all_gather --implicit-check-not=tessel.reduce_scatter \
// RUN:   --implicit-check-not=tessel.all_to_all

// Mixed precision: the bf16 shards are gathered, and the q, k, v gradients, scattered per
// block between reshapes, are still summed in f32 on the wire (cast before the
// reduce-scatter), then averaged over fsdp by a scale.
// RUN: tessel-opt %s --tessel-shard-batch=parts=2 --tessel-tensor-parallel --tessel-propagate-sharding \
// RUN:   --tessel-insert-reshards --tessel-fully-shard=axis=fsdp --tessel-partition=batch-axes=fsdp \
// RUN:   --tessel-reshard-to-collectives --tessel-decompose-attention --tessel-mixed-precision --tessel-autodiff \
// RUN:   --tessel-gradient-all-reduce="axis=fsdp group=2" | FileCheck %s --check-prefix=BF16
// BF16-LABEL: func.func @train_step
// BF16: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 1 : tensor<3x4x16xbf16> -> tensor<3x8x16xbf16>
// BF16: %[[DW3:.*]] = tessel.reshape %{{.*}} : tensor<24x16xbf16> -> tensor<3x8x16xbf16>
// BF16-NEXT: %[[DW32:.*]] = tessel.cast %[[DW3]] : tensor<3x8x16xbf16> -> tensor<3x8x16xf32>
// BF16-NEXT: %[[DWS:.*]] = tessel.reduce_scatter %[[DW32]] reduce sum on @mesh grid_axes = [0] scatter_axis = 1 : tensor<3x8x16xf32> -> tensor<3x4x16xf32>
// BF16-NEXT: %[[DW:.*]] = tessel.reshape %[[DWS]] : tensor<3x4x16xf32> -> tensor<12x16xf32>
// BF16: tessel.scale %[[DW]], 5.000000e-01 : tensor<12x16xf32>
// BF16-NOT: tessel.reduce_scatter %{{.*}}bf16

// CHECK-LABEL: func.func @forward
// CHECK: %[[WTE:.*]] = tessel.param "wte.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1, 0], []]>]} : tensor<64x16xf32>
// CHECK: %[[WPE:.*]] = tessel.param "wpe.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<4x16xf32>
// CHECK: %[[QKV:.*]] = tessel.param "blocks.0.attn.qkv.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1, 0], []], blocks = [3, 1]>]} : tensor<12x16xf32>
// CHECK: %[[QKVB:.*]] = tessel.param "blocks.0.attn.qkv.bias" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1, 0]], blocks = [3]>]} : tensor<12xf32>
// CHECK: %[[PROJ:.*]] = tessel.param "blocks.0.attn.proj.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], [1]]>]} : tensor<8x8xf32>
// CHECK: %[[FC:.*]] = tessel.param "blocks.0.mlp.fc.weight" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1, 0], []]>]} : tensor<16x16xf32>
// CHECK: %[[FCB:.*]] = tessel.param "blocks.0.mlp.fc.bias" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1, 0]]>]} : tensor<16xf32>
// The vocabulary: the rank's 128 rows of the tensor-parallel block, gathered from 64 per fsdp rank.
// CHECK: %[[WTEG:.*]] = tessel.all_gather %[[WTE]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<64x16xf32> -> tensor<128x16xf32>
// CHECK: tessel.embedding_shard %[[WTEG]]
// CHECK: tessel.all_gather %[[WPE]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK-COUNT-2: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
// q, k and v: each block's 4 rows per rank gathered into the tensor-parallel rank's 8.
// CHECK: %[[QKV3:.*]] = tessel.reshape %[[QKV]] : tensor<12x16xf32> -> tensor<3x4x16xf32>
// CHECK-NEXT: %[[QKVG3:.*]] = tessel.all_gather %[[QKV3]] on @mesh grid_axes = [0] gather_axis = 1 : tensor<3x4x16xf32> -> tensor<3x8x16xf32>
// CHECK-NEXT: %[[QKVG:.*]] = tessel.reshape %[[QKVG3]] : tensor<3x8x16xf32> -> tensor<24x16xf32>
// CHECK-NEXT: tessel.matmul %{{.*}}, %[[QKVG]] transpose_rhs
// CHECK: %[[QKVB3:.*]] = tessel.reshape %[[QKVB]] : tensor<12xf32> -> tensor<3x4xf32>
// CHECK-NEXT: tessel.all_gather %[[QKVB3]] on @mesh grid_axes = [0] gather_axis = 1 : tensor<3x4xf32> -> tensor<3x8xf32>
// Row-parallel: dimension 0 gathered, dimension 1 stays the tensor-parallel half.
// CHECK: tessel.all_gather %[[PROJ]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-COUNT-3: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
// CHECK: tessel.all_gather %[[FC]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x16xf32> -> tensor<32x16xf32>
// CHECK: tessel.all_gather %[[FCB]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<16xf32> -> tensor<32xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8x32xf32> -> tensor<16x32xf32>
// CHECK-COUNT-3: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
// CHECK: return

// The backward pass: the same gathers (the forward pass again, in @train_step), then each
// gradient reduce-scattered over fsdp into the stored layout.
// CHECK-LABEL: func.func @train_step
// CHECK-COUNT-2: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<{{.*}}x16xf32> -> tensor<{{.*}}x16xf32>
// CHECK-COUNT-2: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 1 : tensor<3x4x16xf32> -> tensor<3x8x16xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 1 : tensor<3x4xf32> -> tensor<3x8xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-COUNT-3: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x16xf32> -> tensor<32x16xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<16xf32> -> tensor<32xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8x32xf32> -> tensor<16x32xf32>
// CHECK-COUNT-3: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
// CHECK-COUNT-3: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32x16xf32> -> tensor<16x16xf32>
// CHECK-COUNT-3: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// The q, k, v bias and weight gradients, per block: the transposes of the gathers above.
// CHECK: %[[DB3:.*]] = tessel.reshape %{{.*}} : tensor<24xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[DBS:.*]] = tessel.reduce_scatter %[[DB3]] reduce sum on @mesh grid_axes = [0] scatter_axis = 1 : tensor<3x8xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %[[DB:.*]] = tessel.reshape %[[DBS]] : tensor<3x4xf32> -> tensor<12xf32>
// CHECK: %[[DW3:.*]] = tessel.reshape %{{.*}} : tensor<24x16xf32> -> tensor<3x8x16xf32>
// CHECK-NEXT: %[[DWS:.*]] = tessel.reduce_scatter %[[DW3]] reduce sum on @mesh grid_axes = [0] scatter_axis = 1 : tensor<3x8x16xf32> -> tensor<3x4x16xf32>
// CHECK-NEXT: %[[DW:.*]] = tessel.reshape %[[DWS]] : tensor<3x4x16xf32> -> tensor<12x16xf32>
// CHECK-COUNT-2: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: tessel.embedding_shard_grad
// CHECK: %[[DWTE:.*]] = tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 0 : tensor<128x16xf32> -> tensor<64x16xf32>
// CHECK: return %{{.*}}, %[[DWTE]], {{.*}}, %[[DW]], %[[DB]],

shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["fsdp", "tp"]}
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
