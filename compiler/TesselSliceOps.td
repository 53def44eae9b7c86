//===- TesselSliceOps.td - this rank's block of a replicated tensor --*- tablegen -*-===//
//
// The local counterpart of an all-gather: a tensor every rank holds whole (replicated over a
// group) is cut down to the block the rank owns, with no communication. ZeRO-1 and ZeRO-2
// (tessel-optimizer's shard-state-axis) update only the rank's block of each parameter and
// all-gather the updated blocks; the block's first row comes from `tessel.mesh_coordinate`.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_SLICE_OPS_TD
#define TESSEL_SLICE_OPS_TD

def Tessel_DynamicSliceOp : Tessel_Op<"dynamic_slice", [Pure]> {
  let summary = "the rows [offset, offset + R) of a tensor, at a runtime offset";
  let description = [{
    `result[r, ...] = input[offset + r, ...]` for `r` in `[0, R)`, where `R` is the result's
    dimension 0: a block of consecutive rows of `input` (every other dimension whole, so the
    block is contiguous). `offset` is an i32 scalar known only at run time, typically
    `tessel.mesh_coordinate ... stride R`, this rank's block of a tensor split on dimension
    0 over a group (the inverse of `tessel.all_gather` along dimension 0, as the `shard`
    dialect's `all_slice`, with no communication). As XLA's dynamic_slice, an offset
    outside `[0, D - R]` (`D` the input's dimension 0) is clamped into it, so the block
    always lies inside the input. No VJP: the op is used after differentiation only.

    Example (rank k of 4 along axis 1 takes rows [64 k, 64 k + 64)):

    ```mlir
    %off = tessel.mesh_coordinate on @mesh grid_axes = [1] stride 64 : tensor<i32>
    %blk = tessel.dynamic_slice %w[%off] : tensor<256x64xf32> -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_ScalarI32:$offset);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $input `[` $offset `]` attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_SLICE_OPS_TD
