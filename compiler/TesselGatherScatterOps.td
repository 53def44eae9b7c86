//===- TesselGatherScatterOps.td - collectives that move shards ----*- tablegen -*-===//
//
// The collectives that change how a tensor is split over a replica group: all_gather,
// reduce_scatter and all_to_all, each synchronous (a partitioned forward pass,
// tessel-reshard-to-collectives) and as an asynchronous start/wait pair (placed later, e.g.
// by FSDP's parameter prefetch). Included from TesselCommOps.td; C++ in
// TesselGatherScatterOps.cpp, shape rules in Shapes.h, VJPs in VJP.cpp (the collectives'
// transpose table).
//
// Why our own ops rather than upstream `shard.all_gather` / `shard.reduce_scatter` /
// `shard.all_to_all`: they compute the same values and use the same attribute names and
// group layout (so converting between them is a rename), but upstream has no asynchronous
// form, takes no part in the VJP interface that autodiff uses to transpose collectives, and
// does not require the `tessel.axis_names` by which the runtime addresses a replica group.
// One family lets the synchronous and asynchronous forms share their verifiers and lowering
// with `tessel.all_reduce`.
//
// The group of a collective: the ranks that share this rank's coordinates on every grid
// axis outside `grid_axes`. A rank's index in its group is the row-major index of its
// coordinates on `grid_axes` in the listed order (first outermost), the same order in which
// #tessel.sharding numbers the parts of a split dimension. The group size N is the product
// of the grid's sizes along `grid_axes`.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_GATHER_SCATTER_OPS_TD
#define TESSEL_GATHER_SCATTER_OPS_TD

// What every op of this file has: a grid reference, and C++ accessors for its group.
class Tessel_ShardMoveOp<string mnemonic, list<Trait> traits = []>
    : Tessel_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultElementType])> {
  let extraClassDeclaration = [{
    /// Ranks in the group: the product of the grid's sizes along grid_axes (0 when the
    /// grid does not resolve; >= 1 on verified IR).
    int64_t getGroupSize();
    /// The names of grid_axes in the grid's `tessel.axis_names`, in order.
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
  }];
  let extraClassDefinition = [{
    int64_t $cppClass::getGroupSize() {
      return ::tessel::gridGroupSize(*this, getGridAttr(), getGridAxes());
    }
    ::llvm::SmallVector<::llvm::StringRef> $cppClass::getAxisNames() {
      return ::tessel::gridAxisNames(*this, getGridAttr(), getGridAxes());
    }
  }];
  let hasVerifier = 1;
}

// The wait of an asynchronous collective: one in-flight tensor in, its completed value out.
class Tessel_ShardMoveWaitOp<string name>
    : Tessel_Op<name # "_wait", [SameOperandsAndResultType]> {
  let summary = "wait for a collective started by tessel." # name # "_start";
  let description = "Blocks until the `tessel." # name # "_start` that produced `in_flight` " #
    "is complete on this rank, and returns its result (same type). The verifier checks " #
    "that the operand is the result of a `tessel." # name # "_start` that comes before " #
    "it. Ops that need the collective's values use the wait's result, so a pass places " #
    "the wait right before the first of them. Example (`%f` is the start's result):" #
    "\n\n```mlir\n%y = tessel." # name # "_wait %f : tensor<8x8xf32>\n```\n";
  let arguments = (ins Tessel_FloatTensor:$in_flight);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$in_flight attr-dict `:` type($in_flight)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// all_gather
//===----------------------------------------------------------------------===//

defvar Tessel_AllGatherArgs = (ins Tessel_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                                   DenseI16ArrayAttr:$grid_axes, I64Attr:$gather_axis);
defvar Tessel_AllGatherFormat = [{
  $input `on` $grid `grid_axes` `=` $grid_axes `gather_axis` `=` $gather_axis attr-dict
  `:` type($input) `->` type(results)
}];

