//===- PassesSharding.td - Tessel passes: sharding, TP, FSDP ---*- tablegen -*-===//
//
// The passes of sharding on a mesh: tensor parallelism, sharding propagation, reshards,
// collectives, fully sharded data parallelism (units, prefetch) and partitioning.
// Included by passes/Passes.td (its header says what every description holds).
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_PASSES_SHARDING_TD
#define TESSEL_PASSES_SHARDING_TD

def TensorParallel : Pass<"tessel-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Seed the Megatron-LM tensor-parallel layout as parameter shardings";
  let description = [{
    Applies a plan's `tensor_parallel(axis)` (Shoeybi et al. 2019, Megatron-LM): finds the
    pairs of linear layers whose split needs one all-reduce each way, and shards their
    weights on the plan's mesh (`shard.grid @mesh`, axis named `axis`):

    1. the projection feeding a `tessel.causal_attention` is column-parallel by heads: its
       weight `[3C, C]` is split on its output dimension in 3 blocks (each rank holds its
       heads' queries, keys and values); the projection reading the attention's output is
       row-parallel: its weight `[C, C]` is split on its input dimension;
       the projections producing q, k and v of a `tessel.grouped_attention` (NH query, NKV
       key/value heads; looking through a `tessel.rope`) are column-parallel (blocks 1: rank
       r holds query heads [r NH/tp, ...) and the kv heads they use) and the one reading its
       output row-parallel; when tp > NKV (tp a multiple of NKV), wk and wv stay replicated
       and the attention reads, on rank r, only kv head r / (tp / NKV): k and v go through
       a `tessel.replicate` (its backward all-reduces their gradients over the axis), their
       heads are repeated tp / NKV times and the rank's row is picked by an embedding at
       `tessel.mesh_coordinate`; the attention's kv_heads becomes 1. NH not divisible by
       tp, or NKV neither divisible by tp nor dividing it, is an error at the attention
       naming the three numbers (with a note at the plan's call);
    2. a linear layer followed by one activation (gelu, relu) and another linear layer: the
       first column-parallel, the second row-parallel;
       a SwiGLU MLP (Llama) `down(silu(gate(x)) * up(x))`, in either operand order of the
       mul: gate and up column-parallel, down row-parallel;
    3. an embedding table `[V, C]` whose V the axis size divides is split on V (Megatron's
       VocabParallelEmbedding; a tied LM head then yields logits split on V, and
       tessel-partition makes the loss the vocab-parallel cross-entropy, so the full logits
       never exist on one rank); a V it does not divide stays replicated for now.

    Only weights are seeded (`tessel.shardings` on their `tessel.param`); the biases and
    every activation follow by tessel-propagate-sharding. Weights the plan shards itself
    keep the plan's sharding, and a weight an embedding also reads (a tied LM head) is not
    split. Errors point at the plan's call (`site`, "file:line:col"): an axis the mesh lacks,
    heads not divisible by the axis size (with a note at the attention), a split dimension
    not divisible, or no pair found.

    Stage: once, on the forward function before tessel-propagate-sharding (no @train_step,
    no shardings on ops, not partitioned, not fused).
  }];
  let options = [
    Option<"axisName", "axis", "std::string", "\"tp\"", "the mesh axis to split over">,
    Option<"tensorParallelSite", "site", "std::string", "\"\"",
           "the plan's tensor_parallel call, file:line:col (for diagnostics)">,
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the forward function">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def PropagateSharding : Pass<"tessel-propagate-sharding", "mlir::ModuleOp"> {
  let summary = "Give every value of the forward function a sharding";
  let description = [{
    Walks the forward function in order and gives every op's results a sharding
    (`tessel.shardings`) from its operands' by the op's rule (compiler/ShardingRules.h,
    einsum-like: which operand dimension each result dimension comes from, and which
    contracted dimension leaves a pending sum). Arguments are replicated; parameters have
    the plan's sharding, or none yet: a parameter the plan left free takes the sharding
    its first use asks for (so a bias follows its weight), and is fixed from then on.

    Then a backward walk: where a user asks the result of an elementwise op for a split it
    lacks (a residual add whose other operand is split along the sequence), the producer
    takes it on a second forward walk, so a row-parallel product's pending sum is resolved
    straight into that split (a reduce-scatter) rather than into a replicated tensor.
    With `sequence-axis` (sequence parallelism, Korthikanti et al. 2022), every layer
    norm's and RMS norm's input is asked for its rows (dimension 1, T) split over that
    axis, which seeds the residual stream's split.

    Deterministic (program order, a fixed number of walks). On a conflict the op's rule
    decides: a split beats replicated, the first operand's split beats the second's, a
    weight's split beats an activation's rows, and a pending sum stays pending only
    through linear ops (add, sub, scale); tessel-insert-reshards then makes every operand
    what its user asks for.

    Stage: once, after the plan's seeds (tessel-tensor-parallel) and before
    tessel-insert-reshards: no @train_step, no shardings on ops yet, not partitioned.
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the forward function">,
    Option<"sequenceAxis", "sequence-axis", "std::string", "\"\"",
           "sequence parallelism: split the layer and RMS norms' rows over this mesh axis">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def InsertReshards : Pass<"tessel-insert-reshards", "mlir::ModuleOp"> {
  let summary = "Insert a tessel.reshard wherever a user needs another sharding";
  let description = [{
    For every op of the forward function (and its return), evaluates the op's sharding
    rule on its operands' shardings and, for each operand whose sharding differs from the
    one the rule asks for, inserts `tessel.reshard %v : T from #a to #b -> T` before it
    (one per value and target, shared by its users). The return's operands must be
    replicated. No collective is chosen here (tessel-reshard-to-collectives does, after
    tessel-partition).

    Stage: after tessel-propagate-sharding (shardings on ops), before tessel-partition;
    once (no tessel.reshard yet).
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the forward function">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def ReshardToCollectives : Pass<"tessel-reshard-to-collectives", "mlir::ModuleOp"> {
  let summary = "Replace each tessel.reshard with the collective that performs it";
  let description = [{
    Runs on local shapes (after tessel-partition). Each `tessel.reshard` becomes a
    collective on the plan's mesh:
    - the same splits, fewer partial axes: `tessel.all_reduce` sum over the resolved axes
      (a row-parallel projection's output before its bias and the residual add; Megatron's
      g);
    - one dimension's split removed: `tessel.all_gather` along it (sequence parallelism's
      gather of the rows before a column-parallel projection); or only its innermost
      (last-listed) axes removed: `tessel.all_gather` over those axes, which rebuilds the
      block of the axes that stay (FSDP x TP: a tensor-parallel rank's weight gathered
      over fsdp). A dimension in B > 1 blocks is gathered per block: reshaped to
      [B, local / B], gathered along the new inner dimension, reshaped back. A padded
      dimension gathered whole is gathered then trimmed (the all-gather's result drops the
      padding);
    - a pending sum resolved into one dimension's split over the same axes:
      `tessel.reduce_scatter` sum along it (sequence parallelism after a row-parallel
      projection);
    - a reshard to the layout its input already has disappears;
    - any other change (a replicated tensor sliced, a split moved between dimensions, an
      outer axis gathered before an inner one) is an error at the reshard's user naming
      both layouts.

    Stage: after tessel-partition (the function is partitioned), before tessel-autodiff.
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the forward function">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def FullyShard : Pass<"tessel-fully-shard", "mlir::ModuleOp"> {
  let summary = "Store every parameter split on dimension 0 over the FSDP axis (ZeRO-3)";
  let description = [{
    Fully sharded data parallelism, FSDP2-style (per parameter, no flattening). Every
    `tessel.param` of rank >= 1 keeps the layout tessel-propagate-sharding gave it for
    compute, S, and is stored as S with dimension 0 split over `axis`; its users read
    `tessel.reshard %p from <stored> to S`, placed right before the first user, which
    tessel-reshard-to-collectives turns into an all-gather along dimension 0. Autodiff
    transposes the gather into a reduce-scatter sum, which adds the per-rank gradients of
    the split batch into each rank's shard; tessel-gradient-all-reduce makes it the mean.
    `axis` must also split the batch (a batch axis of tessel-shard-batch and of tessel-partition's
    `batch-axes`). Scalars stay replicated.

    With tensor parallelism: a dimension 0 already split over tp axes (column-parallel
    weights and biases, the vocabulary-parallel embedding) is stored split over the tp axes
    then `axis`, tp major and fsdp minor (#tessel.sharding lists them in that order): each
    tensor-parallel rank's block is split again over fsdp, so the all-gather over `axis`
    alone rebuilds that rank's compute block (FSDP2 over a TP DTensor does the same: its
    _StridedShard shards the TP-local tensor). Row-parallel weights (dimension 1 split) get
    dimension 0 over `axis`. A dimension 0 split over two axes must be divisible by both
    (no padding there).

    An uneven first dimension G (not divisible by the axis's N ranks) is stored padded to
    N x ceil(G / N), zeros at its end (tessel-partition records the padding); the all-gather
    trims the padding off (gather-then-trim), and its transpose, the reduce-scatter, pads the
    gradient with zeros, so the padding stays zero.

    ```mlir
    %w = tessel.param "fc.weight" {tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<16x64xf32>
    %g = tessel.reshard %w : tensor<16x64xf32> from #tessel.sharding<@mesh, [[0], []]>
        to #tessel.sharding<@mesh, [[], []]> -> tensor<16x64xf32>
    ```

    Units (`units`, globs over module paths, compiler/FsdpUnits.h): every sharded
    parameter is tagged `tessel.fsdp_unit = "<module path>"` (`""`: the root unit, the
    parameters in no unit), and the gathers of one unit are placed together, in parameter
    order, right before the first forward use of any of them, so a unit is all-gathered
    as one group. Without `units` each parameter is its own unit (no tag), gathered right
    before its own first use. A glob that matches no module (a dotted prefix of a
    parameter name) is an error at `plan-site`.

    ```mlir
    %w = tessel.param "fc.weight" {tessel.fsdp_unit = "fc", tessel.shardings = [...]} : tensor<16x64xf32>
    %g = tessel.reshard %w : tensor<16x64xf32> from #tessel.sharding<@mesh, [[0], []]>
        to #tessel.sharding<@mesh, [[], []]> -> tensor<16x64xf32>
    ```

    Stage: after tessel-insert-reshards (shardings on ops), before tessel-partition; once.
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the forward function">,
    Option<"axis", "axis", "std::string", "\"fsdp\"", "the mesh axis parameters are sharded over">,
    ListOption<"units", "units", "std::string",
               "globs over module paths: the FSDP units (e.g. blocks.*); none: one unit per parameter">,
    Option<"planSite", "plan-site", "std::string", "\"\"",
           "where the plan calls fully_shard, file:line:col (errors point there)">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def ReshardAfterForward : Pass<"tessel-reshard-after-forward", "mlir::ModuleOp"> {
  let summary = "FSDP: gather each parameter again in the backward pass instead of keeping it";
  let description = [{
    In every function with a loss (`@train_step`, `@accumulate_step`), each
    `tessel.all_gather` of a `tessel.param` (tessel-fully-shard's gather of a stored shard;
    under mixed precision, of its bf16 cast) that the backward pass also reads is cloned right before its first backward reader,
    which then reads the clone. Forward ops are those the loss depends on. The forward
    gather's result then dies after its last forward use: the gathered parameter is not
    held from forward to backward (FSDP's reshard_after_forward), and each parameter is
    all-gathered twice per step, once in each pass.

    With FSDP units (parameters tagged `tessel.fsdp_unit` by tessel-fully-shard), a unit
    is gathered again as a whole: the gathers of every parameter of the unit, whether or
    not the backward pass reads its value (a bias), are cloned together right before the
    first backward reader of any of them (FSDP2 gathers a module's parameters as one).
    The root unit (`tessel.fsdp_unit = ""`) is not gathered again: its forward gathers are
    kept for the backward pass (FSDP2 does not reshard the root module after forward).

    Stage: after tessel-autodiff, partitioned, and after the last CSE (which would merge
    the clone back into the forward gather).
  }];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def FsdpPrefetch : Pass<"tessel-fsdp-prefetch", "mlir::ModuleOp"> {
  let summary = "FSDP prefetch: start each unit's all-gathers units ahead, wait right before use";
  let description = [{
    In every function with a loss, over the FSDP units' gathers (the `tessel.all_gather`s
    of parameters tagged `tessel.fsdp_unit`, grouped by tessel-fully-shard and
    tessel-reshard-after-forward):

    1. The gather groups, in block order (forward then backward), are the runs of
       consecutive gathers of one unit; group k stands at its first gather.
    2. Each gather becomes `tessel.all_gather_start` + `tessel.all_gather_wait`: the wait
       where the gather was (right before the unit's first use), the start at the place of
       group k - `prefetch` (with the starts of that group, in order), so the gathers of
       the next `prefetch` units are in flight while a unit computes, and at most
       `prefetch` + 1 units' gathers are in flight at once (FSDP2's implicit prefetch with
       limit_all_gathers). The first `prefetch` groups start at the first group's place.
       A start never moves above its input (a parameter, or its bf16 cast, which moves
       with it).

    ```mlir
    %g1 = tessel.all_gather %w1 ... {tessel.fsdp_unit = "blocks.1"}  // before blocks.1
    ```
    becomes, with prefetch = 1,
    ```mlir
    %f1 = tessel.all_gather_start %w1 ...   // where blocks.0's gathers start
    ...                                     // blocks.0 computes
    %g1 = tessel.all_gather_wait %f1 : tensor<8x16xf32>
    ```

    `prefetch = 0` changes nothing (every gather stays synchronous where it is); a
    negative value is an error. Stage: after tessel-reshard-after-forward, before
    tessel-fuse.
  }];
  let options = [
    Option<"prefetch", "prefetch", "int64_t", "1", "units whose gathers start ahead (0: off)">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def Partition : Pass<"tessel-partition", "mlir::ModuleOp"> {
  let summary = "Give the forward function per-rank local shapes";
  let description = [{
    Rewrites the forward function from global shapes to the shapes of one rank's part:

    1. every value split over axes of total size n on a dimension gets 1/n of it (a
       dimension its axes do not divide is padded where the padding provably stays zero,
       see passes/Partition.cpp); a `tessel.causal_attention` whose input is split by heads keeps
       its heads' share (`num_heads` / n);
    2. an operand replicated over an axis that the op's computation is split or partial
       over is read through `tessel.replicate` (Megatron's f: its gradient, one addend per
       rank, is summed by autodiff's transpose, an all-reduce);
    3. `tessel.shardings` stays on sharded parameters (the layout of their part inside the
       global tensor, for the runtime's initialisation and export) and leaves every other
       op; the function is marked `tessel.partitioned`. Reshards get the local shapes of
       their two layouts; a tensor gathered from splits needs no `tessel.replicate` over
       those axes (the gather's transpose already sums its users' per-rank gradients), and
       a gathered tensor read by a computation that is not split over those axes is refused
       (its gradient would be counted once per rank), except over `batch-axes`: every op
       then runs on the rank's part of the batch, and the gradient reduction over those axes
       averages the per-rank terms (fully sharded data parallelism).

    Stage: after tessel-insert-reshards (shardings on ops), before
    tessel-reshard-to-collectives; once.
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the forward function">,
    ListOption<"batchAxes", "batch-axes", "std::string",
               "the mesh axes the batch is split over (tessel-shard-batch)">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

#endif // TESSEL_PASSES_SHARDING_TD
