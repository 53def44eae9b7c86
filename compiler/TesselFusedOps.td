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

#endif // TESSEL_FUSED_OPS_TD