def Tessel_AllGatherOp : Tessel_ShardMoveOp<"all_gather",
    [DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "concatenate the group's shards of a tensor on every rank";
  let description = [{
    Every rank of the group (see the file header) receives the concatenation of all the
    ranks' `input`s along dimension `gather_axis`, in group order: the result has the
    input's shape except `result[gather_axis] = input[gather_axis] * N`. A tensor split
    along `gather_axis` over `grid_axes` becomes whole (sequence parallelism's gather before
    a column-parallel GEMM; FSDP's parameter gather).

    Gather-then-trim: the result may be shorter along `gather_axis`, by at most N - 1
    elements (`input[gather_axis] * (N - 1) < result[gather_axis]`): the concatenation's
    trailing elements, the padding of a dimension G that N does not divide, stored as
    N x ceil(G / N), are dropped (FSDP of an uneven first dimension). Its transpose pads
    the gradient with zeros before the reduce-scatter, so the padding's gradient is zero.

    Its VJP is `tessel.reduce_scatter` sum along the same dimension: each rank's copy of
    the result feeds a computation of its own, so the gradient of shard s is the sum over
    the ranks of block s of their result gradients.

    Example:

    ```mlir
    shard.grid @mesh_dp2_tp2(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
    ...
    %y = tessel.all_gather %x on @mesh_dp2_tp2 grid_axes = [1] gather_axis = 0
        : tensor<4x8xf32> -> tensor<8x8xf32>
    ```
  }];
  let arguments = Tessel_AllGatherArgs;
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = Tessel_AllGatherFormat;
}

def Tessel_AllGatherStartOp : Tessel_ShardMoveOp<"all_gather_start"> {
  let summary = "start an asynchronous tessel.all_gather";
  let description = [{
    Starts the all-gather that `tessel.all_gather` with the same operands computes (same
    attributes, same shape rule). The result is the gathered tensor *in flight*: it may only
    be used by one `tessel.all_gather_wait`, and holds the gathered values only after it.
    The op talks to other ranks, so generic passes never erase or move it; every rank issues
    the same starts in the same order because every rank runs the same IR.

    Example:

    ```mlir
    %f = tessel.all_gather_start %x on @mesh grid_axes = [0] gather_axis = 0
        : tensor<4x8xf32> -> tensor<8x8xf32>
    %y = tessel.all_gather_wait %f : tensor<8x8xf32>
    ```
  }];
  let arguments = Tessel_AllGatherArgs;
  let results = (outs Tessel_FloatTensor:$in_flight);
  let assemblyFormat = Tessel_AllGatherFormat;
}

def Tessel_AllGatherWaitOp : Tessel_ShardMoveWaitOp<"all_gather">;

//===----------------------------------------------------------------------===//
// reduce_scatter
//===----------------------------------------------------------------------===//

defvar Tessel_ReduceScatterArgs = (ins Tessel_FloatTensor:$input, Tessel_ReduceKindAttr:$reduce,
                                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes,
                                       I64Attr:$scatter_axis);
defvar Tessel_ReduceScatterFormat = [{
  $input `reduce` `` $reduce `on` $grid `grid_axes` `=` $grid_axes `scatter_axis` `=` $scatter_axis
  attr-dict `:` type($input) `->` type(results)
}];

def Tessel_ReduceScatterOp : Tessel_ShardMoveOp<"reduce_scatter",
    [DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "reduce a tensor over the group and leave each rank one block";
  let description = [{
    The elementwise `reduce` (`sum`, or `avg`: the sum divided by N) of `input` over the
    group (see the file header), split into N equal blocks along `scatter_axis`; the rank of
    group index r keeps block r. `result[scatter_axis] = ceil(input[scatter_axis] / N)`:
    a size N does not divide is first padded at its end with zeros to N times that (the
    transpose of the trimmed all-gather; the last blocks then end in zeros). A
    partial tensor becomes split along `scatter_axis` (sequence parallelism's reduction
    after a row-parallel GEMM; ZeRO/FSDP's gradient reduction). `max` is refused: the
    runtime has no max collective and a max has no VJP here.

    Its VJP is `tessel.all_gather` along the same dimension (scaled by 1/N for `avg`):
    every addend's gradient is the whole result gradient.

    Example:

    ```mlir
    %y = tessel.reduce_scatter %x reduce sum on @mesh grid_axes = [1] scatter_axis = 1
        : tensor<4x8xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = Tessel_ReduceScatterArgs;
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = Tessel_ReduceScatterFormat;
}

def Tessel_ReduceScatterStartOp : Tessel_ShardMoveOp<"reduce_scatter_start"> {
  let summary = "start an asynchronous tessel.reduce_scatter";
  let description = [{
    Starts the reduce-scatter that `tessel.reduce_scatter` with the same operands computes
    (same attributes and rules). Its result is in flight: it may only be used by one
    `tessel.reduce_scatter_wait`, and holds this rank's reduced block only after it.

    Example:

    ```mlir
    %f = tessel.reduce_scatter_start %g reduce avg on @mesh grid_axes = [0] scatter_axis = 0
        : tensor<8x8xf32> -> tensor<4x8xf32>
    %y = tessel.reduce_scatter_wait %f : tensor<4x8xf32>
    ```
  }];
  let arguments = Tessel_ReduceScatterArgs;
  let results = (outs Tessel_FloatTensor:$in_flight);
  let assemblyFormat = Tessel_ReduceScatterFormat;
}

def Tessel_ReduceScatterWaitOp : Tessel_ShardMoveWaitOp<"reduce_scatter">;

//===----------------------------------------------------------------------===//
// all_to_all
//===----------------------------------------------------------------------===//

defvar Tessel_AllToAllArgs = (ins Tessel_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                                  DenseI16ArrayAttr:$grid_axes, I64Attr:$split_axis,
                                  I64Attr:$concat_axis);
defvar Tessel_AllToAllFormat = [{
  $input `on` $grid `grid_axes` `=` $grid_axes `split_axis` `=` $split_axis
  `concat_axis` `=` $concat_axis attr-dict `:` type($input) `->` type(results)
}];

def Tessel_AllToAllOp : Tessel_ShardMoveOp<"all_to_all",
    [DeclareOpInterfaceMethods<Tessel_VJPOpInterface>]> {
  let summary = "exchange blocks so that a tensor is split along another dimension";
  let description = [{
    Each rank splits `input` into N equal blocks along `split_axis` and sends block r to the
    rank of group index r (see the file header); each rank concatenates the N blocks it
    receives along `concat_axis`, in group order. `input[split_axis]` must be divisible by N;
    the result has `result[split_axis] = input[split_axis] / N` and then
    `result[concat_axis] *= N` (the same axis twice leaves the shape unchanged and permutes
    blocks). A tensor split along `concat_axis` becomes split along `split_axis` (e.g.
    attention heads <-> sequence, as in Ulysses sequence parallelism).

    Its VJP is `tessel.all_to_all` with `split_axis` and `concat_axis` swapped: the
    exchange is a permutation of blocks, and that is its inverse and transpose.

    Example:

    ```mlir
    %y = tessel.all_to_all %x on @mesh grid_axes = [1] split_axis = 1 concat_axis = 0
        : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = Tessel_AllToAllArgs;
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = Tessel_AllToAllFormat;
}

def Tessel_AllToAllStartOp : Tessel_ShardMoveOp<"all_to_all_start"> {
  let summary = "start an asynchronous tessel.all_to_all";
  let description = [{
    Starts the exchange that `tessel.all_to_all` with the same operands computes (same
    attributes and rules). Its result is in flight: it may only be used by one
    `tessel.all_to_all_wait`, and holds the received blocks only after it.

    Example:

    ```mlir
    %f = tessel.all_to_all_start %x on @mesh grid_axes = [1] split_axis = 1 concat_axis = 0
        : tensor<4x8xf32> -> tensor<8x4xf32>
    %y = tessel.all_to_all_wait %f : tensor<8x4xf32>
    ```
  }];
  let arguments = Tessel_AllToAllArgs;
  let results = (outs Tessel_FloatTensor:$in_flight);
  let assemblyFormat = Tessel_AllToAllFormat;
}

def Tessel_AllToAllWaitOp : Tessel_ShardMoveWaitOp<"all_to_all">;

#endif // TESSEL_GATHER_SCATTER_OPS_TD
