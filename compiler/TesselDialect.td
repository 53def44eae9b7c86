//===- TesselDialect.td - the tessel dialect -----------------------*- tablegen -*-===//
//
// The tessel dialect holds the neural-network ops of a training program on global
// (unsharded) shapes. Tensors are builtin ranked tensors of f32, bf16 and i32 with static
// shapes. Meshes, shardings and collectives come from the upstream `shard` dialect.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_TD
#define TESSEL_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Tessel_Dialect : Dialect {
  let name = "tessel";
  let cppNamespace = "::tessel";
  let summary = "Neural-network ops of a Tessel training program.";
  let description = [{
    The `tessel` dialect describes *what* a model computes: parameters (`tessel.param`),
    matrix products, elementwise ops, normalisation, softmax, attention and the loss,
    on global shapes. Every op carries the user's source line (a `FileLineColLoc`
    wrapped in a `NameLoc` holding the parameter path) so that errors found in any pass
    point at the model source.

    Broadcasting: binary elementwise ops (`add`, `sub`, `mul`) accept equal shapes, or a
    shorter operand whose shape equals the trailing dimensions of the longer one (numpy
    broadcasting restricted to missing leading dimensions, e.g. a bias `[C]` added to
    `[B, T, C]`). No other op broadcasts. Reductions remove the reduced dimensions.

    Functions carry the dialect's discardable attributes: `tessel.input` on arguments,
    `tessel.output` and `tessel.grad` on results, `tessel.batch_shards` and
    `tessel.mixed_precision` on the function (what the pipeline has done to it), and
    `tessel.axis_names` on a `shard.grid` (the plan's mesh), `tessel.shardings` on
    operations, `tessel.fsdp_unit` on parameters and their all-gathers, and the pipeline
    attributes (`tessel.pipeline` on a stage's functions, `tessel.pp_chunk`,
    `tessel.pp_microbatch`, `tessel.pp_action`, `tessel.pp_group`, `tessel.pp_stages` on
    operations). Any other
    `tessel.*` attribute name is an error.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 0;

  // The discardable attributes of the dialect: the one place their names and types are
  // spelt. C++ reaches them through TesselDialect::<Name>AttrHelper::getNameStr() and the
  // accessors of compiler/FunctionAttrs.h; the dialect's verifier hooks (TesselDialect.cpp)
  // check their types and where they may appear, and reject any other `tessel.*` name.
  let discardableAttrs = (ins
    // `tessel.input = "<name>"` on an argument of a function: the argument is the model
    // input (or optimizer hyper-parameter) of that name. Set by dsl/Graph (the model's
    // inputs) and tessel-optimizer (lr, beta1, ...); read by tessel-shard-batch, the
    // optimizer (name clashes), codegen/Lowering (input buffer names) and dsl/Model (the
    // train step's inputs).
    "::mlir::StringAttr":$input,
    // `tessel.output = "<name>"` on a function result: what the result is ("loss",
    // "grad_norm", or a model output). Set by dsl/Graph, tessel-autodiff,
    // tessel-gradient-accumulation and tessel-optimizer; read by tessel-autodiff and
    // tessel-optimizer (the loss), tessel-shard-batch (the loss must be a batch mean) and
    // codegen/Lowering (output names).
    "::mlir::StringAttr":$output,
    // `tessel.grad = "<parameter>"` on a function result: the result is the gradient of
    // the loss with respect to that parameter. Set by tessel-autodiff; read by
    // tessel-gradient-accumulation, tessel-gradient-all-reduce and tessel-optimizer.
    "::mlir::StringAttr":$grad,
    // `tessel.batch_shards = N : i64` on a function: its inputs hold the local batch of
    // one of N shards of the global batch (N = data-parallel ranks x microsteps). Set by
    // tessel-shard-batch on @forward (and copied with it by tessel-autodiff and
    // tessel-gradient-accumulation); read by the passes' stage checks
    // (passes/PipelineStage.h), so that a batch is never split twice.
    "::mlir::IntegerAttr":$batch_shards,
    // `tessel.mixed_precision` (unit) on a function: it computes in bf16 with f32 master
    // weights. Set by tessel-mixed-precision (and copied with the function by
    // tessel-autodiff); read by the stage checks, so that the rewrite never runs twice.
    "::mlir::UnitAttr":$mixed_precision,
    // `tessel.partitioned` (unit) on a function: its values have per-rank local shapes and
    // its collectives are explicit (tessel-partition ran; copied with the function by
    // tessel-autodiff); read by the stage checks, so that a function is never partitioned
    // twice.
    "::mlir::UnitAttr":$partitioned,
    // `tessel.axis_names = ["dp", ...]` on a `shard.grid`: the names of the mesh's axes, in
    // order, one non-empty unique name per axis (upstream grids have sizes but no names; the
    // runtime addresses a replica group by axis name). Set by tessel-gradient-all-reduce when
    // it creates the plan's mesh; read by the collective ops' verifiers and accessors
    // (compiler/TesselCommOps.td) and tessel-gradient-all-reduce (finding its axis).
    "::mlir::ArrayAttr":$axis_names,
    // `tessel.shardings = [#tessel.sharding<...>, ...]` on an operation: the sharding of
    // each of its results, in order, on the plan's mesh. Set on `tessel.param` ops by the
    // plan (dsl/ and tessel-tensor-parallel), on every op of @forward by
    // tessel-propagate-sharding; read by tessel-insert-reshards, tessel-partition and
    // codegen/Lowering (a parameter's shard of the global tensor).
    "::mlir::ArrayAttr":$shardings,
    // `tessel.fsdp_unit = "<module path>"` on a `tessel.param` (and on the all-gathers of
    // it): the FSDP unit the stored shard belongs to ("" for the root unit;
    // compiler/FsdpUnits.h). Set by tessel-fully-shard (and copied onto the gathers by
    // tessel-reshard-after-forward and tessel-fsdp-prefetch); read by those passes to gather
    // a unit as one group, and by codegen/ShardMoveLowering for --explain and the trace.
    "::mlir::StringAttr":$fsdp_unit,
    // `tessel.pipeline = {axis = "pp", stage = s, stages = p, virtual_stages = v,
    // microbatches = m, schedule = "1f1b"}` on a function of one pipeline stage (every value
    // i64 but `axis` and `schedule`; `microbatches` and `schedule` once tessel-microbatch and
    // tessel-schedule-pipeline ran). Set by tessel-split-stages (copied onto @train_step by
    // tessel-autodiff); read by the later pipeline passes and codegen/Lowering
    // (rt::Program::pipeline).
    "::mlir::DictionaryAttr":$pipeline,
    // `tessel.pp_chunk = c` (i64) on an operation of a pipeline stage: the chunk (model
    // stage, one of p x v) it computes. Set by tessel-split-stages on forward ops and by
    // tessel-autodiff on the backward ops it builds from them; read by tessel-microbatch and
    // tessel-schedule-pipeline.
    "::mlir::IntegerAttr":$pp_chunk,
    // `tessel.pp_microbatch = m` (i64): the microbatch an unrolled operation computes. Set
    // by tessel-microbatch; read by tessel-schedule-pipeline.
    "::mlir::IntegerAttr":$pp_microbatch,
    // `tessel.pp_action = "F" | "B" | "I" | "W"`: whether an operation of a chunk belongs
    // to its forward or backward action (tessel-split-stages marks "F", tessel-autodiff
    // "B"), or under a zero-bubble schedule to the backward's input-gradient ("I") or
    // weight-gradient ("W") part (tessel-schedule-pipeline).
    "::mlir::StringAttr":$pp_action,
    // `tessel.pp_group = g` (i64) on `tessel.send` / `tessel.recv`: transfers with one g
    // progress together (one send_recv step). Set by tessel-schedule-pipeline.
    "::mlir::IntegerAttr":$pp_group,
    // `tessel.pp_stages = array<i64: 0, 3>` on a `tessel.param` held by several pipeline
    // stages (a tied embedding): those stages, ascending. Set by tessel-split-stages; read by
    // tessel-microbatch (the gradient is summed across them) and tessel-optimizer (the norm
    // counts the parameter on the first stage only).
    "::mlir::DenseI64ArrayAttr":$pp_stages
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

// Element types and tensor classes used by the ops.
def Tessel_FloatTensor : StaticShapeTensorOf<[F32, BF16]>;
def Tessel_IndexTensor : StaticShapeTensorOf<[I32]>;
def Tessel_AnyTensor : StaticShapeTensorOf<[F32, BF16, I32]>;
// An f32 scalar (tensor<f32>): losses, norms and runtime hyper-parameters. Buildable, so
// assembly formats need not spell its type.
def Tessel_ScalarF32 : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

//===----------------------------------------------------------------------===//
// Enum attributes: the kinds an op is parameterised by. They print as bare words in the
// ops' assembly (`reduce avg`, `init zeros`) and as `#tessel<reduce_kind avg>` in the
// generic form; a word outside the list is a parse error, so verifiers need no string
// checks.
//===----------------------------------------------------------------------===//

def Tessel_ReduceKind : I32Enum<"ReduceKind", "how a collective combines the ranks' values", [
    // The elementwise sum over the group.
    I32EnumCase<"sum", 0>,
    // The sum divided by the group size (torch.distributed.ReduceOp.AVG).
    I32EnumCase<"avg", 1>,
    // The elementwise maximum (a sharded softmax's row max); the runtime has no max
    // collective yet, so codegen refuses it.
    I32EnumCase<"max", 2>]> {
  let cppNamespace = "::tessel";
}
def Tessel_ReduceKindAttr : EnumAttr<Tessel_Dialect, Tessel_ReduceKind, "reduce_kind">;

def Tessel_InitKind : I32Enum<"InitKind", "how the runtime initialises a parameter", [
    // N(0, std^2) (needs `std`).
    I32EnumCase<"normal", 0>,
    I32EnumCase<"zeros", 1>,
    I32EnumCase<"ones", 2>]> {
  let cppNamespace = "::tessel";
}
def Tessel_InitKindAttr : EnumAttr<Tessel_Dialect, Tessel_InitKind, "init_kind">;

//===----------------------------------------------------------------------===//
// Shardings
//===----------------------------------------------------------------------===//

def Tessel_ShardingAttr : AttrDef<Tessel_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "where a tensor lives on the plan's mesh";
  let description = [{
    The sharding of one tensor on the `shard.grid` `grid`: for each tensor dimension, the
    grid axes it is split over (`split_axes`, upstream `shard`'s GridAxesArrayAttr; an
    empty list is replicated along that dimension, and a dimension split over several axes
    is split over the first, then each part over the next, as upstream `shard.sharding`),
    plus the axes over which the tensor is *partial*: a pending sum whose every rank holds
    one addend (`partial`, as upstream's `partial = sum [...]`). A tensor with no split
    and no partial axis is replicated.

    `blocks` (one entry per dimension, default 1) is what upstream lacks: the dimension is
    the concatenation of `blocks` equal parts, and each part is split over the axes on its
    own, so a rank's shard is its slice of every part, concatenated (PyTorch DTensor's
    `_StridedShard`, Megatron's `partition_stride`). A fused qkv projection's output
    `[B, T, 3C]` split over tp by heads is `blocks = [1, 1, 3]`: each rank holds its heads'
    queries, keys and values.

    `padding` (one entry per dimension, default 0; also beyond upstream, whose
    `sharded_dims_offsets` describes uneven shards by explicit offsets) is set by
    tessel-partition on a parameter whose split axes do not divide a dimension: the global
    dimension G is padded at its end by `padding` elements to P x L, P the product of the
    axis sizes and L = ceil(G / P) the local size, so every rank holds L elements and those
    past G are padding (zero in a parameter; never part of the logical tensor). Only an
    unblocked dimension (blocks = 1) is padded: a block is a head's q, k or v, which one
    rank must hold whole.

    Example: a column-parallel qkv weight `[3C, C]` over tp (axis 1 of `@mesh`), and a
    row-parallel output that is a pending sum over tp:

    ```mlir
    #tessel.sharding<@mesh, [[1], []], blocks = [3, 1]>
    #tessel.sharding<@mesh, [[], [], []], partial = [1]>
    ```

    and, after partitioning, a 65-row embedding table split over tp = 2 (33 rows each, the
    last rank's 33rd row padding): `#tessel.sharding<@mesh, [[1], []], padding = [1, 0]>`.
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$grid,
                        "::mlir::shard::GridAxesArrayAttr":$split_axes,
                        ArrayRefParameter<"int64_t">:$blocks,
                        ArrayRefParameter<"int16_t">:$partial_axes,
                        ArrayRefParameter<"int64_t">:$padding);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The replicated sharding of a rank-`rank` tensor on `grid`.
    static ShardingAttr replicated(::mlir::MLIRContext* ctx, ::mlir::FlatSymbolRefAttr grid,
                                   int64_t rank);
    /// The axes dimension `dim` is split over (empty: not split).
    ::llvm::ArrayRef<int16_t> axesOf(int64_t dim) const;
    /// The blocks of dimension `dim` (1 when `blocks` is empty).
    int64_t blocksOf(int64_t dim) const;
    /// The padding of dimension `dim` (0 when `padding` is empty).
    int64_t paddingOf(int64_t dim) const;
  }];
}

class Tessel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tessel_Dialect, mnemonic, traits>;

#endif // TESSEL_DIALECT_TD
