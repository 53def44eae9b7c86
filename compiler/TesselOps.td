//===- TesselOps.td - tessel dialect ops ---------------------------*- tablegen -*-===//
//
// Every op: a one-line summary, a description with an example, an assemblyFormat, and a
// verifier (TesselOps.cpp) that names the offending shapes. Shape rules live in plain C++
// (compiler/Shapes.h) so the DSL, the verifiers and the tests share one definition.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_OPS_TD
#define TESSEL_OPS_TD

include "compiler/TesselDialect.td"
include "compiler/TesselInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def Tessel_ParamOp : Tessel_Op<"param"> {
  let summary = "a named trainable parameter";
  let description = [{
    Produces the current value of the parameter called `name`, a stable hierarchical
    path such as `blocks.3.attn.qkv.weight` that plans refer to. `init` says how the
    runtime initialises it: `normal` (the default, not printed) draws from N(0, `std`^2)
    and needs `std`; `zeros` and `ones` take no `std`.

    A parameter is program state, so `param` is deliberately not `Pure`: it is kept even
    when nothing uses it (an unused parameter still gets an explicit zero gradient) and
    two `param` ops are never merged. Names are unique within a function.

    `state` marks optimizer state rather than a trainable parameter (PyTorch's
    `exp_avg`, `exp_avg_sq`, `momentum_buffer`, named `<parameter>:<slot>`): it is
    updated by `tessel.assign` and never differentiated.

    Example:

    ```mlir
    %w = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<192x64xf32>
    %g = tessel.param "blocks.0.ln1.weight" init ones : tensor<64xf32>
    %m = tessel.param "wte.weight:exp_avg" state init zeros : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name,
                       DefaultValuedAttr<Tessel_InitKindAttr, "::tessel::InitKind::normal">:$init,
                       OptionalAttr<F64Attr>:$std,
                       UnitAttr:$state);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$name (`state` $state^)? (`init` $init^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

def Tessel_MatmulOp : Tessel_Op<"matmul", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "batched matrix product with transpose flags";
  let description = [{
    `lhs`: `[batch..., M, K]` (`[batch..., K, M]` with `transpose_lhs`);
    `rhs`: `[batch..., K, N]` (`[batch..., N, K]` with `transpose_rhs`), or a rank-2
    `rhs` shared by every batch (a weight). When `rhs` has rank > 2 its batch dimensions
    equal those of `lhs`. Result: `[batch..., M, N]`.

    A `Linear` layer with a PyTorch-layout weight `[out, in]` is
    `matmul %x, %w transpose_rhs`.

    Example:

    ```mlir
    %y = tessel.matmul %x, %w transpose_rhs
        : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$lhs, Tessel_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Tessel_BinaryOp<string mnemonic, string formula>
    : Tessel_Op<mnemonic, [Pure, SameOperandsAndResultElementType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "elementwise " # formula # " with suffix broadcasting";
  let description = [{
    Computes `result = }] # formula # [{` elementwise. Operand shapes are equal, or the
    shorter one equals the trailing dimensions of the longer one; the result has the
    longer shape.

    Example:

    ```mlir
    %y = tessel.}] # mnemonic # [{ %x, %b : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$lhs, Tessel_FloatTensor:$rhs);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_AddOp : Tessel_BinaryOp<"add", "lhs + rhs">;
def Tessel_SubOp : Tessel_BinaryOp<"sub", "lhs - rhs">;
def Tessel_MulOp : Tessel_BinaryOp<"mul", "lhs * rhs">;

def Tessel_ScaleOp : Tessel_Op<"scale", [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "multiply by a compile-time constant";
  let description = [{
    `result = input * factor`, elementwise, with `factor` an f64 constant.

    Example:

    ```mlir
    %y = tessel.scale %x, 1.250000e-01 : tensor<4x4x32x32xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input `,` $factor attr-dict `:` type($result)";
}

class Tessel_UnaryOp<string mnemonic, string summaryText, string formula>
    : Tessel_Op<mnemonic, [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = summaryText;
  let description = [{
    Elementwise `}] # formula # [{`.

    Example:

    ```mlir
    %y = tessel.}] # mnemonic # [{ %x : tensor<4x32x256xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Tessel_GeluOp : Tessel_UnaryOp<"gelu", "GELU activation, tanh form",
    "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (PyTorch gelu(approximate='tanh'))">;
def Tessel_ReluOp : Tessel_UnaryOp<"relu", "ReLU activation", "max(x, 0)">;
def Tessel_SiluOp : Tessel_UnaryOp<"silu", "SiLU (swish) activation",
    "x * sigmoid(x) = x / (1 + exp(-x))  (Elfwing et al. 2017; PyTorch F.silu)">;

def Tessel_CastOp : Tessel_Op<"cast", [Pure, SameOperandsAndResultShape,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "convert a float tensor between f32 and bf16";
  let description = [{
    Elementwise conversion between the float element types. f32 to bf16 rounds to nearest,
    ties to even (NaN stays NaN, finite values above the largest bf16 round to infinity, as
    PyTorch's `tensor.to(torch.bfloat16)`); bf16 to f32 is exact. The mixed-precision pass
    inserts it where f32 master weights and f32 inputs enter a bf16 computation; its VJP
    casts the gradient back, so parameter gradients arrive in f32.

    Example:

    ```mlir
    %w16 = tessel.cast %w : tensor<192x64xf32> -> tensor<192x64xbf16>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Normalisation and softmax
//===----------------------------------------------------------------------===//

def Tessel_LayerNormOp : Tessel_Op<"layer_norm", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `y = (x - mean) / sqrt(var + epsilon) * gamma + beta`, with the mean and the biased
    variance taken over the last dimension C (Ba et al. 2016; PyTorch `LayerNorm`).
    `input`: `[..., C]`; `gamma`, `beta`: `[C]`; result: the shape of `input`.

    `epsilon` must lie in [2^-126, 1] (verifier; compiler/Shapes.h, normEpsilonError). The
    kernels add it in f32, the reference in f64: from 2^-126, f32's smallest normal number,
    f32 keeps its value (a smaller one rounds to a subnormal or 0, and an all-zero row gives
    0 * inf = NaN where the reference gives 0), and the inverse deviation of an all-zero row
    (at most 2^63) and its square stay finite in f32; above 1 it outweighs the unit-scale
    variance the norm divides by (at 1e300 it is inf in f32 and every output 0).

    Example:

    ```mlir
    %y = tessel.layer_norm %x, %g, %b {epsilon = 1.000000e-05 : f64}
        : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_FloatTensor:$gamma,
                       Tessel_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_RmsNormOp : Tessel_Op<"rms_norm", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "RMS normalisation over the last dimension";
  let description = [{
    `y = x * rsqrt(mean(x^2) + epsilon) * weight`, with the mean of squares taken over the
    last dimension C (Zhang & Sennrich 2019; PyTorch `RMSNorm`, the Llama norm): no mean is
    subtracted and there is no bias. The statistics are computed in f32 (f64 in the
    reference), whatever the element type. `input`: `[..., C]`; `weight`: `[C]`; result:
    the shape of `input`.
    `epsilon`: as layer_norm's, in [2^-126, 1].

    Example:

    ```mlir
    %y = tessel.rms_norm %x, %w {epsilon = 1.000000e-05 : f64}
        : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_SoftmaxOp : Tessel_Op<"softmax", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "softmax over the last dimension, optionally causally masked";
  let description = [{
    `y[..., i, j] = exp(x[..., i, j] - m) / sum_j' exp(x[..., i, j'] - m)` over the last
    dimension. With `causal` the input is `[..., T, T]` and entries with `j > i` are
    excluded from the sum and are exactly 0 in the result.

    Example:

    ```mlir
    %p = tessel.softmax %s causal : tensor<4x4x32x32xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, UnitAttr:$causal);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input (`causal` $causal^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding and the loss
//===----------------------------------------------------------------------===//

def Tessel_EmbeddingOp : Tessel_Op<"embedding", [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "row gather from an embedding table";
  let description = [{
    `result[i..., c] = table[indices[i...], c]`. `table`: `[V, C]`; `indices`: i32 with
    any shape, values in `[0, V)`; result: `[indices..., C]`. An index outside `[0, V)`
    cannot be reported from a kernel: its row of the result is NaN (the reference
    interpreter throws instead).

    Example:

    ```mlir
    %e = tessel.embedding %wte, %tokens
        : (tensor<256x64xf32>, tensor<4x32xi32>) -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$table, Tessel_IndexTensor:$indices);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$table `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_CrossEntropyOp : Tessel_Op<"cross_entropy", [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "mean cross-entropy over tokens";
  let description = [{
    `result = mean over i... of -log softmax(logits[i..., :])[targets[i...]]`, computed
    with log-sum-exp. `logits`: `[..., V]`; `targets`: i32 `[...]` with values in
    `[0, V)`; result: an f32 scalar (`tensor<f32>`). Matches PyTorch
    `F.cross_entropy(logits.view(-1, V), targets.view(-1))`. A target outside `[0, V)`
    makes the loss NaN (the reference interpreter throws instead).

    Example:

    ```mlir
    %loss = tessel.cross_entropy %logits, %targets
        : (tensor<4x32x256xf32>, tensor<4x32xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$logits, Tessel_IndexTensor:$targets);
  let results = (outs Tessel_ScalarF32:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Tessel_CausalAttentionOp : Tessel_Op<"causal_attention",
    [Pure, SameOperandsAndResultElementType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "multi-head causal self-attention on a fused qkv projection";
  let description = [{
    One fused kernel per (batch, head) by default; tessel-decompose-attention can rewrite
    it into primitives instead. Its VJP is `tessel.causal_attention_grad`. `qkv`: `[B, T, 3C]`, laid out
    as `[q | k | v]` along the last dimension; each of q, k, v is split into `num_heads`
    heads of `HS = C / num_heads` consecutive channels. Per head,
    `y = softmax_causal(q k^T / sqrt(HS)) v`; result: `[B, T, C]` with the heads
    concatenated in order (GPT-2 / nanoGPT layout).

    Example:

    ```mlir
    %y = tessel.causal_attention %qkv heads 4 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$qkv, ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$qkv `heads` $num_heads attr-dict `:` type($qkv) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Tessel_ReshapeOp : Tessel_Op<"reshape", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "reinterpret a tensor with a new shape";
  let description = [{
    Row-major reinterpretation; the element count is unchanged.

    Example:

    ```mlir
    %y = tessel.reshape %x : tensor<4x32x64xf32> -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Tessel_AnyTensor:$input);
  let results = (outs Tessel_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tessel_TransposeOp : Tessel_Op<"transpose", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "permute dimensions";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`; `permutation` is a permutation of
    `[0, rank)`.

    Example:

    ```mlir
    %y = tessel.transpose %x [0, 2, 1, 3] : tensor<4x32x4x16xf32> -> tensor<4x4x32x16xf32>
    ```
  }];
  let arguments = (ins Tessel_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Tessel_AnyTensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tessel_SplitOp : Tessel_Op<"split", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "split into equal parts along an axis";
  let description = [{
    Splits `input` along `axis` into as many equal parts as the op has results; each part
    has the input shape with `shape[axis] / parts` at `axis`.

    Example:

    ```mlir
    %q, %k, %v = tessel.split %qkv along 2 : tensor<4x32x192xf32>
        -> tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_AnyTensor:$input, ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs Variadic<Tessel_AnyTensor>:$results);
  let assemblyFormat = "$input `along` $axis attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def Tessel_ConcatOp : Tessel_Op<"concat", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "concatenate along an axis";
  let description = [{
    Joins the inputs along `axis`; all other dimensions agree.

    Example:

    ```mlir
    %y = tessel.concat %a, %b along 1
        : (tensor<4x16xf32>, tensor<4x48xf32>) -> tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tessel_AnyTensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs Tessel_AnyTensor:$result);
  let assemblyFormat = "$inputs `along` $axis attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Tessel_ReduceOp<string mnemonic, string what>
    : Tessel_Op<mnemonic, [Pure, SameOperandsAndResultElementType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = what # " over a set of dimensions";
  let description = [{
    Reduces `input` by }] # what # [{ over `dims` (distinct, each in `[0, rank)`). The
    reduced dimensions are removed from the result (keepdim = false); reducing every
    dimension gives a 0-d tensor.

    Example:

    ```mlir
    %y = tessel.}] # mnemonic # [{ %x [0, 1] : tensor<4x32x64xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input $dims attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tessel_ReduceSumOp : Tessel_ReduceOp<"reduce_sum", "a sum">;
def Tessel_ReduceMeanOp : Tessel_ReduceOp<"reduce_mean", "the mean">;

// Backward and optimizer ops live in their own files to keep each one readable.
include "compiler/TesselGradOps.td"
include "compiler/TesselOptimOps.td"
include "compiler/TesselFusedOps.td"
include "compiler/TesselCommOps.td"
include "compiler/TesselReshardOps.td"
include "compiler/TesselVocabParallelOps.td"
include "compiler/TesselSliceOps.td"
include "compiler/TesselPipelineOps.td"
include "compiler/TesselAttentionOps.td"

#endif // TESSEL_OPS_TD
