//===- TesselFusedOps.td - fused kernel regions --------------------*- tablegen -*-===//
//
// The tessel-fuse pass wraps groups of row-local ops (elementwise ops, and the row
// reductions over the last dimension: layer_norm, softmax and friends) into one
// `tessel.fused` op each; codegen turns each into one kernel that streams the rows through
// every member while the row is in cache.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_FUSED_OPS_TD
#define TESSEL_FUSED_OPS_TD

def Tessel_FusedOp : Tessel_Op<"fused", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "a group of row-local ops compiled into one kernel";
  let description = [{
    The body computes the results from the block arguments, which are bound to `inputs`.
    Every op in the body is row-local: all results have the shape `[rows..., C]` of the
    group, and each output row depends only on the same row of full-shape operands, on
    row `r mod R'` of suffix-broadcast operands (`[T, C]`, `[C]`), and on scalars. Values
    that the rest of the function uses are yielded; the others never reach memory.

    Example:

    ```mlir
    %x, %y = tessel.fused (%a, %b, %g, %beta) : (tensor<4x32x64xf32>, tensor<4x32x64xf32>,
        tensor<64xf32>, tensor<64xf32>) -> (tensor<4x32x64xf32>, tensor<4x32x64xf32>) {
    ^bb0(%a0: tensor<4x32x64xf32>, %b0: tensor<4x32x64xf32>, %g0: tensor<64xf32>, %be0: tensor<64xf32>):
      %s = tessel.add %a0, %b0 : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
      %n = tessel.layer_norm %s, %g0, %be0 : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      tessel.yield %s, %n : tensor<4x32x64xf32>, tensor<4x32x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Tessel_AnyTensor>:$inputs);
  let results = (outs Variadic<Tessel_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body";
  let hasVerifier = 1;
}

def Tessel_YieldOp : Tessel_Op<"yield", [Pure, Terminator, HasParent<"FusedOp">, ReturnLike]> {
  let summary = "the results of a fused region";
  let description = [{
    Ends a `tessel.fused` body; its operands become the fused op's results.

    Example:

    ```mlir
    tessel.yield %s, %n : tensor<4x32x64xf32>, tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tessel_AnyTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
}

def Tessel_MatmulEpilogueOp : Tessel_Op<"matmul_epilogue", [Pure, AttrSizedOperandSegments]> {
  let summary = "a matmul with a fused epilogue: bias, tanh-GELU, residual, bias gradient";
  let description = [{
    `tessel.matmul` (same operands, transpose flags and result shape) whose product goes
    through the epilogue of the runtime's GEMM step (runtime/exec/Program.h GemmEpilogue;
    cuBLASLt's epilogues on a GPU) before it is stored, so it is written once instead of
    being re-read by separate kernels. Made by `tessel-fuse-gemm-epilogues` only. With
    P = the product, per row i and column j of the result:

      pre[i, j] = P[i, j] + bias[j]               (`bias`: `[N]`, or no bias)
      result[i, j] = act(pre[i, j]) + residual[i, j]
                                                   (`gelu`: act = tanh-approximate GELU, as
                                                    `tessel.gelu`, else the identity;
                                                    `residual`: the result's type, or none)

    Results: `result`, then with `pre_activation` (only with `gelu`) the value `pre` (the
    operand `tessel.gelu_grad` needs), then with `bias_gradient` the f32 `[M]` sum over K of
    op(lhs)[i, k] (the bias gradient next to a weight gradient dW = dY^T X, lhs = dY with
    `transpose_lhs`: the rows of dY summed, `tessel.reduce_sum` over every dimension but
    the last).

    What both executors can run (docs/gpu.md): a residual is not combined with `gelu`; a
    bias gradient is not combined with another epilogue, needs rank-2 f32 operands and a
    rank-1 `[M]` f32 result; a pre-activation needs N a multiple of 8.

    Example (a GPT MLP's first layer: bias, GELU and the pre-activation for the backward):

    ```mlir
    %h, %pre = tessel.matmul_epilogue %x, %w transpose_rhs bias %b gelu pre_activation
        : (tensor<4x32x64xf32>, tensor<256x64xf32>, tensor<256xf32>)
        -> (tensor<4x32x256xf32>, tensor<4x32x256xf32>)
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$lhs, Tessel_FloatTensor:$rhs,
                       Optional<Tessel_FloatTensor>:$bias, Optional<Tessel_FloatTensor>:$residual,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs, UnitAttr:$gelu,
                       UnitAttr:$pre_activation, UnitAttr:$bias_gradient);
  let results = (outs Variadic<Tessel_FloatTensor>:$results);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`bias` $bias^)? (`gelu` $gelu^)? (`pre_activation` $pre_activation^)?
    (`residual` $residual^)? (`bias_gradient` $bias_gradient^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The epilogue's output (result 0).
    ::mlir::Value getResult() { return getResults()[0]; }
    /// The pre-activation result, or null without `pre_activation`.
    ::mlir::Value getPreActivationResult() {
      return getPreActivation() ? getResults()[1] : ::mlir::Value();
    }
    /// The bias-gradient result, or null without `bias_gradient`.
    ::mlir::Value getBiasGradientResult() {
      return getBiasGradient() ? getResults().back() : ::mlir::Value();
    }
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_FUSED_OPS_TD
