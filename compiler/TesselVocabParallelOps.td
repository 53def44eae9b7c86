//===- TesselVocabParallelOps.td - vocab-parallel embedding and loss --*- tablegen -*-===//
//
// The local ops of a vocabulary split over ranks (Megatron-LM's VocabParallelEmbedding and
// vocab_parallel_cross_entropy): each rank holds rows [offset, offset + Vl) of the embedding
// table [V, C], and the tied LM head gives it the matching columns of the logits, so the full
// logits never exist on one rank. The partition pass rewrites a `tessel.embedding` or
// `tessel.cross_entropy` whose V dimension is split into these ops plus all-reduces across
// the group (compiler/TesselCommOps.td):
//
//   embedding:     e = all_reduce sum (embedding_shard(table, indices, offset))
//   cross_entropy: m  = all_reduce max (row_max(z))
//                  s  = all_reduce sum (sum_exp(z, m))
//                  zt = all_reduce sum (target_logit(z, targets, offset))
//                  loss = cross_entropy_from_stats(m, s, zt)
//
// With one shard (offset 0, Vl = V) the compositions equal `tessel.embedding` and
// `tessel.cross_entropy`, value and gradient (test/unit/VocabParallelGradTest.cpp; with 2
// and 3 shards: VocabParallelReferenceTest.cpp). compiler/VocabParallel.h builds them.
//
// `vocab` is the global V. A local kernel cannot tell an id held by another rank from an id
// held by none, so every op takes V: an id outside [0, V) gives NaN on every rank (as the
// unsharded ops do), while an id of another rank's range gives this rank's zero addend.
//
// The row statistics (m, s, zt) are f32 whatever the logits' type: they are what the
// all-reduces carry, and the unsharded loss accumulates in f32 too.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_VOCAB_PARALLEL_OPS_TD
#define TESSEL_VOCAB_PARALLEL_OPS_TD

// An i32 scalar (tensor<i32>): a mesh coordinate or a shard's first vocabulary row.
def Tessel_ScalarI32 : 0DTensorOf<[I32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getI32Type())";
}

// The row statistics of the vocab-parallel cross-entropy: f32 only.
def Tessel_F32Tensor : StaticShapeTensorOf<[F32]>;

