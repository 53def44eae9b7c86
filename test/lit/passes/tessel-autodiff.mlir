// --tessel-autodiff (passes/Autodiff.cpp, VJP rules in compiler/VJP.cpp): @forward is kept
// unchanged and cloned into @train_step, which returns the loss and then one gradient per
// trainable tessel.param in parameter order, each tagged {tessel.grad = "<name>"}. The
// backward ops follow the forward ones, last forward op first, starting from the seed
// `tessel.constant 1.0`. Gradients of non-parameter operands (inputs) are built too and
// left unused; the pipeline's cleanup stage removes them.
// -verify-diagnostics checks the remark of a parameter the loss ignores and the errors
// of the cases at the end; every other case must produce no diagnostic at all.
// RUN: tessel-opt %s -split-input-file -tessel-autodiff -verify-diagnostics | FileCheck %s

// A Linear layer and the loss. matmul transpose_rhs gives two matmuls: dx = dz w (not
// returned: x is an input) and dw = dz^T x (transpose_lhs); the bias, broadcast over the
// batch, gets a reduce_sum over dim 0. The extra "logits" output is not returned.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<4x16xf32> {tessel.output = "logits"})
// CHECK-NOT: tessel.constant
// CHECK: return
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32> {tessel.input = "x"}, %[[T:.*]]: tensor<4xi32> {tessel.input = "t"})
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"}, tensor<16xf32> {tessel.grad = "fc.bias"})
// CHECK-NEXT: %[[W:.*]] = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
// CHECK-NEXT: %[[B:.*]] = tessel.param "fc.bias" init zeros : tensor<16xf32>
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul %[[X]], %[[W]] transpose_rhs
// CHECK-NEXT: %[[Z:.*]] = tessel.add %[[Y]], %[[B]]
// CHECK-NEXT: %[[L:.*]] = tessel.cross_entropy %[[Z]], %[[T]]
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[DZ:.*]] = tessel.cross_entropy_grad %[[Z]], %[[T]], %[[SEED]] : (tensor<4x16xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[DB:.*]] = tessel.reduce_sum %[[DZ]] [0] : tensor<4x16xf32> -> tensor<16xf32>
// CHECK-NEXT: tessel.matmul %[[DZ]], %[[W]] : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[DW:.*]] = tessel.matmul %[[DZ]], %[[X]] transpose_lhs : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: return %[[L]], %[[DW]], %[[DB]] : tensor<f32>, tensor<16x8xf32>, tensor<16xf32>
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}, %t: tensor<4xi32> {tessel.input = "t"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<4x16xf32> {tessel.output = "logits"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %z = tessel.add %y, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %l = tessel.cross_entropy %z, %t : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<f32>
  return %l, %z : tensor<f32>, tensor<4x16xf32>
}

// -----

// C = A^T B^T with both parameters: dA = (dC B)^T and dB = dC^T A^T, i.e.
// `matmul dC, A transpose_lhs transpose_rhs`. reduce_mean over [1, 0] is a broadcast of
// the seed over sorted dims [0, 1] scaled by 1/18.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<5x3xf32> {tessel.grad = "a"}, tensor<6x5xf32> {tessel.grad = "b"})
// CHECK-NEXT: %[[A:.*]] = tessel.param "a"
// CHECK-NEXT: %[[B:.*]] = tessel.param "b"
// CHECK-NEXT: %[[C:.*]] = tessel.matmul %[[A]], %[[B]] transpose_lhs transpose_rhs
// CHECK-NEXT: %[[L:.*]] = tessel.reduce_mean %[[C]] [1, 0]
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[BC:.*]] = tessel.broadcast %[[SEED]] [0, 1] : tensor<f32> -> tensor<3x6xf32>
// CHECK-NEXT: %[[DC:.*]] = tessel.scale %[[BC]], 0.055555555555555552 : tensor<3x6xf32>
// CHECK-NEXT: %[[DAT:.*]] = tessel.matmul %[[DC]], %[[B]] : (tensor<3x6xf32>, tensor<6x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT: %[[DA:.*]] = tessel.transpose %[[DAT]] [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
// CHECK-NEXT: %[[DB:.*]] = tessel.matmul %[[DC]], %[[A]] transpose_lhs transpose_rhs : (tensor<3x6xf32>, tensor<5x3xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: return %[[L]], %[[DA]], %[[DB]]
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %a = tessel.param "a" {std = 1.0 : f64} : tensor<5x3xf32>
  %b = tessel.param "b" {std = 1.0 : f64} : tensor<6x5xf32>
  %c = tessel.matmul %a, %b transpose_lhs transpose_rhs : (tensor<5x3xf32>, tensor<6x5xf32>) -> tensor<3x6xf32>
  %l = tessel.reduce_mean %c [1, 0] : tensor<3x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A rank-2 weight shared by a batched lhs: its gradient folds the batch into the rows,
