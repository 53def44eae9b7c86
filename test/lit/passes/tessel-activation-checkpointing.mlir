// --tessel-activation-checkpointing (passes/ActivationCheckpointing.cpp) on the training step
// of a two-block GPT (tessel-gpt --layers 2 --channels 4 --heads 2 --seq 2 --batch 1, as
// tessel-autodiff leaves it, so the ops are visible one by one; the pipeline runs the pass
// after tessel-fuse, where it clones whole kernels, the last case; locations carry the
// module paths "blocks.N.*").
//
// Full: once block 1's backward starts (after the LM head's gradient), block 1's forward is
// recomputed from its input (the layer norm reads the kept block input, which ln1's
// gradient reads too), and the backward reads the recomputed softmax and GELU; block 0 is
// recomputed after block 1's backward is done. The block's last matmul and the residual
// add that produces its output are not recomputed (the output is the next block's input,
// kept). A second run changes nothing.
// Selective: only the core attention's q k^T, scale and softmax are recomputed, right
// before the first backward op reading the probabilities; the GELU input is kept.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-activation-checkpointing='modules=blocks.*' | FileCheck %s --check-prefixes=FULL,KERNEL
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-activation-checkpointing='modules=blocks.*' -tessel-activation-checkpointing='modules=blocks.*' | FileCheck %s --check-prefixes=FULL,KERNEL
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-activation-checkpointing='modules=blocks.* mode=selective' | FileCheck %s --check-prefixes=SEL,KERNEL
// A glob that matches no module's ops is an error at the plan's line.
// RUN: not tessel-opt %s -split-input-file -tessel-activation-checkpointing='modules=decoder.* plan-site=plan.h:12:5' 2>&1 | FileCheck %s --check-prefix=NOMATCH
// Without the pass nothing is recomputed: one softmax and one GELU per block.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-activation-checkpointing | FileCheck %s --check-prefix=NONE

// FULL-LABEL: func.func @train_step
// FULL-COUNT-2: tessel.softmax %{{.*}} causal
// FULL: tessel.cross_entropy_grad
// FULL-NOT: tessel.softmax_grad
// FULL: %[[LN1:.*]] = tessel.layer_norm %[[IN1:[0-9]+]], %[[W1:[0-9]+]], %{{[0-9]+}}
// FULL: %[[P1:.*]] = tessel.softmax %{{.*}} causal
// FULL: %[[G1:.*]] = tessel.gelu %[[H1:[0-9]+]]
// FULL-NOT: tessel.add %[[IN1]]
// FULL: tessel.reshape %[[G1]]
// FULL: tessel.gelu_grad %[[H1]]
// FULL: tessel.softmax_grad %[[P1]]
// FULL: tessel.reshape %[[LN1]]
// FULL: tessel.layer_norm_grad %[[IN1]], %[[W1]]
// FULL: %[[LN0:.*]] = tessel.layer_norm %[[IN0:[0-9]+]], %[[W0:[0-9]+]], %{{[0-9]+}}
// FULL: %[[P0:.*]] = tessel.softmax %{{.*}} causal
// FULL: tessel.gelu_grad
// FULL: tessel.softmax_grad %[[P0]]
// FULL: tessel.reshape %[[LN0]]
// FULL: tessel.layer_norm_grad %[[IN0]], %[[W0]]
// FULL-NOT: tessel.softmax %
// FULL: return

