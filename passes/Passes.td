//===- Passes.td - Tessel passes ----------------------------------*- tablegen -*-===//
//
// Every Tessel transformation pass: one pass per file in passes/, one flag, one lit test
// named after the flag in test/lit/passes/.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_PASSES_TD
#define TESSEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def DecomposeAttention : Pass<"tessel-decompose-attention", "mlir::func::FuncOp"> {
  let summary = "Rewrite causal_attention into split, matmul and a causal softmax";
  let description = [{
    Replaces each `tessel.causal_attention` with the primitive ops it is defined by, so
    later passes (autodiff, fusion) need rules only for primitives:

    1. `split` the `[B, T, 3C]` projection along the last axis into q, k, v `[B, T, C]`.
    2. `reshape` each to `[B, T, NH, HS]` and `transpose` to `[B, NH, T, HS]`.
    3. scores = `matmul q, k transpose_rhs` (`[B, NH, T, T]`), `scale` by 1/sqrt(HS).
    4. `softmax causal`, then `matmul` with v (`[B, NH, T, HS]`).
    5. `transpose` back to `[B, T, NH, HS]` and `reshape` to `[B, T, C]`.

    Every new op keeps the location of the attention op it came from, so errors still
    point at the user's line.
  }];
  let dependentDialects = ["::tessel::TesselDialect"];
}

#endif // TESSEL_PASSES_TD
