//===- TesselGradOps.td - backward ops of the tessel dialect -------*- tablegen -*-===//
//
// Ops that the tessel-autodiff pass creates: constants, broadcasts (the transpose of
// reductions) and the fused backward rules of ops whose vector-Jacobian product is not a
// short composition of forward ops. Each mirrors a kernel in runtime/reference/ReferenceGrad.h.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_GRAD_OPS_TD
#define TESSEL_GRAD_OPS_TD

def Tessel_ConstantOp : Tessel_Op<"constant", [Pure]> {
  let summary = "a tensor with every element equal to one value";
  let description = [{
    A splat constant: every element of the result is `value`. The autodiff pass uses it for
    the seed gradient (1.0 for the loss) and for the explicit zero gradient of a parameter
    that does not affect the loss.

    Example:

    ```mlir
    %one = tessel.constant 1.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def Tessel_BroadcastOp : Tessel_Op<"broadcast", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "insert dimensions by repetition";
  let description = [{
    The result has the input's dimensions plus new ones at the result positions `dims`
    (sorted, distinct); removing `dims` from the result shape gives the input shape.
    `result[i] = input[i without the dims coordinates]`. It is the transpose of
    `reduce_sum` over the same `dims`.

    Example:

    ```mlir
    %y = tessel.broadcast %x [0, 1] : tensor<64xf32> -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input $dims attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

class Tessel_UnaryGradOp<string mnemonic, string of, string formula>
    : Tessel_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "backward of " # of;
  let description = [{
    `dx = }] # formula # [{`, elementwise; `input` is the forward op's input.

    Example:

    ```mlir
    %dx = tessel.}] # mnemonic # [{ %x, %dy : tensor<4x32x256xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_FloatTensor:$grad);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Tessel_GeluGradOp : Tessel_UnaryGradOp<"gelu_grad", "gelu (tanh form)", "dy * gelu'(x)">;
def Tessel_ReluGradOp : Tessel_UnaryGradOp<"relu_grad", "relu", "x > 0 ? dy : 0">;
def Tessel_SiluGradOp : Tessel_UnaryGradOp<"silu_grad", "silu",
    "dy * silu'(x)`, with `silu'(x) = s (1 + x (1 - s))` and `s = sigmoid(x)">;

def Tessel_SoftmaxGradOp : Tessel_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "backward of softmax, from its output";
  let description = [{
    `dx = y * (dy - sum_j(dy * y))` over the last dimension, where `output` is the forward
    softmax's result `y`. Masked entries of a causal softmax have `y = 0` and get `dx = 0`.

    Example:

    ```mlir
    %dx = tessel.softmax_grad %y, %dy : tensor<4x4x32x32xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$output, Tessel_FloatTensor:$grad);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
}

def Tessel_LayerNormGradOp : Tessel_Op<"layer_norm_grad", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "backward of layer_norm";
  let description = [{
    With `xhat = (x - mean) * rstd` recomputed from `input`, and `dxhat = dy * gamma`:
    `dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))` per row,
    `dgamma = sum over rows of dy * xhat`, `dbeta = sum over rows of dy`.
    `epsilon`: as layer_norm's, in [2^-126, 1].

    Example:

    ```mlir
    %dx, %dg, %db = tessel.layer_norm_grad %x, %g, %dy {epsilon = 1.000000e-05 : f64}
        : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<4x32x64xf32>)
        -> (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_FloatTensor:$gamma,
                       Tessel_FloatTensor:$grad, DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Tessel_FloatTensor:$dinput, Tessel_FloatTensor:$dgamma,
                      Tessel_FloatTensor:$dbeta);
  let assemblyFormat = "$input `,` $gamma `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_RmsNormGradOp : Tessel_Op<"rms_norm_grad", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "backward of rms_norm";
  let description = [{
    With `r = rsqrt(mean(x^2) + epsilon)` and `xhat = x * r` recomputed per row from
    `input`: `dx = r * (dy * weight - xhat * mean(dy * weight * xhat))` per row, and
    `dweight = sum over rows of dy * xhat`.
    `epsilon`: as rms_norm's, in [2^-126, 1].

    Example:

    ```mlir
    %dx, %dw = tessel.rms_norm_grad %x, %w, %dy {epsilon = 1.000000e-05 : f64}
        : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<4x32x64xf32>)
        -> (tensor<4x32x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_FloatTensor:$weight,
                       Tessel_FloatTensor:$grad, DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Tessel_FloatTensor:$dinput, Tessel_FloatTensor:$dweight);
  let assemblyFormat = "$input `,` $weight `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_EmbeddingGradOp : Tessel_Op<"embedding_grad", [Pure]> {
  let summary = "backward of embedding: scatter-add rows into a table gradient";
  let description = [{
    `result[v, :] = sum of grad[i..., :] over all i... with indices[i...] == v`, and zero
    for rows no index selects. `indices`: i32 `[...]`; `grad`: `[..., C]`; result: the
    table shape `[V, C]`. Rows are summed in index order, so the result is deterministic.

    Example:

    ```mlir
    %dwte = tessel.embedding_grad %tokens, %dx
        : (tensor<4x32xi32>, tensor<4x32x64xf32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Tessel_IndexTensor:$indices, Tessel_FloatTensor:$grad);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_CrossEntropyGradOp : Tessel_Op<"cross_entropy_grad", [Pure]> {
  let summary = "backward of the mean cross-entropy";
  let description = [{
    `dlogits = dloss * (softmax(logits) - onehot(targets)) / N`, N the number of tokens.
    `logits`: `[..., V]`; `targets`: i32 `[...]`; `dloss`: f32 scalar; result: the logits
    shape.

    Example:

    ```mlir
    %dlogits = tessel.cross_entropy_grad %logits, %targets, %dloss
        : (tensor<4x32x256xf32>, tensor<4x32xi32>, tensor<f32>) -> tensor<4x32x256xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$logits, Tessel_IndexTensor:$targets,
                       Tessel_ScalarF32:$dloss);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_FusedClassifierOp : Tessel_Op<"fused_classifier", [Pure]> {
  let summary = "cross_entropy and cross_entropy_grad of the same logits in one pass";
  let description = [{
    The loss and its logits gradient together, as llm.c's `fused_classifier` kernel:
    `loss = mean over i... of logsumexp(logits[i..., :]) - logits[i..., targets[i...]]`
    (exactly `tessel.cross_entropy`) and
    `dlogits = dloss * (softmax(logits) - onehot(targets)) / N`, N the number of tokens
    (exactly `tessel.cross_entropy_grad`). Kernels read each row of logits once for its
    statistics (max, sum of exponentials) and write each row of dlogits once, recomputing
    the exponentials instead of storing probabilities. `dloss` must not depend on `loss`
    (the `tessel-fuse-classifier` pass creates the op only then, e.g. for autodiff's seed
    1.0). `logits`: `[..., V]`; `targets`: i32 `[...]`; `dloss`: f32 scalar; results: an
    f32 scalar and the logits type. A target outside `[0, V)` makes the loss NaN and its
    row of dlogits NaN.

    Example:

    ```mlir
    %loss, %dlogits = tessel.fused_classifier %logits, %targets, %dloss
        : (tensor<4x32x256xf32>, tensor<4x32xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x32x256xf32>)
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$logits, Tessel_IndexTensor:$targets,
                       Tessel_ScalarF32:$dloss);
  let results = (outs Tessel_ScalarF32:$loss, Tessel_FloatTensor:$dlogits);
  let assemblyFormat = "$logits `,` $targets `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // TESSEL_GRAD_OPS_TD
