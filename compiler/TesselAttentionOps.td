//===- TesselAttentionOps.td - rotary embeddings and grouped attention --*- tablegen -*-===//
//
// The attention ops of Llama-style models: rotary position embeddings (RoPE, Su et al. 2021)
// and grouped-query causal attention (GQA, Ainslie et al. 2023). `tessel.rope` is a primitive
// with its own kernel; its VJP is itself with `inverse` toggled (a rotation's transpose is its
// inverse). `tessel.grouped_attention`, like `tessel.causal_attention`, runs as one fused
// kernel per (batch, head); tessel-decompose-attention can instead rewrite either into
// reshapes, transposes, matmuls and a causal softmax before autodiff. Their VJPs are
// `tessel.grouped_attention_grad` and `tessel.causal_attention_grad`, which recompute the
// probabilities from q and k (nothing beyond the inputs is saved by the forward).
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_ATTENTION_OPS_TD
#define TESSEL_ATTENTION_OPS_TD

def Tessel_RopeOp : Tessel_Op<"rope", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "rotary position embedding over heads (rotate-half pairing)";
  let description = [{
    `input`: `[B, T, N * D]` with `N = num_heads` heads of `D` channels, D even; the result
    has the same type. For head `h`, `i < D/2` and position `t` (the index along dimension
    1, from 0), with `a = t * theta^(-2i/D)` (computed in double, then its cosine and sine),
    `x1 = x[h*D + i]` and `x2 = x[h*D + i + D/2]`:

    `y1 = x1 cos a - x2 sin a`, `y2 = x2 cos a + x1 sin a`

    (the "rotate half" pairing of GPT-NeoX and Hugging Face Llama). With `inverse` every
    pair turns by `-a` instead: that is the transpose of the rotation, so the VJP of `rope`
    is `rope` with `inverse` toggled.

    `theta` must be finite and > 0, and make every inverse frequency `theta^(-2i/D)` finite
    and > 0 and every angle `t * theta^(-2i/D)` (t < T) finite, in double as the kernels and
    the reference compute them (verifier; compiler/Shapes.h, ropeThetaError). Only a theta
    below about 1e-300 breaks this: at 5e-324 with D = 64, `theta^(-62/64)` is inf and the
    angle at t = 0 is `0 * inf = NaN`.

    Example:

    ```mlir
    %y = tessel.rope %x heads 4 theta 1.000000e+04 : tensor<4x32x64xf32>
    %dx = tessel.rope %dy heads 4 theta 1.000000e+04 inverse : tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       F64Attr:$theta, UnitAttr:$inverse);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $input `heads` $num_heads `theta` $theta (`inverse` $inverse^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Tessel_GroupedAttentionOp : Tessel_Op<"grouped_attention",
    [Pure, SameOperandsAndResultElementType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "grouped-query causal self-attention";
  let description = [{
    One fused kernel per (batch, head) (tessel-decompose-attention can instead rewrite it
    into primitives before autodiff). `q`:
    `[B, T, NH * D]`, `k` and `v`: `[B, T, NKV * D]` with `NH = num_heads`,
    `NKV = num_kv_heads` dividing NH; result: `[B, T, NH * D]`. With `G = NH / NKV`, query
    head `h` (channels `[h*D, (h+1)*D)` of `q` and of the result) attends with key/value head
    `h / G`: `y_h = softmax_causal(q_h k_{h/G}^T / sqrt(D)) v_{h/G}`. `G = 1` is multi-head
    attention, `NKV = 1` multi-query attention.

    Example:

    ```mlir
    %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2
        : (tensor<4x32x64xf32>, tensor<4x32x32xf32>, tensor<4x32x32xf32>) -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$q, Tessel_FloatTensor:$k, Tessel_FloatTensor:$v,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `heads` $num_heads `kv_heads` $num_kv_heads attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tessel_CausalAttentionGradOp : Tessel_Op<"causal_attention_grad",
    [Pure, SameOperandsAndResultElementType]> {
  let summary = "backward of causal_attention: the gradient of its packed qkv";
  let description = [{
    `qkv`: `[B, T, 3C]` as causal_attention's operand, `grad`: `[B, T, C]` (the gradient of
    its result); result: `[B, T, 3C]`, the gradients of q, k and v packed as `qkv` is. Per
    head, with `S = q k^T / sqrt(HS)` (causal), `P = softmax(S)` recomputed from q and k:
    `dv = P^T dy`, `dP = dy v^T`, `dS = P * (dP - rowsum(P * dP))`,
    `dq = dS k / sqrt(HS)`, `dk = dS^T q / sqrt(HS)` (the softmax and matmul VJPs composed).

    Example:

    ```mlir
    %dqkv = tessel.causal_attention_grad %qkv, %dy heads 4
        : (tensor<4x32x192xf32>, tensor<4x32x64xf32>) -> tensor<4x32x192xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$qkv, Tessel_FloatTensor:$grad,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $qkv `,` $grad `heads` $num_heads attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tessel_GroupedAttentionGradOp : Tessel_Op<"grouped_attention_grad",
    [Pure, SameOperandsAndResultElementType]> {
  let summary = "backward of grouped_attention: the gradients of q, k and v";
  let description = [{
    Operands as grouped_attention's, plus `grad` `[B, T, NH * D]` (the gradient of its
    result); results `dq`, `dk`, `dv` with the shapes of q, k, v. The formulas of
    causal_attention_grad per query head h; `dk` and `dv` of kv head g are the sums over
    its G = NH / NKV query heads, in head order.

    Example:

    ```mlir
    %dq, %dk, %dv = tessel.grouped_attention_grad %q, %k, %v, %dy heads 4 kv_heads 2
        : (tensor<4x32x64xf32>, tensor<4x32x32xf32>, tensor<4x32x32xf32>, tensor<4x32x64xf32>)
        -> (tensor<4x32x64xf32>, tensor<4x32x32xf32>, tensor<4x32x32xf32>)
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$q, Tessel_FloatTensor:$k, Tessel_FloatTensor:$v,
                       Tessel_FloatTensor:$grad,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads);
  let results = (outs Tessel_FloatTensor:$dq, Tessel_FloatTensor:$dk, Tessel_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $grad `heads` $num_heads `kv_heads` $num_kv_heads attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_ATTENTION_OPS_TD