// SEL-LABEL: func.func @train_step
// SEL: %[[PRE0:.*]] = tessel.add %{{.*}}, %{{.*}} : (tensor<1x2x16xf32>
// SEL-NEXT: tessel.gelu %[[PRE0]]
// SEL: %[[PRE1:.*]] = tessel.add %{{.*}}, %{{.*}} : (tensor<1x2x16xf32>
// SEL-NEXT: tessel.gelu %[[PRE1]]
// SEL: tessel.cross_entropy_grad
// SEL-NOT: tessel.layer_norm %
// SEL-NOT: tessel.gelu %
// SEL: tessel.gelu_grad %[[PRE1]]
// SEL: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>)
// SEL-NEXT: %[[S1:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>)
// SEL-NEXT: %[[Z1:.*]] = tessel.scale %[[S1]]
// SEL-NEXT: %[[P1:.*]] = tessel.softmax %[[Z1]] causal
// SEL-NEXT: tessel.matmul %[[P1]], %{{.*}} transpose_lhs
// SEL-NEXT: tessel.softmax_grad %[[P1]]
// SEL: tessel.gelu_grad %[[PRE0]]
// SEL: %[[P0:.*]] = tessel.softmax %{{.*}} causal
// SEL-NEXT: tessel.matmul %[[P0]], %{{.*}} transpose_lhs
// SEL-NEXT: tessel.softmax_grad %[[P0]]
// SEL-NOT: tessel.softmax %
// SEL-NOT: tessel.layer_norm %
// SEL: return

// NONE-COUNT-2: tessel.softmax %{{.*}} causal
// NONE-NOT: tessel.softmax %
// NONE-COUNT-2: tessel.softmax_grad
// NONE-NOT: tessel.gelu %{{.*}} : tensor<1x2x16xf32>
// NONE: return

