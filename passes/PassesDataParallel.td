//===- PassesDataParallel.td - Tessel passes: batch, gradients, remat ---*- tablegen -*-===//
//
// The passes of data parallelism and of the training step around it: batch sharding, gradient
// accumulation, all-reduce, ZeRO-2 reduce-scatter, buckets, overlap, activation checkpointing.
// Included by passes/Passes.td (its header says what every description holds).
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_PASSES_DATA_PARALLEL_TD
#define TESSEL_PASSES_DATA_PARALLEL_TD

def ShardBatch : Pass<"tessel-shard-batch", "mlir::ModuleOp"> {
  let summary = "Data parallelism: give @forward the local batch of one rank";
  let description = [{
    Splits the global batch over `parts` ranks (the data-parallel degree, times the
    gradient-accumulation microsteps when there are any): every rank runs the same function
    on its own `B / parts` rows, so the program is written on local shapes.

    1. Every input of the function (an argument tagged `tessel.input`) must have rank >= 1
       and the same leading (batch) dimension B, divisible by `parts`; otherwise the pass
       fails at the input's location, naming B and `parts`.
    2. The inputs' leading dimension becomes `B / parts`. Walking the ops in order, a result
       of an op with a batch-sharded operand whose leading dimension is B becomes batch
       sharded too (`B / parts`); other results (weights' shapes, scalars, reductions over the
       batch) keep their type. Every changed op is re-verified; an op whose shape rule does
       not accept the local shapes is an error at its location.
    3. The loss must be a mean over the batch (`tessel.cross_entropy` or `tessel.reduce_mean`
       of a batch-sharded value), so that the average of equal-sized local means is the
       global mean and the average of the local gradients is the global gradient.

    It runs before autodiff, so the backward pass is derived on local shapes. The function
    is marked `tessel.batch_shards = parts`.

    Stage: once, before `tessel-autodiff`: no `@train_step` yet (it would stay on the global
    batch), `@forward` not already batch sharded (`tessel.batch_shards`), not fused.
  }];
  let options = [
    Option<"parts", "parts", "int64_t", "1", "ranks (times microsteps) the batch is split over">,
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the function to shard">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def GradientAccumulation : Pass<"tessel-gradient-accumulation", "mlir::ModuleOp"> {
  let summary = "Accumulate gradients over k microsteps, synchronising only on the last";
  let description = [{
    Rewrites `@train_step` as `tessel-autodiff` leaves it (the loss, then one gradient per
    parameter tagged `tessel.grad`) for `microsteps` = k > 1:

    1. `@accumulate_step`, a copy that adds each gradient into a zero-initialised state
       parameter `<name>:grad_accum` (`tessel.assign`) and returns only the loss. It has no
       collectives and no optimizer: it is the no-sync microstep, run k - 1 times.
    2. `@train_step` (the last microstep) returns `(grad_accum + g) * (1 / k)` for each
       gradient and assigns zeros back to `<name>:grad_accum`. Later passes insert the
       all-reduce and the optimizer after it, so the collectives run once per step.

    Gradients that are reduce-scattered (`tessel.reduce_scatter`, ZeRO-2 and ZeRO-3; under
    mixed precision `cast(reduce_scatter(bf16))`) follow `reduce-scatter`:
    `every-microstep` (the default, FSDP2's): each microstep reduce-scatters its gradient
    and accumulates the block, so a rank holds 1 / ranks of every gradient between
    microsteps; `last-microstep`: each rank accumulates its whole local gradient (in f32)
    and `@train_step` reduce-scatters `grad_accum + g` once, `reduce_scatter(grad_accum +
    g) * (1 / k)`: one reduce-scatter per step instead of k, for a whole gradient's memory.
    Both compute the same mean.

    ```mlir
    // last-microstep, @train_step with k = 2:
    %a = tessel.param "w:grad_accum" state init zeros : tensor<64x8xf32>
    %s = tessel.add %a, %g : (tensor<64x8xf32>, tensor<64x8xf32>) -> tensor<64x8xf32>
    %r = tessel.reduce_scatter %s reduce sum on @mesh grid_axes = [0] scatter_axis = 0
        : tensor<64x8xf32> -> tensor<16x8xf32>
    %m = tessel.scale %r, 5.000000e-01 : tensor<16x8xf32>
    ```

    Design: separate functions rather than k unrolled copies of the forward and backward
    pass, so the program size and the activation memory do not grow with k. With equal
    microbatches the mean of the k microbatch gradients is the gradient of the mean loss
    over the whole batch, so k x (B/k) computes the same step as 1 x B.

    Stage: once, after `tessel-autodiff`: `@train_step` exists, no `@accumulate_step` yet,
    gradients not reduced and no optimizer (each microstep would synchronise or update),
    not fused.
  }];
  let options = [
    Option<"microsteps", "microsteps", "int64_t", "2", "k, the microsteps per optimizer step">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"",
           "the function to rewrite">,
    Option<"reduceScatter", "reduce-scatter", "std::string", "\"every-microstep\"",
           "when reduce-scattered gradients are reduce-scattered: every-microstep or "
           "last-microstep (once per step, after accumulating the whole local gradient)">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def GradientAllReduce : Pass<"tessel-gradient-all-reduce", "mlir::ModuleOp"> {
  let summary = "Average every gradient over the data-parallel ranks";
  let description = [{
    In `@train_step` (the loss, then gradients tagged `tessel.grad`), wraps every gradient
    in its own `tessel.all_reduce_start` / `tessel.all_reduce_wait` pair with `reduce avg`
    over mesh axis `axis` of `group` ranks, right before the return, and returns the
    reduced value. The collectives name the plan's mesh, the module's `shard.grid @mesh`,
    and the index of `axis` in it (`on @mesh grid_axes = [i]`). When the module has no
    @mesh, the pass creates the 1-D grid `shard.grid @mesh(shape = group)
    {tessel.axis_names = ["axis"]}` at the top of the module; an existing @mesh must be a
    `shard.grid` whose `tessel.axis_names` contains `axis` with `group` ranks, otherwise the
    pass fails at the grid. A single-rank run without a plan never runs this pass, so its
    module has no grid. Each rank's gradient is the gradient of its local mean loss, so their
    average is the gradient of the global mean loss. It runs before `tessel-optimizer`, so
    global-norm clipping sees the reduced gradients and computes the same norm and
    coefficient on every rank. Explicit zero gradients (a parameter the loss ignores) are
    not reduced. `tessel-bucket-gradients` then coalesces the pairs.

    `axis` may list several axes, comma-separated ("dp,fsdp"), when the batch is split over
    all of them (`group` ranks together; the module's @mesh must have them). A gradient whose
    parameter is stored split over some of them (tessel-fully-shard) comes from the
    reduce-scatter sum that autodiff made of the parameter's all-gather: its kind becomes
    `avg` (after gradient accumulation, which sums the microsteps' reduce-scatters, a
    `tessel.scale` by 1 / their ranks does the same), and it is all-reduced over the
    remaining axes only (HSDP's replicas), or not at all. Under mixed precision the
    gradient is `cast(reduce_scatter(bf16))`; it becomes `reduce_scatter(cast to f32)`, so
    that the ranks' parts are summed in f32 (never rounded to bf16 at every hop).

    `scattered-axis` (ZeRO-2): a gradient whose type is a block of its parameter's (dimension
    0 divided by the axis's ranks) was reduce-scattered over that axis by
    tessel-reduce-scatter-gradients although its parameter is replicated: it is treated as
    a fully sharded parameter's gradient, averaged over the axis and all-reduced over the
    other batch axes only.

    Stage: once, after `tessel-autodiff`: `@train_step` exists, its gradients are not
    reduced yet (a second run would reduce them twice), no optimizer yet, not fused.
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"dp\"",
           "the mesh axis (or comma-separated axes) the batch is split over">,
    Option<"group", "group", "int64_t", "2", "ranks in the replica group">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"",
           "the function to rewrite">,
    Option<"scatteredAxis", "scattered-axis", "std::string", "\"\"",
           "ZeRO-2: the batch axis gradient blocks of replicated parameters arrive "
           "reduce-scattered over">,
  ];
  let dependentDialects = ["::tessel::TesselDialect", "::mlir::shard::ShardDialect"];
}

def ReduceScatterGradients : Pass<"tessel-reduce-scatter-gradients", "mlir::ModuleOp"> {
  let summary = "ZeRO-2: reduce-scatter each gradient into the blocks of its optimizer state";
  let description = [{
    In `@train_step` as `tessel-autodiff` leaves it, every gradient result of a parameter of
    rank >= 1 that is replicated over mesh axis `axis` (the plan's fsdp axis at ZeRO stage
    2) becomes `tessel.reduce_scatter ... reduce sum` over the axis along dimension 0, right
    after the gradient is computed (so the whole gradient dies there, as under ZeRO-3): each
    rank keeps the sum over the axis's ranks of rows [k R, k R + R) of the gradient (R =
    rows / ranks, k its coordinate), the block of the parameter whose optimizer state it
    holds (`tessel-optimizer` with `shard-state-axis`), and never the whole reduced
    gradient. `tessel-gradient-accumulation` then accumulates blocks or whole gradients
    (its `reduce-scatter` option), and `tessel-gradient-all-reduce` (`scattered-axis`)
    turns the sum into the mean. Scalars and autodiff's explicit zeros are left alone; a
    parameter already split over the axis (ZeRO-3) or on dimension 0, and a first
    dimension the axis does not divide, are errors at the parameter.

    ```mlir
    // before: return %loss, %dw : tensor<f32>, tensor<64x8xf32>
    %r = tessel.reduce_scatter %dw reduce sum on @mesh grid_axes = [0] scatter_axis = 0
        : tensor<64x8xf32> -> tensor<16x8xf32>
    return %loss, %r : tensor<f32>, tensor<16x8xf32>
    ```

    Stage: once, after `tessel-autodiff`, before `tessel-gradient-accumulation`,
    `tessel-gradient-all-reduce` and `tessel-optimizer`.
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"fsdp\"",
           "the mesh axis gradients are reduce-scattered over">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"",
           "the function to rewrite">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def BucketGradients : Pass<"tessel-bucket-gradients", "mlir::func::FuncOp"> {
  let summary = "Coalesce single-gradient all-reduces into buckets of bucket-mb";
  let description = [{
    Collects the single-input `tessel.all_reduce_start` ops of the function, orders them
    by where their gradient is produced (the backward pass's order: the last layer's
    gradients first, like DDP's reverse parameter order, but read from the IR), and packs
    them greedily: a bucket takes gradients until it holds at least `bucket-mb` MiB
    (2^20 bytes), then the next bucket starts (DDP's rule; gradients are never split, so a
    bucket exceeds the cap by less than its last gradient, and the bucket count is at most
    ceil(total bytes / cap bytes)). Each bucket becomes one start/wait pair, in bucket order
    after the last single wait, numbered in issue order; its `params` list its gradients.
    `tessel-overlap-collectives` then places them.

    Stage: once, after `tessel-gradient-all-reduce`: no all-reduce carries several tensors
    yet (buckets would be renumbered twice), no reduced value is used before the last
    collective (a bucket's wait, placed after its last gradient's, would follow that use),
    not fused.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", "25.0", "bucket capacity in MiB (> 0)">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def OverlapCollectives : Pass<"tessel-overlap-collectives", "mlir::func::FuncOp"> {
  let summary = "Place each collective's start and wait";
  let description = [{
    With `overlap` (the default): each `tessel.all_reduce_start` moves to right after the
    op that produces the last of its inputs (so its all-reduce runs while the rest of the
    backward pass computes), and each `tessel.all_reduce_wait` moves to right before the
    first op that uses one of its results (the optimizer's global norm, or the update).
    Without: every start, in bucket order, and then every wait are placed right before the
    first use of any wait result, i.e. the communication happens after the backward pass,
    exposed (the reference for measuring overlap). Starts keep their bucket order, which is
    the order every rank issues them in.

    Stage: after `tessel-bucket-gradients`, before `tessel-fuse` (which groups ops by their
    place in the block): the function is not fused.
  }];
  let options = [
    Option<"overlap", "overlap", "bool", "true", "start collectives during backward">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def ActivationCheckpointing : Pass<"tessel-activation-checkpointing", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing (remat): recompute forward values in the backward pass";
  let description = [{
    Frees the activations of the checkpointed modules after the forward pass and
    recomputes them where the backward pass needs them, by cloning forward ops (whole
    fused kernels) next to their first backward use. It runs after `tessel-autodiff`, so
    autodiff knows nothing of it, and after `tessel-fuse`, so a recomputed value comes from
    the same kernel as the original. In every function with a loss (`@train_step`,
    `@accumulate_step`):

    1. The forward ops are those the returned loss depends on; the others are backward
       (and optimizer) work.
    2. A forward op's unit is the shortest dotted prefix of its location's module path
       that a `modules` glob matches (`blocks.*` puts every op of `blocks.3.*` in unit
       `blocks.3`).
    3. `mode=full`: each unit's forward ops (parameters aside) form one region.
       `mode=selective` (Megatron-LM's): each causal `softmax` of a unit (or the fused
       kernel holding it) with the ops up to the matmul on either side (the T x T scores
       q k^T, the scale, the softmax and its product with v) forms one; the linear
       layers' outputs are kept.
    4. A region's internal values are those no forward op outside it reads (a block's
       output is the next block's input, and is kept). The ops the backward pass needs
       for them are cloned in forward order right before the first backward op reading
       one, and the backward pass reads the clones. A collective's result is never
       recomputed (that would communicate again): it is kept and the clones read it.

    Before (shown unfused; `%p` is read by the backward op `softmax_grad`, so it lives
    through the rest of the forward pass and the backward of every later block):
    ```mlir
    %s = tessel.matmul %q, %k transpose_rhs : (...) -> tensor<2x2x8x8xf32>  // blocks.0
    %z = tessel.scale %s, 0.35 : tensor<2x2x8x8xf32>
    %p = tessel.softmax %z causal : tensor<2x2x8x8xf32>
    ...                                          // forward and backward of blocks.1
    %g = tessel.softmax_grad %p, %dy : tensor<2x2x8x8xf32>
    ```
    After (`mode=selective`): `%p` dies inside the forward pass.
    ```mlir
    ...
    %s2 = tessel.matmul %q, %k transpose_rhs : (...) -> tensor<2x2x8x8xf32>
    %z2 = tessel.scale %s2, 0.35 : tensor<2x2x8x8xf32>
    %p2 = tessel.softmax %z2 causal : tensor<2x2x8x8xf32>
    %g = tessel.softmax_grad %p2, %dy : tensor<2x2x8x8xf32>
    ```
    Clones are the same ops and kernels on the same operands, so every value is computed
    the same way: training is bitwise unchanged. A forward kernel that also computes the
    next unit's values (the residual add ending a block, fused with the next block's first
    layer norm) belongs to the unit of its first op, so the next block keeps that layer
    norm's output. A second run changes nothing. Errors, at `plan-site` (the plan's
    `checkpoint` line): a mode other than full or selective, no op in a module the globs
    match, and selective mode without a causal softmax.

    Stage: after `tessel-autodiff` (`@train_step` exists), last: after `tessel-fuse`
    (which would put a recomputed op in another kernel than its original).
  }];
  let options = [
    ListOption<"modules", "modules", "std::string",
               "globs over module paths whose forward is recomputed (e.g. blocks.*)">,
    Option<"mode", "mode", "std::string", "\"full\"",
           "full (the whole module) or selective (core attention only)">,
    Option<"planSite", "plan-site", "std::string", "\"\"",
           "where the plan asks for checkpointing, file:line:col (errors point there)">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

//===----------------------------------------------------------------------===//
// Sharding: tensor-parallel seeds, propagation, reshards, collectives, local shapes. They run
// on the forward function before autodiff, which then derives the backward pass on local
// shapes and transposes the collectives (compiler/VJP.cpp).
//===----------------------------------------------------------------------===//

#endif // TESSEL_PASSES_DATA_PARALLEL_TD