// reshaping x to [6, 4] and dy to [6, 5], then one matmul transpose_lhs.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {tessel.input = "x"})
// CHECK-NEXT: %[[W:.*]] = tessel.param "w"
// CHECK-NEXT: tessel.matmul %[[X]], %[[W]] transpose_rhs : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[L:.*]] = tessel.reduce_sum
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00
// CHECK-NEXT: %[[DY:.*]] = tessel.broadcast %[[SEED]] [0, 1, 2] : tensor<f32> -> tensor<2x3x5xf32>
// CHECK-NEXT: tessel.matmul %[[DY]], %[[W]] : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[X2:.*]] = tessel.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[DY2:.*]] = tessel.reshape %[[DY]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK-NEXT: %[[DW:.*]] = tessel.matmul %[[DY2]], %[[X2]] transpose_lhs : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: return %[[L]], %[[DW]] : tensor<f32>, tensor<5x4xf32>
func.func @forward(%x: tensor<2x3x4xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<5x4xf32>
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %l = tessel.reduce_sum %y [0, 1, 2] : tensor<2x3x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Suffix broadcasting on either side: the [16] lhs of the add is summed over dims [0, 1],
// the [4, 16] rhs of the sub over dim 0 after a scale by -1. reshape and transpose go
// back with the inverse shape and permutation ([2, 0, 1] -> [1, 2, 0]).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "b"}, tensor<4x16xf32> {tessel.grad = "c"})
// CHECK: %[[SEED:.*]] = tessel.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[DR:.*]] = tessel.broadcast %[[SEED]] [0, 1] : tensor<f32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[DT:.*]] = tessel.reshape %[[DR]] : tensor<16x8xf32> -> tensor<16x2x4xf32>
// CHECK-NEXT: %[[DD:.*]] = tessel.transpose %[[DT]] [1, 2, 0] : tensor<16x2x4xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[NEG:.*]] = tessel.scale %[[DD]], -1.000000e+00 : tensor<2x4x16xf32>
// CHECK-NEXT: %[[DC:.*]] = tessel.reduce_sum %[[NEG]] [0] : tensor<2x4x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[DB:.*]] = tessel.reduce_sum %[[DD]] [0, 1] : tensor<2x4x16xf32> -> tensor<16xf32>
// CHECK-NEXT: return %{{.*}}, %[[DB]], %[[DC]]
func.func @forward(%y: tensor<2x4x16xf32> {tessel.input = "y"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %b = tessel.param "b" init zeros : tensor<16xf32>
  %c = tessel.param "c" init zeros : tensor<4x16xf32>
  %z = tessel.add %b, %y : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %d = tessel.sub %z, %c : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
  %t = tessel.transpose %d [2, 0, 1] : tensor<2x4x16xf32> -> tensor<16x2x4xf32>
  %r = tessel.reshape %t : tensor<16x2x4xf32> -> tensor<16x8xf32>
  %l = tessel.reduce_sum %r [0, 1] : tensor<16x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A tied weight: the embedding table is also the LM head. Both uses contribute and the
// contributions are summed with tessel.add, the LM head's (visited first) on the left.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[TOK:.*]]: tensor<2x3xi32> {tessel.input = "tokens"})
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<10x4xf32> {tessel.grad = "wte.weight"})
// CHECK-NEXT: %[[WTE:.*]] = tessel.param "wte.weight"
// CHECK-NEXT: %[[E:.*]] = tessel.embedding %[[WTE]], %[[TOK]]
// CHECK-NEXT: %[[LOGITS:.*]] = tessel.matmul %[[E]], %[[WTE]] transpose_rhs
// CHECK-NEXT: %[[L:.*]] = tessel.cross_entropy %[[LOGITS]], %[[TOK]]
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[DLOGITS:.*]] = tessel.cross_entropy_grad %[[LOGITS]], %[[TOK]], %[[SEED]]
// CHECK-NEXT: %[[DE:.*]] = tessel.matmul %[[DLOGITS]], %[[WTE]] : (tensor<2x3x10xf32>, tensor<10x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[E2:.*]] = tessel.reshape %[[E]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[DL2:.*]] = tessel.reshape %[[DLOGITS]] : tensor<2x3x10xf32> -> tensor<6x10xf32>
// CHECK-NEXT: %[[DHEAD:.*]] = tessel.matmul %[[DL2]], %[[E2]] transpose_lhs : (tensor<6x10xf32>, tensor<6x4xf32>) -> tensor<10x4xf32>
// CHECK-NEXT: %[[DEMB:.*]] = tessel.embedding_grad %[[TOK]], %[[DE]] : (tensor<2x3xi32>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
// CHECK-NEXT: %[[DW:.*]] = tessel.add %[[DHEAD]], %[[DEMB]] : (tensor<10x4xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
// CHECK-NEXT: return %[[L]], %[[DW]] : tensor<f32>, tensor<10x4xf32>
func.func @forward(%t: tensor<2x3xi32> {tessel.input = "tokens"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte.weight" {std = 2.000000e-02 : f64} : tensor<10x4xf32>
  %e = tessel.embedding %wte, %t : (tensor<10x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %logits = tessel.matmul %e, %wte transpose_rhs : (tensor<2x3x4xf32>, tensor<10x4xf32>) -> tensor<2x3x10xf32>
  %l = tessel.cross_entropy %logits, %t : (tensor<2x3x10xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Parameters the loss does not reach (never used, or feeding only another output) get an
// explicit zero gradient and a remark at their declaration. The loss is not the first
// result here; @train_step still returns it first.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<3xf32> {tessel.grad = "unused"}, tensor<2x3xf32> {tessel.grad = "used"}, tensor<3xf32> {tessel.grad = "side"})
// CHECK: %[[DUSED:.*]] = tessel.broadcast
// CHECK-NEXT: %[[ZERO1:.*]] = tessel.constant 0.000000e+00 : tensor<3xf32>
// CHECK-NEXT: %[[ZERO2:.*]] = tessel.constant 0.000000e+00 : tensor<3xf32>
// CHECK-NEXT: return %{{.*}}, %[[ZERO1]], %[[DUSED]], %[[ZERO2]] : tensor<f32>, tensor<3xf32>, tensor<2x3xf32>, tensor<3xf32>
func.func @forward() -> (tensor<3xf32> {tessel.output = "side"}, tensor<f32> {tessel.output = "loss"}) {
  // expected-remark @+1 {{parameter 'unused' does not affect the loss; its gradient is zero}}
  %u = tessel.param "unused" init ones : tensor<3xf32>
  %p = tessel.param "used" {std = 1.0 : f64} : tensor<2x3xf32>
  // expected-remark @+1 {{parameter 'side' does not affect the loss; its gradient is zero}}
  %s = tessel.param "side" init ones : tensor<3xf32>
  %g = tessel.gelu %s : tensor<3xf32>
  %l = tessel.reduce_sum %p [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %g, %l : tensor<3xf32>, tensor<f32>
}

// -----

// Optimizer state (`state`) is never differentiated and gets no result. The middle part
// of the split does not reach the loss: the split's VJP fills it with a zero constant
// before the concat. concat's VJP is a split; softmax_grad reads the softmax's output,
// gelu_grad and layer_norm_grad the forward inputs, and layer_norm_grad keeps epsilon.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<4x6xf32> {tessel.grad = "x"}, tensor<6xf32> {tessel.grad = "ln.weight"}, tensor<6xf32> {tessel.grad = "ln.bias"})
// CHECK-NEXT: %[[X:.*]] = tessel.param "x"
// CHECK-NEXT: %[[G:.*]] = tessel.param "ln.weight"
// CHECK-NEXT: tessel.param "ln.bias"
// CHECK-NEXT: tessel.param "x:exp_avg" state
// CHECK-NEXT: tessel.layer_norm
// CHECK-NEXT: tessel.add
// CHECK-NEXT: %[[P:.*]]:3 = tessel.split
// CHECK-NEXT: %[[SM:.*]] = tessel.softmax %[[P]]#0
// CHECK-NEXT: %[[GE:.*]] = tessel.gelu %[[P]]#2
// CHECK-NEXT: %[[C:.*]] = tessel.concat %[[SM]], %[[GE]] along 1
// CHECK-NEXT: %[[L:.*]] = tessel.cross_entropy %[[C]]
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[DC:.*]] = tessel.cross_entropy_grad %[[C]], %{{.*}}, %[[SEED]]
// CHECK-NEXT: %[[DP:.*]]:2 = tessel.split %[[DC]] along 1 : tensor<4x4xf32> -> tensor<4x2xf32>, tensor<4x2xf32>
// CHECK-NEXT: %[[DGE:.*]] = tessel.gelu_grad %[[P]]#2, %[[DP]]#1 : tensor<4x2xf32>
// CHECK-NEXT: %[[DSM:.*]] = tessel.softmax_grad %[[SM]], %[[DP]]#0 : tensor<4x2xf32>
// CHECK-NEXT: %[[ZERO:.*]] = tessel.constant 0.000000e+00 : tensor<4x2xf32>
// CHECK-NEXT: %[[DS:.*]] = tessel.concat %[[DSM]], %[[ZERO]], %[[DGE]] along 1 : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = tessel.layer_norm_grad %[[X]], %[[G]], %[[DS]] {epsilon = 1.000000e-03 : f64}
// CHECK-NEXT: return %[[L]], %[[DX]], %[[DG]], %[[DB]]
func.func @forward(%t: tensor<4xi32> {tessel.input = "t"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %x = tessel.param "x" {std = 1.0 : f64} : tensor<4x6xf32>
  %g = tessel.param "ln.weight" init ones : tensor<6xf32>
  %b = tessel.param "ln.bias" init zeros : tensor<6xf32>
  %m = tessel.param "x:exp_avg" state init zeros : tensor<4x6xf32>
  %ln = tessel.layer_norm %x, %g, %b {epsilon = 1.000000e-03 : f64} : (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %s = tessel.add %ln, %m : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %p0, %p1, %p2 = tessel.split %s along 1 : tensor<4x6xf32> -> tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
  %sm = tessel.softmax %p0 : tensor<4x2xf32>
  %ge = tessel.gelu %p2 : tensor<4x2xf32>
  %c = tessel.concat %sm, %ge along 1 : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  %l = tessel.cross_entropy %c, %t : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// relu and scale; mul of a parameter with itself accumulates both operands' gradients.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "p"})
// CHECK-NEXT: %[[P:.*]] = tessel.param "p"
// CHECK-NEXT: %[[SQ:.*]] = tessel.mul %[[P]], %[[P]]
// CHECK-NEXT: %[[R:.*]] = tessel.relu %[[SQ]]
// CHECK-NEXT: %[[S:.*]] = tessel.scale %[[R]], 5.000000e-01
// CHECK-NEXT: %[[L:.*]] = tessel.reduce_sum %[[S]] [0]
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00
// CHECK-NEXT: %[[DS:.*]] = tessel.broadcast %[[SEED]] [0] : tensor<f32> -> tensor<8xf32>
// CHECK-NEXT: %[[DR:.*]] = tessel.scale %[[DS]], 5.000000e-01
// CHECK-NEXT: %[[DSQ:.*]] = tessel.relu_grad %[[SQ]], %[[DR]]
// CHECK-NEXT: %[[D0:.*]] = tessel.mul %[[DSQ]], %[[P]]
// CHECK-NEXT: %[[D1:.*]] = tessel.mul %[[DSQ]], %[[P]]
// CHECK-NEXT: %[[DP:.*]] = tessel.add %[[D0]], %[[D1]]
// CHECK-NEXT: return %[[L]], %[[DP]]
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %p = tessel.param "p" {std = 1.0 : f64} : tensor<8xf32>
  %sq = tessel.mul %p, %p : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = tessel.relu %sq : tensor<8xf32>
  %s = tessel.scale %r, 0.5 : tensor<8xf32>
  %l = tessel.reduce_sum %s [0] : tensor<8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Errors. No function to differentiate:
// expected-error @+1 {{tessel-autodiff: no function @forward to differentiate}}
module {
  func.func @model() {
    return
  }
}

// -----

func.func @train_step() {
  return
}
// expected-error @+1 {{tessel-autodiff: @train_step already exists}}
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %p = tessel.param "p" {std = 1.0 : f64} : tensor<f32>
  return %p : tensor<f32>
}

// -----

// expected-error @+1 {{tessel-autodiff: @forward has no result tagged {tessel.output = "loss"}}}
func.func @forward() -> (tensor<f32> {tessel.output = "logits"}) {
  %p = tessel.param "p" {std = 1.0 : f64} : tensor<f32>
  return %p : tensor<f32>
}

// -----

// causal_attention's VJP is one op: causal_attention_grad of its packed qkv and the
// gradient of its result, giving the gradient of qkv (no decomposition before autodiff).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[QKV:.*]] = tessel.param "qkv"
// CHECK: tessel.causal_attention %[[QKV]] heads 2
// CHECK: tessel.causal_attention_grad %[[QKV]], %{{.*}} heads 2 : (tensor<2x8x12xf32>, tensor<2x8x4xf32>) -> tensor<2x8x12xf32>
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %qkv = tessel.param "qkv" {std = 1.0 : f64} : tensor<2x8x12xf32>
  %a = tessel.causal_attention %qkv heads 2 : tensor<2x8x12xf32> -> tensor<2x8x4xf32>
  %l = tessel.reduce_sum %a [0, 1, 2] : tensor<2x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The same op off the differentiated path is fine: it only feeds another output, so no
// backward op refers to it (the cleanup stage drops it from @train_step).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<2x8x12xf32> {tessel.grad = "qkv"})
// CHECK-NEXT: %[[QKV:.*]] = tessel.param "qkv"
// CHECK-NEXT: tessel.causal_attention %{{.*}} heads 2
// CHECK-NEXT: %[[L:.*]] = tessel.reduce_sum %[[QKV]]
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00
// CHECK-NEXT: %[[D:.*]] = tessel.broadcast %[[SEED]] [0, 1, 2] : tensor<f32> -> tensor<2x8x12xf32>
// CHECK-NEXT: return %[[L]], %[[D]]
func.func @forward(%x: tensor<2x8x12xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}, tensor<2x8x4xf32> {tessel.output = "attn"}) {
  %qkv = tessel.param "qkv" {std = 1.0 : f64} : tensor<2x8x12xf32>
  %a = tessel.causal_attention %x heads 2 : tensor<2x8x12xf32> -> tensor<2x8x4xf32>
  %l = tessel.reduce_sum %qkv [0, 1, 2] : tensor<2x8x12xf32> -> tensor<f32>
  return %l, %a : tensor<f32>, tensor<2x8x4xf32>
}

// -----

// A concat of unequal parts has no VJP (split makes equal parts only).
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %a = tessel.param "a" {std = 1.0 : f64} : tensor<2x3xf32>
  %b = tessel.param "b" {std = 1.0 : f64} : tensor<2x5xf32>
  // expected-error @+1 {{'tessel.concat' op has no VJP rule for inputs of unequal sizes along axis 1 (split produces equal parts only)}}
  %c = tessel.concat %a, %b along 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %l = tessel.reduce_sum %c [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Wrong stage: after fusion (tessel.fused has no VJP rule).
// expected-error @+1 {{tessel-autodiff: @forward is already fused (tessel.fused present); it runs once, before tessel-fuse}}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 1.0 : f64} : tensor<8xf32>
  %0 = tessel.fused(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %w0: tensor<8xf32>):
    %1 = tessel.mul %x0, %w0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = tessel.gelu %1 : tensor<4x8xf32>
    tessel.yield %2 : tensor<4x8xf32>
  }
  %l = tessel.reduce_mean %0 [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