// NOMATCH: plan.h:12:5: error: tessel-activation-checkpointing: no op of @train_step belongs to a module that the checkpoint globs match (decoder.*)

  func.func @train_step(%arg0: tensor<1x2xi32> {tessel.input = "tokens"} loc("model.h":74:28), %arg1: tensor<1x2xi32> {tessel.input = "targets"} loc("model.h":75:29)) -> (tensor<f32> {tessel.output = "loss"}, tensor<256x4xf32> {tessel.grad = "wte.weight"}, tensor<2x4xf32> {tessel.grad = "wpe.weight"}, tensor<4xf32> {tessel.grad = "ln_f.weight"}, tensor<4xf32> {tessel.grad = "ln_f.bias"}, tensor<4xf32> {tessel.grad = "blocks.0.ln1.weight"}, tensor<4xf32> {tessel.grad = "blocks.0.ln1.bias"}, tensor<12x4xf32> {tessel.grad = "blocks.0.attn.qkv.weight"}, tensor<12xf32> {tessel.grad = "blocks.0.attn.qkv.bias"}, tensor<4x4xf32> {tessel.grad = "blocks.0.attn.proj.weight"}, tensor<4xf32> {tessel.grad = "blocks.0.attn.proj.bias"}, tensor<4xf32> {tessel.grad = "blocks.0.ln2.weight"}, tensor<4xf32> {tessel.grad = "blocks.0.ln2.bias"}, tensor<16x4xf32> {tessel.grad = "blocks.0.mlp.fc.weight"}, tensor<16xf32> {tessel.grad = "blocks.0.mlp.fc.bias"}, tensor<4x16xf32> {tessel.grad = "blocks.0.mlp.proj.weight"}, tensor<4xf32> {tessel.grad = "blocks.0.mlp.proj.bias"}, tensor<4xf32> {tessel.grad = "blocks.1.ln1.weight"}, tensor<4xf32> {tessel.grad = "blocks.1.ln1.bias"}, tensor<12x4xf32> {tessel.grad = "blocks.1.attn.qkv.weight"}, tensor<12xf32> {tessel.grad = "blocks.1.attn.qkv.bias"}, tensor<4x4xf32> {tessel.grad = "blocks.1.attn.proj.weight"}, tensor<4xf32> {tessel.grad = "blocks.1.attn.proj.bias"}, tensor<4xf32> {tessel.grad = "blocks.1.ln2.weight"}, tensor<4xf32> {tessel.grad = "blocks.1.ln2.bias"}, tensor<16x4xf32> {tessel.grad = "blocks.1.mlp.fc.weight"}, tensor<16xf32> {tessel.grad = "blocks.1.mlp.fc.bias"}, tensor<4x16xf32> {tessel.grad = "blocks.1.mlp.proj.weight"}, tensor<4xf32> {tessel.grad = "blocks.1.mlp.proj.bias"}) {
    %0 = tessel.param "wte.weight" {std = 2.000000e-02 : f64} : tensor<256x4xf32> loc("wte"("model.h":58:33))
    %1 = tessel.param "wpe.weight" {std = 2.000000e-02 : f64} : tensor<2x4xf32> loc("wpe"("model.h":58:33))
    %2 = tessel.param "ln_f.weight" init  ones : tensor<4xf32> loc("ln_f"("model.h":58:33))
    %3 = tessel.param "ln_f.bias" init  zeros : tensor<4xf32> loc("ln_f"("model.h":58:33))
    %4 = tessel.param "blocks.0.ln1.weight" init  ones : tensor<4xf32> loc("blocks.0.ln1"("model.h":41:55))
    %5 = tessel.param "blocks.0.ln1.bias" init  zeros : tensor<4xf32> loc("blocks.0.ln1"("model.h":41:55))
    %6 = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<12x4xf32> loc("blocks.0.attn.qkv"("model.h":41:55))
    %7 = tessel.param "blocks.0.attn.qkv.bias" init  zeros : tensor<12xf32> loc("blocks.0.attn.qkv"("model.h":41:55))
    %8 = tessel.param "blocks.0.attn.proj.weight" {std = 1.000000e-02 : f64} : tensor<4x4xf32> loc("blocks.0.attn.proj"("model.h":41:55))
    %9 = tessel.param "blocks.0.attn.proj.bias" init  zeros : tensor<4xf32> loc("blocks.0.attn.proj"("model.h":41:55))
    %10 = tessel.param "blocks.0.ln2.weight" init  ones : tensor<4xf32> loc("blocks.0.ln2"("model.h":41:55))
    %11 = tessel.param "blocks.0.ln2.bias" init  zeros : tensor<4xf32> loc("blocks.0.ln2"("model.h":41:55))
    %12 = tessel.param "blocks.0.mlp.fc.weight" {std = 2.000000e-02 : f64} : tensor<16x4xf32> loc("blocks.0.mlp.fc"("model.h":41:55))
    %13 = tessel.param "blocks.0.mlp.fc.bias" init  zeros : tensor<16xf32> loc("blocks.0.mlp.fc"("model.h":41:55))
    %14 = tessel.param "blocks.0.mlp.proj.weight" {std = 1.000000e-02 : f64} : tensor<4x16xf32> loc("blocks.0.mlp.proj"("model.h":41:55))
    %15 = tessel.param "blocks.0.mlp.proj.bias" init  zeros : tensor<4xf32> loc("blocks.0.mlp.proj"("model.h":41:55))
    %16 = tessel.param "blocks.1.ln1.weight" init  ones : tensor<4xf32> loc("blocks.1.ln1"("model.h":41:55))
    %17 = tessel.param "blocks.1.ln1.bias" init  zeros : tensor<4xf32> loc("blocks.1.ln1"("model.h":41:55))
    %18 = tessel.param "blocks.1.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<12x4xf32> loc("blocks.1.attn.qkv"("model.h":41:55))
    %19 = tessel.param "blocks.1.attn.qkv.bias" init  zeros : tensor<12xf32> loc("blocks.1.attn.qkv"("model.h":41:55))
    %20 = tessel.param "blocks.1.attn.proj.weight" {std = 1.000000e-02 : f64} : tensor<4x4xf32> loc("blocks.1.attn.proj"("model.h":41:55))
    %21 = tessel.param "blocks.1.attn.proj.bias" init  zeros : tensor<4xf32> loc("blocks.1.attn.proj"("model.h":41:55))
    %22 = tessel.param "blocks.1.ln2.weight" init  ones : tensor<4xf32> loc("blocks.1.ln2"("model.h":41:55))
    %23 = tessel.param "blocks.1.ln2.bias" init  zeros : tensor<4xf32> loc("blocks.1.ln2"("model.h":41:55))
    %24 = tessel.param "blocks.1.mlp.fc.weight" {std = 2.000000e-02 : f64} : tensor<16x4xf32> loc("blocks.1.mlp.fc"("model.h":41:55))
    %25 = tessel.param "blocks.1.mlp.fc.bias" init  zeros : tensor<16xf32> loc("blocks.1.mlp.fc"("model.h":41:55))
    %26 = tessel.param "blocks.1.mlp.proj.weight" {std = 1.000000e-02 : f64} : tensor<4x16xf32> loc("blocks.1.mlp.proj"("model.h":41:55))
    %27 = tessel.param "blocks.1.mlp.proj.bias" init  zeros : tensor<4xf32> loc("blocks.1.mlp.proj"("model.h":41:55))
    %28 = tessel.embedding %0, %arg0 : (tensor<256x4xf32>, tensor<1x2xi32>) -> tensor<1x2x4xf32> loc("wte"("model.h":64:27))
    %29 = tessel.add %28, %1 : (tensor<1x2x4xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32> loc("model.h":64:49)
    %30 = tessel.layer_norm %29, %4, %5 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.ln1"("model.h":45:50))
    %31 = tessel.matmul %30, %6 transpose_rhs : (tensor<1x2x4xf32>, tensor<12x4xf32>) -> tensor<1x2x12xf32> loc("blocks.0.attn.qkv"("model.h":45:46))
    %32 = tessel.add %31, %7 : (tensor<1x2x12xf32>, tensor<12xf32>) -> tensor<1x2x12xf32> loc("blocks.0.attn.qkv"("model.h":45:46))
    %33:3 = tessel.split %32 along 2 : tensor<1x2x12xf32> -> tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32> loc("blocks.0"("model.h":45:42))
    %34 = tessel.reshape %33#0 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %35 = tessel.transpose %34 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %36 = tessel.reshape %33#1 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %37 = tessel.transpose %36 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %38 = tessel.reshape %33#2 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %39 = tessel.transpose %38 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %40 = tessel.matmul %35, %37 transpose_rhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %41 = tessel.scale %40, 0.70710678118654746 : tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %42 = tessel.softmax %41 causal : tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %43 = tessel.matmul %42, %39 : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %44 = tessel.transpose %43 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %45 = tessel.reshape %44 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.0"("model.h":45:42))
    %46 = tessel.matmul %45, %8 transpose_rhs : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.attn.proj"("model.h":45:17))
    %47 = tessel.add %46, %9 : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.attn.proj"("model.h":45:17))
    %48 = tessel.add %29, %47 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0"("model.h":45:66))
    %49 = tessel.layer_norm %48, %10, %11 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.ln2"("model.h":46:42))
    %50 = tessel.matmul %49, %12 transpose_rhs : (tensor<1x2x4xf32>, tensor<16x4xf32>) -> tensor<1x2x16xf32> loc("blocks.0.mlp.fc"("model.h":46:38))
    %51 = tessel.add %50, %13 : (tensor<1x2x16xf32>, tensor<16xf32>) -> tensor<1x2x16xf32> loc("blocks.0.mlp.fc"("model.h":46:38))
    %52 = tessel.gelu %51 : tensor<1x2x16xf32> loc("blocks.0"("model.h":46:35))
    %53 = tessel.matmul %52, %14 transpose_rhs : (tensor<1x2x16xf32>, tensor<4x16xf32>) -> tensor<1x2x4xf32> loc("blocks.0.mlp.proj"("model.h":46:22))
    %54 = tessel.add %53, %15 : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.mlp.proj"("model.h":46:22))
    %55 = tessel.add %48, %54 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0"("model.h":46:47))
    %56 = tessel.layer_norm %55, %16, %17 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.ln1"("model.h":45:50))
    %57 = tessel.matmul %56, %18 transpose_rhs : (tensor<1x2x4xf32>, tensor<12x4xf32>) -> tensor<1x2x12xf32> loc("blocks.1.attn.qkv"("model.h":45:46))
    %58 = tessel.add %57, %19 : (tensor<1x2x12xf32>, tensor<12xf32>) -> tensor<1x2x12xf32> loc("blocks.1.attn.qkv"("model.h":45:46))
    %59:3 = tessel.split %58 along 2 : tensor<1x2x12xf32> -> tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32> loc("blocks.1"("model.h":45:42))
    %60 = tessel.reshape %59#0 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %61 = tessel.transpose %60 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %62 = tessel.reshape %59#1 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %63 = tessel.transpose %62 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %64 = tessel.reshape %59#2 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %65 = tessel.transpose %64 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %66 = tessel.matmul %61, %63 transpose_rhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %67 = tessel.scale %66, 0.70710678118654746 : tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %68 = tessel.softmax %67 causal : tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %69 = tessel.matmul %68, %65 : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %70 = tessel.transpose %69 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %71 = tessel.reshape %70 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.1"("model.h":45:42))
    %72 = tessel.matmul %71, %20 transpose_rhs : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.attn.proj"("model.h":45:17))
    %73 = tessel.add %72, %21 : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.attn.proj"("model.h":45:17))
    %74 = tessel.add %55, %73 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1"("model.h":45:66))
    %75 = tessel.layer_norm %74, %22, %23 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.ln2"("model.h":46:42))
    %76 = tessel.matmul %75, %24 transpose_rhs : (tensor<1x2x4xf32>, tensor<16x4xf32>) -> tensor<1x2x16xf32> loc("blocks.1.mlp.fc"("model.h":46:38))
    %77 = tessel.add %76, %25 : (tensor<1x2x16xf32>, tensor<16xf32>) -> tensor<1x2x16xf32> loc("blocks.1.mlp.fc"("model.h":46:38))
    %78 = tessel.gelu %77 : tensor<1x2x16xf32> loc("blocks.1"("model.h":46:35))
    %79 = tessel.matmul %78, %26 transpose_rhs : (tensor<1x2x16xf32>, tensor<4x16xf32>) -> tensor<1x2x4xf32> loc("blocks.1.mlp.proj"("model.h":46:22))
    %80 = tessel.add %79, %27 : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.mlp.proj"("model.h":46:22))
    %81 = tessel.add %74, %80 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1"("model.h":46:47))
    %82 = tessel.layer_norm %81, %2, %3 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32> loc("ln_f"("model.h":67:30))
    %83 = tessel.matmul %82, %0 transpose_rhs : (tensor<1x2x4xf32>, tensor<256x4xf32>) -> tensor<1x2x256xf32> loc("model.h":67:26)
    %84 = tessel.cross_entropy %83, %arg1 : (tensor<1x2x256xf32>, tensor<1x2xi32>) -> tensor<f32> loc("model.h":77:39)
    %85 = tessel.constant 1.000000e+00 : tensor<f32> loc("model.h":77:17)
    %86 = tessel.cross_entropy_grad %83, %arg1, %85 : (tensor<1x2x256xf32>, tensor<1x2xi32>, tensor<f32>) -> tensor<1x2x256xf32> loc("model.h":77:39)
    %87 = tessel.matmul %86, %0 : (tensor<1x2x256xf32>, tensor<256x4xf32>) -> tensor<1x2x4xf32> loc("model.h":67:26)
    %88 = tessel.reshape %82 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("model.h":67:26)
    %89 = tessel.reshape %86 : tensor<1x2x256xf32> -> tensor<2x256xf32> loc("model.h":67:26)
    %90 = tessel.matmul %89, %88 transpose_lhs : (tensor<2x256xf32>, tensor<2x4xf32>) -> tensor<256x4xf32> loc("model.h":67:26)
    %dinput, %dgamma, %dbeta = tessel.layer_norm_grad %81, %2, %87 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) loc("ln_f"("model.h":67:30))
    %91 = tessel.reduce_sum %dinput [0, 1] : tensor<1x2x4xf32> -> tensor<4xf32> loc("blocks.1.mlp.proj"("model.h":46:22))
    %92 = tessel.matmul %dinput, %26 : (tensor<1x2x4xf32>, tensor<4x16xf32>) -> tensor<1x2x16xf32> loc("blocks.1.mlp.proj"("model.h":46:22))
    %93 = tessel.reshape %78 : tensor<1x2x16xf32> -> tensor<2x16xf32> loc("blocks.1.mlp.proj"("model.h":46:22))
    %94 = tessel.reshape %dinput : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.1.mlp.proj"("model.h":46:22))
    %95 = tessel.matmul %94, %93 transpose_lhs : (tensor<2x4xf32>, tensor<2x16xf32>) -> tensor<4x16xf32> loc("blocks.1.mlp.proj"("model.h":46:22))
    %96 = tessel.gelu_grad %77, %92 : tensor<1x2x16xf32> loc("blocks.1"("model.h":46:35))
    %97 = tessel.reduce_sum %96 [0, 1] : tensor<1x2x16xf32> -> tensor<16xf32> loc("blocks.1.mlp.fc"("model.h":46:38))
    %98 = tessel.matmul %96, %24 : (tensor<1x2x16xf32>, tensor<16x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.mlp.fc"("model.h":46:38))
    %99 = tessel.reshape %75 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.1.mlp.fc"("model.h":46:38))
    %100 = tessel.reshape %96 : tensor<1x2x16xf32> -> tensor<2x16xf32> loc("blocks.1.mlp.fc"("model.h":46:38))
    %101 = tessel.matmul %100, %99 transpose_lhs : (tensor<2x16xf32>, tensor<2x4xf32>) -> tensor<16x4xf32> loc("blocks.1.mlp.fc"("model.h":46:38))
    %dinput_0, %dgamma_1, %dbeta_2 = tessel.layer_norm_grad %74, %22, %98 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) loc("blocks.1.ln2"("model.h":46:42))
    %102 = tessel.add %dinput, %dinput_0 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.ln2"("model.h":46:42))
    %103 = tessel.reduce_sum %102 [0, 1] : tensor<1x2x4xf32> -> tensor<4xf32> loc("blocks.1.attn.proj"("model.h":45:17))
    %104 = tessel.matmul %102, %20 : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.attn.proj"("model.h":45:17))
    %105 = tessel.reshape %71 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.1.attn.proj"("model.h":45:17))
    %106 = tessel.reshape %102 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.1.attn.proj"("model.h":45:17))
    %107 = tessel.matmul %106, %105 transpose_lhs : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc("blocks.1.attn.proj"("model.h":45:17))
    %108 = tessel.reshape %104 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %109 = tessel.transpose %108 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %110 = tessel.matmul %109, %65 transpose_rhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %111 = tessel.matmul %68, %109 transpose_lhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %112 = tessel.softmax_grad %68, %110 : tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %113 = tessel.scale %112, 0.70710678118654746 : tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %114 = tessel.matmul %113, %63 : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %115 = tessel.matmul %113, %61 transpose_lhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %116 = tessel.transpose %111 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %117 = tessel.reshape %116 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.1"("model.h":45:42))
    %118 = tessel.transpose %115 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %119 = tessel.reshape %118 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.1"("model.h":45:42))
    %120 = tessel.transpose %114 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.1"("model.h":45:42))
    %121 = tessel.reshape %120 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.1"("model.h":45:42))
    %122 = tessel.concat %121, %119, %117 along 2 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x12xf32> loc("blocks.1"("model.h":45:42))
    %123 = tessel.reduce_sum %122 [0, 1] : tensor<1x2x12xf32> -> tensor<12xf32> loc("blocks.1.attn.qkv"("model.h":45:46))
    %124 = tessel.matmul %122, %18 : (tensor<1x2x12xf32>, tensor<12x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.attn.qkv"("model.h":45:46))
    %125 = tessel.reshape %56 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.1.attn.qkv"("model.h":45:46))
    %126 = tessel.reshape %122 : tensor<1x2x12xf32> -> tensor<2x12xf32> loc("blocks.1.attn.qkv"("model.h":45:46))
    %127 = tessel.matmul %126, %125 transpose_lhs : (tensor<2x12xf32>, tensor<2x4xf32>) -> tensor<12x4xf32> loc("blocks.1.attn.qkv"("model.h":45:46))
    %dinput_3, %dgamma_4, %dbeta_5 = tessel.layer_norm_grad %55, %16, %124 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) loc("blocks.1.ln1"("model.h":45:50))
    %128 = tessel.add %102, %dinput_3 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.1.ln1"("model.h":45:50))
    %129 = tessel.reduce_sum %128 [0, 1] : tensor<1x2x4xf32> -> tensor<4xf32> loc("blocks.0.mlp.proj"("model.h":46:22))
    %130 = tessel.matmul %128, %14 : (tensor<1x2x4xf32>, tensor<4x16xf32>) -> tensor<1x2x16xf32> loc("blocks.0.mlp.proj"("model.h":46:22))
    %131 = tessel.reshape %52 : tensor<1x2x16xf32> -> tensor<2x16xf32> loc("blocks.0.mlp.proj"("model.h":46:22))
    %132 = tessel.reshape %128 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.0.mlp.proj"("model.h":46:22))
    %133 = tessel.matmul %132, %131 transpose_lhs : (tensor<2x4xf32>, tensor<2x16xf32>) -> tensor<4x16xf32> loc("blocks.0.mlp.proj"("model.h":46:22))
    %134 = tessel.gelu_grad %51, %130 : tensor<1x2x16xf32> loc("blocks.0"("model.h":46:35))
    %135 = tessel.reduce_sum %134 [0, 1] : tensor<1x2x16xf32> -> tensor<16xf32> loc("blocks.0.mlp.fc"("model.h":46:38))
    %136 = tessel.matmul %134, %12 : (tensor<1x2x16xf32>, tensor<16x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.mlp.fc"("model.h":46:38))
    %137 = tessel.reshape %49 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.0.mlp.fc"("model.h":46:38))
    %138 = tessel.reshape %134 : tensor<1x2x16xf32> -> tensor<2x16xf32> loc("blocks.0.mlp.fc"("model.h":46:38))
    %139 = tessel.matmul %138, %137 transpose_lhs : (tensor<2x16xf32>, tensor<2x4xf32>) -> tensor<16x4xf32> loc("blocks.0.mlp.fc"("model.h":46:38))
    %dinput_6, %dgamma_7, %dbeta_8 = tessel.layer_norm_grad %48, %10, %136 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) loc("blocks.0.ln2"("model.h":46:42))
    %140 = tessel.add %128, %dinput_6 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.ln2"("model.h":46:42))
    %141 = tessel.reduce_sum %140 [0, 1] : tensor<1x2x4xf32> -> tensor<4xf32> loc("blocks.0.attn.proj"("model.h":45:17))
    %142 = tessel.matmul %140, %8 : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.attn.proj"("model.h":45:17))
    %143 = tessel.reshape %45 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.0.attn.proj"("model.h":45:17))
    %144 = tessel.reshape %140 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.0.attn.proj"("model.h":45:17))
    %145 = tessel.matmul %144, %143 transpose_lhs : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc("blocks.0.attn.proj"("model.h":45:17))
    %146 = tessel.reshape %142 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %147 = tessel.transpose %146 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %148 = tessel.matmul %147, %39 transpose_rhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %149 = tessel.matmul %42, %147 transpose_lhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %150 = tessel.softmax_grad %42, %148 : tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %151 = tessel.scale %150, 0.70710678118654746 : tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %152 = tessel.matmul %151, %37 : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %153 = tessel.matmul %151, %35 transpose_lhs : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %154 = tessel.transpose %149 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %155 = tessel.reshape %154 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.0"("model.h":45:42))
    %156 = tessel.transpose %153 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %157 = tessel.reshape %156 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.0"("model.h":45:42))
    %158 = tessel.transpose %152 [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32> loc("blocks.0"("model.h":45:42))
    %159 = tessel.reshape %158 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32> loc("blocks.0"("model.h":45:42))
    %160 = tessel.concat %159, %157, %155 along 2 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x12xf32> loc("blocks.0"("model.h":45:42))
    %161 = tessel.reduce_sum %160 [0, 1] : tensor<1x2x12xf32> -> tensor<12xf32> loc("blocks.0.attn.qkv"("model.h":45:46))
    %162 = tessel.matmul %160, %6 : (tensor<1x2x12xf32>, tensor<12x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.attn.qkv"("model.h":45:46))
    %163 = tessel.reshape %30 : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("blocks.0.attn.qkv"("model.h":45:46))
    %164 = tessel.reshape %160 : tensor<1x2x12xf32> -> tensor<2x12xf32> loc("blocks.0.attn.qkv"("model.h":45:46))
    %165 = tessel.matmul %164, %163 transpose_lhs : (tensor<2x12xf32>, tensor<2x4xf32>) -> tensor<12x4xf32> loc("blocks.0.attn.qkv"("model.h":45:46))
    %dinput_9, %dgamma_10, %dbeta_11 = tessel.layer_norm_grad %29, %4, %162 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) loc("blocks.0.ln1"("model.h":45:50))
    %166 = tessel.add %140, %dinput_9 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32> loc("blocks.0.ln1"("model.h":45:50))
    %167 = tessel.reduce_sum %166 [0] : tensor<1x2x4xf32> -> tensor<2x4xf32> loc("model.h":64:49)
    %168 = tessel.embedding_grad %arg0, %166 : (tensor<1x2xi32>, tensor<1x2x4xf32>) -> tensor<256x4xf32> loc("wte"("model.h":64:27))
    %169 = tessel.add %90, %168 : (tensor<256x4xf32>, tensor<256x4xf32>) -> tensor<256x4xf32> loc("wte"("model.h":64:27))
    return %84, %169, %167, %dgamma, %dbeta, %dgamma_10, %dbeta_11, %165, %161, %145, %141, %dgamma_7, %dbeta_8, %139, %135, %133, %129, %dgamma_4, %dbeta_5, %127, %123, %107, %103, %dgamma_1, %dbeta_2, %101, %97, %95, %91 : tensor<f32>, tensor<256x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4xf32> loc("model.h":77:17)
  } loc("model.h":58:33)

// -----

// Wrong stage: before autodiff there is no backward pass to recompute for.
// expected-error @+1 {{tessel-activation-checkpointing: there is no @train_step (run tessel-autodiff first); it runs after tessel-autodiff, last (after tessel-fuse)}}
module {
  func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
    %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32> loc("blocks.0"("model.h":3:1))
    return %l : tensor<f32>
  }
}

