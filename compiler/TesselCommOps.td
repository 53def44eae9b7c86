//===- TesselCommOps.td - collective ops of the tessel dialect -----*- tablegen -*-===//
//
// Asynchronous collectives the data-parallel passes insert (passes/GradientAllReduce.cpp,
// BucketGradients.cpp, OverlapCollectives.cpp). They name their device mesh as upstream
// `shard` collectives do: a `shard.grid` symbol and a list of its axes, so the replica group
// is a property of the IR, not a string; the group size is derived from the grid.
//
// Why our own ops rather than upstream `shard.all_reduce`: the upstream collectives are
// synchronous (one op computes the reduced result), so they cannot express a collective that
// starts in the middle of the backward pass and is waited for later. These ops split one
// all-reduce into a start and a wait, and the compiler places both, so communication overlaps
// the rest of the backward pass. Every rank runs the same IR, so every rank issues the same
// collectives in the same order by construction.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_COMM_OPS_TD
#define TESSEL_COMM_OPS_TD

def Tessel_AllReduceStartOp : Tessel_Op<"all_reduce_start",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "start an asynchronous all-reduce of a bucket of tensors";
  let description = [{
    Starts one all-reduce over the replica group spanned by axes `grid_axes` of the device
    mesh `grid` (a `shard.grid` symbol of the module, as in upstream `shard.all_reduce`), of
    all `inputs` packed into one flat buffer (a *bucket*), in operand order. The group size
    is the product of the grid's sizes along `grid_axes` (`getGroupSize()`). `reduce` is
    `sum`, `avg` (the sum divided by the group size, torch.distributed.ReduceOp.AVG) or
    `max`. The results are the same tensors *in flight*: they have the inputs' types, may
    only be used by exactly one `tessel.all_reduce_wait` (all of them, in order), and hold
    the reduced values only after it. `bucket` numbers the buckets of a function in issue order;
    `params` names the parameter whose gradient each input is (for `--explain`).

    The grid is the plan's mesh; the passes create it as `shard.grid @mesh` (one fixed name:
    a plan has one mesh) and name its axes in order with the discardable attribute
    `tessel.axis_names` (upstream grids have sizes but no axis names; the runtime addresses
    a replica group by axis name). The verifier checks that `grid` resolves to a
    `shard.grid` with static sizes and `tessel.axis_names`, and that `grid_axes` is
    non-empty, in range and free of duplicates.

    The op has side effects (it talks to other ranks), so it is never erased, merged or
    moved by generic passes; `tessel-overlap-collectives` decides where it runs.

    Example:

    ```mlir
    shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
    ...
    %f:2 = tessel.all_reduce_start %g0, %g1 reduce avg on @mesh grid_axes = [0] bucket 0
        params ["ln_f.bias", "ln_f.weight"] : tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tessel_FloatTensor>:$inputs, Tessel_ReduceKindAttr:$reduce,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes,
                       I64Attr:$bucket, StrArrayAttr:$params);
  let results = (outs Variadic<Tessel_FloatTensor>:$in_flight);
  let assemblyFormat = [{
    $inputs `reduce` `` $reduce `on` $grid `grid_axes` `=` $grid_axes `bucket` $bucket
    `params` $params attr-dict `:` type($inputs)
  }];
  let extraClassDeclaration = [{
    /// The `shard.grid` that `grid` names, or null when it does not resolve to one.
    ::mlir::shard::GridOp resolveGrid();
    /// Ranks in the replica group: the product of the grid's sizes along `grid_axes`
    /// (>= 1 on verified IR).
    int64_t getGroupSize();
    /// The names of `grid_axes` in the grid's `tessel.axis_names`, in operand order (the
    /// runtime's axis string for a single axis).
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
  }];
  let hasVerifier = 1;
}

def Tessel_AllReduceWaitOp : Tessel_Op<"all_reduce_wait",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "wait for an all-reduce started by tessel.all_reduce_start";
  let description = [{
    Blocks until the all-reduce that produced `in_flight` (every result of one
    `tessel.all_reduce_start`, in order) is complete on this rank, and returns the reduced
    tensors. Ops that need the reduced values use the results of the wait, so the wait is
    placed right before the first of them (with overlap) or at the end of the backward pass
    (without).

    Example:

    ```mlir
    %r:2 = tessel.all_reduce_wait %f#0, %f#1 : tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tessel_FloatTensor>:$in_flight);
  let results = (outs Variadic<Tessel_FloatTensor>:$results);
  let assemblyFormat = "$in_flight attr-dict `:` type($in_flight)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Synchronous collectives of a partitioned forward pass (tessel-reshard-to-collectives).
// Upstream `shard.all_reduce` computes the same thing, but it has no VJP and no
// pending-gradient counterpart (`tessel.replicate`); autodiff transposes these two into
// each other (compiler/VJP.cpp, the collectives' table).
//===----------------------------------------------------------------------===//

def Tessel_AllReduceOp : Tessel_Op<"all_reduce",
    [SameOperandsAndResultType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "all-reduce one tensor over a replica group, synchronously";
  let description = [{
    The elementwise `reduce` (`sum`, `avg` or `max`) of `input` over the ranks of the group
    spanned by `grid_axes` of `grid` (as `tessel.all_reduce_start`, whose grid rules it
    shares). A partial tensor (a row-parallel projection's output) becomes replicated; this
    is Megatron-LM's *g*. Its VJP (sum) is the identity: the gradient of a replicated
    result reaches every addend unchanged. Max has no VJP (its users are stop-gradient).

    Example:

    ```mlir
    %y = tessel.all_reduce %x reduce sum on @mesh grid_axes = [1] : tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_ReduceKindAttr:$reduce,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $input `reduce` `` $reduce `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
  let extraClassDeclaration = [{
    /// Ranks in the group (the product of the grid's sizes along grid_axes; 0 if unresolved).
    int64_t getGroupSize();
    /// The names of grid_axes, in order.
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
  }];
  let hasVerifier = 1;
}

def Tessel_ReplicateOp : Tessel_Op<"replicate",
    [SameOperandsAndResultType, DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "a replicated tensor entering a computation sharded over a group";
  let description = [{
    The identity in the forward pass. It marks a tensor that is replicated over the group
    of `grid_axes` and used by a computation whose every rank holds a different part (a
    column-parallel projection's input): each rank's gradient of it is then one addend of
    the true gradient, so its VJP is an all-reduce sum of the gradient over the group. This
    is Megatron-LM's *f*; `tessel.all_reduce` is its transpose.

    Example:

    ```mlir
    %x1 = tessel.replicate %x on @mesh grid_axes = [1] : tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)";
  let hasVerifier = 1;
}

// all_gather, reduce_scatter and all_to_all, synchronous and asynchronous.
include "compiler/TesselGatherScatterOps.td"

#endif // TESSEL_COMM_OPS_TD