def Tessel_MeshCoordinateOp : Tessel_Op<"mesh_coordinate", [Pure]> {
  let summary = "this rank's coordinate along axes of the device mesh";
  let description = [{
    The row-major index of this rank's coordinates along `grid_axes` of `grid` (a
    `shard.grid` symbol, checked as for the collectives), times `stride` (default 1, not
    printed): with one axis, the rank's coordinate on it, in `[0, size)`; with several, the
    first listed axis is the outermost, as in the layout of a sharded dimension (a shard's
    index within its dimension). With `stride` = a shard's length, the first element of
    this rank's shard. An i32 scalar.

    The value differs from rank to rank but is fixed for a run, so the op is `Pure`: it
    depends on nothing in the program, reads no state and may be hoisted or merged. The
    reference interpreter runs one rank and gives 0; the lowering gives each rank its own
    value as a runtime-filled input, not as a kernel.

    Example (this rank's index along the plan's tp axis; times Vl, the first vocabulary
    row its shard of the embedding table holds):

    ```mlir
    shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
    ...
    %c = tessel.mesh_coordinate on @mesh grid_axes = [1] : tensor<i32>
    %offset = tessel.mesh_coordinate on @mesh grid_axes = [1] stride 128 : tensor<i32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$stride);
  let results = (outs Tessel_ScalarI32:$result);
  let assemblyFormat = [{
    `on` $grid `grid_axes` `=` $grid_axes (`stride` $stride^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Tessel_EmbeddingShardOp : Tessel_Op<"embedding_shard",
    [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "row gather from one shard of a vocabulary-split embedding table";
  let description = [{
    `result[i..., c] = table[indices[i...] - offset, c]` where
    `0 <= indices[i...] - offset < Vl`, else 0. `table`: `[Vl, C]`, rows
    `[offset, offset + Vl)` of a global `[vocab, C]` table; `indices`: i32 `[...]`, global
    ids; `offset`: an i32 scalar; result: `[indices..., C]` with the table's element type.
    The sum of the results of every shard is `tessel.embedding` of the whole table (Megatron
    VocabParallelEmbedding: an all-reduce sum follows). An id outside `[0, vocab)` gives a
    NaN row (the reference interpreter throws instead), as `tessel.embedding`. Its VJP is
    `tessel.embedding_shard_grad`.

    Example:

    ```mlir
    %e = tessel.embedding_shard %wte, %tokens, %offset vocab 256
        : (tensor<128x64xf32>, tensor<4x32xi32>, tensor<i32>) -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$table, Tessel_IndexTensor:$indices,
                       Tessel_ScalarI32:$offset, ConfinedAttr<I64Attr, [IntPositive]>:$vocab);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices `,` $offset `vocab` $vocab attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tessel_RowMaxOp : Tessel_Op<"row_max",
    [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "maximum over the last dimension (a stop-gradient shift)";
  let description = [{
    `result[i...] = max over j of input[i..., j]`. `input`: `[..., Vl]` (rank >= 1, Vl >= 1),
    f32 or bf16; result: f32 `[...]`. In the vocab-parallel cross-entropy an all-reduce max
    makes it the global row maximum m, the shift of log-sum-exp.

    No gradient flows through it: its VJP gives none. The loss does not depend on the shift
    (log sum_j exp(z_j - m) + m is the same for every m), so m is treated as a constant
    everywhere it is used (`tessel.sum_exp`, `tessel.cross_entropy_from_stats`), and the
    gradient with respect to the logits is still exact.

    Example:

    ```mlir
    %m = tessel.row_max %z : tensor<4x32x128xf32> -> tensor<4x32xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input);
  let results = (outs Tessel_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tessel_SumExpOp : Tessel_Op<"sum_exp",
    [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "sum of exp(x - shift) over the last dimension";
  let description = [{
    `result[i...] = sum over j of exp(input[i..., j] - shift[i...])`. `input`: `[..., Vl]`,
    f32 or bf16; `shift`: f32 `[...]` (the global row maximum, so every term is at most 1);
    result: f32 `[...]`. Summed over the shards by an all-reduce, it is the softmax
    denominator of the whole row. VJP: `d input = d result * exp(input - shift)`
    (`tessel.sum_exp_grad`); none to `shift`, a stop-gradient (see `tessel.row_max`).

    Example:

    ```mlir
    %s = tessel.sum_exp %z, %m : (tensor<4x32x128xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_F32Tensor:$shift);
  let results = (outs Tessel_F32Tensor:$result);
  let assemblyFormat = "$input `,` $shift attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_TargetLogitOp : Tessel_Op<"target_logit",
    [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "the target's logit when this shard holds it, else 0";
  let description = [{
    `result[i...] = logits[i..., targets[i...] - offset]` where
    `0 <= targets[i...] - offset < Vl`, else 0. `logits`: `[..., Vl]`, columns
    `[offset, offset + Vl)` of the global `[..., vocab]` logits; `targets`: i32 `[...]`;
    `offset`: an i32 scalar; result: f32 `[...]`. Exactly one shard holds each target, so
    the all-reduce sum over the shards is the target's logit. A target outside
    `[0, vocab)` gives NaN (the reference interpreter throws instead), as
    `tessel.cross_entropy`. VJP: the gradient scattered to the same positions
    (`tessel.target_logit_grad`).

    Example:

    ```mlir
    %zt = tessel.target_logit %z, %targets, %offset vocab 256
        : (tensor<4x32x128xf32>, tensor<4x32xi32>, tensor<i32>) -> tensor<4x32xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$logits, Tessel_IndexTensor:$targets,
                       Tessel_ScalarI32:$offset, ConfinedAttr<I64Attr, [IntPositive]>:$vocab);
  let results = (outs Tessel_F32Tensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $offset `vocab` $vocab attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tessel_MaskVocabPaddingOp : Tessel_Op<"mask_vocab_padding",
    [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "sets the columns past the vocabulary to a constant";
  let description = [{
    `result[i..., j] = fill` where `offset + j >= vocab`, else `input[i..., j]`. `input`:
    `[..., Vl]` (f32 or bf16), columns `[offset, offset + Vl)` of the global
    `[..., vocab]` logits padded at their end to a multiple of the ranks (a vocabulary
    that its axes do not divide: see `padding` in #tessel.sharding); `offset`: an i32
    scalar; result: the input's type.

    The vocab-parallel cross-entropy reads the logits through it with `fill` = -inf, so
    the padding columns (zero logits of the table's zero padding rows) take no part in the
    row maximum and add exp(-inf) = 0 to the softmax denominator: the loss is the
    unpadded vocabulary's. VJP: the same op on the gradient with `fill` = 0, so the padding
    columns get no gradient and the padding rows of the table stay zero.

    Example (a 65-entry vocabulary over 2 ranks, 33 columns each):

    ```mlir
    %zm = tessel.mask_vocab_padding %z, %offset vocab 65 fill 0xFFF0000000000000
        : (tensor<4x32x33xf32>, tensor<i32>) -> tensor<4x32x33xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_ScalarI32:$offset,
                       ConfinedAttr<I64Attr, [IntPositive]>:$vocab, F64Attr:$fill);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $offset `vocab` $vocab `fill` $fill attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tessel_CrossEntropyFromStatsOp : Tessel_Op<"cross_entropy_from_stats",
    [Pure, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "mean cross-entropy from the rows' max, sum of exponentials and target logit";
  let description = [{
    `result = mean over i... of (log sum[i...] + max[i...] - target[i...])`: the
    cross-entropy of rows whose statistics were combined across the shards of the vocabulary
    (`tessel.row_max`, `tessel.sum_exp`, `tessel.target_logit`, each followed by an
    all-reduce). `max`, `sum`, `target`: f32 `[...]` of one shape with at least one element;
    result: an f32 scalar. VJP (`tessel.cross_entropy_from_stats_grad`):
    `d sum = d result / (N sum)`, `d target = -d result / N`, N the number of rows; none to
    `max`, a stop-gradient shift whose effect through `sum` cancels its direct one.

    Example:

    ```mlir
    %loss = tessel.cross_entropy_from_stats %m, %s, %zt
        : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Tessel_F32Tensor:$max, Tessel_F32Tensor:$sum, Tessel_F32Tensor:$target);
  let results = (outs Tessel_ScalarF32:$result);
  let assemblyFormat = "$max `,` $sum `,` $target attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops of the vocab-parallel ops (built by their VJPs, compiler/VJPVocab.cpp)
//===----------------------------------------------------------------------===//

def Tessel_EmbeddingShardGradOp : Tessel_Op<"embedding_shard_grad", [Pure]> {
  let summary = "backward of embedding_shard: masked scatter-add into a table shard";
  let description = [{
    `result[v, :] = sum of grad[i..., :] over all i... with indices[i...] - offset == v`,
    zero for rows no index selects; ids outside this shard's rows `[offset, offset + Vl)`
    add nothing. `indices`: i32 `[...]`; `offset`: an i32 scalar; `grad`: `[..., C]`;
    result: the table shard `[Vl, C]`. Rows are summed in index order (deterministic).

    Example:

    ```mlir
    %dwte = tessel.embedding_shard_grad %tokens, %offset, %dx
        : (tensor<4x32xi32>, tensor<i32>, tensor<4x32x64xf32>) -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Tessel_IndexTensor:$indices, Tessel_ScalarI32:$offset,
                       Tessel_FloatTensor:$grad);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $offset `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_SumExpGradOp : Tessel_Op<"sum_exp_grad", [Pure]> {
  let summary = "backward of sum_exp with respect to its input";
  let description = [{
    `result[i..., j] = grad[i...] * exp(input[i..., j] - shift[i...])`. `input`:
    `[..., Vl]`; `shift`, `grad`: f32 `[...]`; result: the input's type.

    Example:

    ```mlir
    %dz = tessel.sum_exp_grad %z, %m, %ds
        : (tensor<4x32x128xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32x128xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_F32Tensor:$shift,
                       Tessel_F32Tensor:$grad);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input `,` $shift `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_TargetLogitGradOp : Tessel_Op<"target_logit_grad", [Pure]> {
  let summary = "backward of target_logit: the gradient at the target, zero elsewhere";
  let description = [{
    `result[i..., j] = grad[i...]` where `j == targets[i...] - offset`, else 0 (a row whose
    target another shard holds is all zero). `targets`: i32 `[...]`; `offset`: an i32
    scalar; `grad`: f32 `[...]`; result: `[..., Vl]`, f32 or bf16.

    Example:

    ```mlir
    %dz = tessel.target_logit_grad %targets, %offset, %dzt
        : (tensor<4x32xi32>, tensor<i32>, tensor<4x32xf32>) -> tensor<4x32x128xf32>
    ```
  }];
  let arguments = (ins Tessel_IndexTensor:$targets, Tessel_ScalarI32:$offset,
                       Tessel_F32Tensor:$grad);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$targets `,` $offset `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tessel_CrossEntropyFromStatsGradOp : Tessel_Op<"cross_entropy_from_stats_grad", [Pure]> {
  let summary = "backward of cross_entropy_from_stats";
  let description = [{
    `dsum = dloss / (N sum)` and `dtarget = -dloss / N`, N the number of rows. `sum`: f32
    `[...]` with at least one element; `dloss`: an f32 scalar; results: two f32 tensors of
    the shape of `sum`.

    Example:

    ```mlir
    %ds, %dzt = tessel.cross_entropy_from_stats_grad %s, %dloss
        : (tensor<4x32xf32>, tensor<f32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
    ```
  }];
  let arguments = (ins Tessel_F32Tensor:$sum, Tessel_ScalarF32:$dloss);
  let results = (outs Tessel_F32Tensor:$dsum, Tessel_F32Tensor:$dtarget);
  let assemblyFormat = "$sum `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // TESSEL_VOCAB_PARALLEL_OPS_TD