// -----

// A fused kernel is recomputed whole (in both modes): the clone is the same kernel on the
// same operands, and the backward op reads it, so the forward kernel's result dies in the
// forward pass.
// KERNEL-LABEL: func.func @train_step(%arg0: tensor<2x4x4xf32>
// KERNEL: %[[F:.*]] = tessel.fused(%arg0)
// KERNEL: tessel.reduce_mean %[[F]]
// KERNEL: %[[R:.*]] = tessel.fused(%arg0)
// KERNEL-NEXT: ^bb0
// KERNEL-NEXT: tessel.scale
// KERNEL-NEXT: tessel.softmax
// KERNEL-NEXT: tessel.yield
// KERNEL-NEXT: }
// KERNEL-NEXT: tessel.softmax_grad %[[R]], %arg0
func.func @train_step(%s: tensor<2x4x4xf32> {tessel.input = "s"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<2x4x4xf32> {tessel.output = "d"}) {
  %0 = tessel.fused(%s) : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  ^bb0(%s0: tensor<2x4x4xf32>):
    %1 = tessel.scale %s0, 0.5 : tensor<2x4x4xf32>
    %2 = tessel.softmax %1 causal : tensor<2x4x4xf32>
    tessel.yield %2 : tensor<2x4x4xf32>
  } loc("blocks.0"("model.h":4:1))
  %l = tessel.reduce_mean %0 [0, 1, 2] : tensor<2x4x4xf32> -> tensor<f32> loc("blocks.0"("model.h":5:1))
  %d = tessel.softmax_grad %0, %s : tensor<2x4x4xf32>
  return %l, %d : tensor<f32>, tensor<2x4x4xf32>
}
