//===- Passes.td - Tessel passes ----------------------------------*- tablegen -*-===//
//
// Every Tessel transformation pass: one pass per file in passes/, one flag, one lit test
// named after the flag in test/lit/passes/.
//
// Every description ends with the pass's precondition ("Stage: ..."): the stage its input
// must be at, in the terms of passes/PipelineStage.h (@train_step exists, gradients
// reduced, bucketed, optimizer present, fused, batch sharded, mixed precision). The pass
// checks it before changing anything and otherwise fails with
// "<flag>: <what the IR shows>; it runs <where>", at the function or module; each lit test
// has a case of an input at the wrong stage.
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

    Stage: the function is not fused (tessel-fuse must see the scale and softmax this pass
    produces); autodiff has no rule for `causal_attention`, so it runs before autodiff too.
  }];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def MixedPrecision : Pass<"tessel-mixed-precision", "mlir::ModuleOp"> {
  let summary = "bf16 activations and computation with f32 master weights (precision = bf16)";
  let description = [{
    Rewrites the forward function (before `tessel-autodiff`) for mixed precision, as
    PyTorch autocast to bfloat16 and Megatron's bf16 mode do:

    1. Every trainable f32 `tessel.param` (the master weight, which the optimizer keeps in
       f32 with f32 state) and every f32 tensor argument is read through one
       `tessel.cast` to bf16, except by an embedding's table operand: the embedding gathers
       f32 rows that the next bf16 op casts (the same values), so the table's scatter-add
       gradient is summed in f32.
    2. Every op with a bf16 operand computes in bf16: other f32 operands are cast, float
       results become bf16. The kernels keep f32 accumulators in reductions and GEMMs; the
       storage is bf16. `cross_entropy` returns its loss as an f32 scalar, and ops that
       only see f32 values (the loss and its consumers) stay f32.
    3. Returned values are cast back to the declared result types.

    Autodiff differentiates the casts, so parameter gradients are f32. The function is
    marked `tessel.mixed_precision`.

    Stage: once, before `tessel-autodiff`: no `@train_step` yet (rewriting `@forward` after
    it would leave the training step in f32), not already mixed precision, not fused.
  }];
  let options = [
    Option<"functionName", "function", "std::string", "\"forward\"",
           "the forward function to rewrite">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def Autodiff : Pass<"tessel-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: add @train_step returning the loss and every gradient";
  let description = [{
    Clones the forward function into `@train_step`, which returns the loss followed by one
    gradient per trainable `tessel.param` (not `state`), in parameter order, each result
    tagged `{tessel.grad = "<parameter name>"}`:

    1. Mark the ops that lie on a path from a trainable parameter to the loss.
    2. Seed the loss gradient with `tessel.constant 1.0`.
    3. Visit the marked ops last to first; each builds its vector-Jacobian product through
       `VJPOpInterface`; gradients reaching the same value are summed with `tessel.add`
       (so a tied weight, e.g. the embedding reused as the LM head, gets the sum of both uses).
    4. A marked op without a VJP rule is an error at that op's location.
    5. A parameter the loss does not depend on gets an explicit `tessel.constant 0.0`
       gradient and a remark at its declaration.

    The forward function is kept, unchanged, for evaluation and sampling.

    Stage: once: no `@train_step` yet, and `@forward` not fused (`tessel.fused` has no VJP
    rule).
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", "\"forward\"",
           "the function to differentiate">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"",
           "the name of the function to create">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def Optimizer : Pass<"tessel-optimizer", "mlir::ModuleOp"> {
  let summary = "Append global-norm clipping and the optimizer update to @train_step";
  let description = [{
    Rewrites `@train_step` (as `tessel-autodiff` leaves it: the loss, then one result per
    gradient tagged `tessel.grad`) into a function that updates the parameters in place
    and returns the loss and the gradient norm:

    1. Add the hyper-parameters as f32 scalar arguments tagged `tessel.input`:
       AdamW: `lr`, `beta1`, `beta2`, `eps`, `weight_decay`, `step`, `max_grad_norm`;
       SGD: `lr`, `momentum`, `weight_decay`, `step`, `max_grad_norm`. A learning-rate
       schedule is therefore a runtime input and needs no recompile.
    2. `global_norm` of all gradients, `clip_coefficient` against `max_grad_norm` (infinite
       disables clipping), and every gradient multiplied by the coefficient. Every unique
       element counts once: under a plan that splits parameters (`tessel.shardings`), the
       gradients split over a set of mesh axes are normed per rank and those norms
       all-gathered over the set (`tessel.all_gather`), next to the replicated gradients
       counted as they are, so every rank computes the same norm.
    3. Per parameter, declare its optimizer state as zero-initialised `tessel.param ... state`
       (`<name>:exp_avg`, `<name>:exp_avg_sq`, or `<name>:momentum_buffer`), apply
       `tessel.adamw` / `tessel.sgd`, and `tessel.assign` the new parameter and state.
       Weight decay applies only to parameters of rank >= 2 (matrices and embeddings), not
       to LayerNorm gains or biases, the usual GPT-2 / nanoGPT no-decay rule. A parameter
       whose gradient is autodiff's explicit zero (the loss ignores it) is not updated at
       all, as PyTorch skips parameters whose gradient was never set.
    4. Return the loss and the (unclipped) gradient norm, tagged "loss" and "grad_norm".

    ZeRO-1 and ZeRO-2 (`shard-state-axis`, the plan's fsdp axis at stage 1 or 2): every
    parameter of rank >= 1 that is replicated over the axis keeps its replicated value, but
    its optimizer state is stored split on dimension 0 over the axis (`tessel.shardings`),
    and each rank updates only its block: the block of the parameter (`tessel.dynamic_slice`
    at `tessel.mesh_coordinate ... stride R`, R = rows / ranks), the block of the clipped
    gradient (sliced the same way at stage 1; at stage 2 the gradient already is the block,
    reduce-scattered by tessel-reduce-scatter-gradients), the state blocks; the updated
    blocks are all-gathered along dimension 0 into the new parameter. The norm counts each
    element once: whole (replicated) gradients as they are, gradient blocks per rank with
    those norms all-gathered over the axis. A first dimension the axis does not divide is an
    error at the parameter. Scalars keep replicated state.

    ```mlir
    %off = tessel.mesh_coordinate on @mesh grid_axes = [0] stride 16 : tensor<i32>
    %wb = tessel.dynamic_slice %w[%off] : tensor<64x8xf32> -> tensor<16x8xf32>
    %gb = tessel.dynamic_slice %g[%off] : tensor<64x8xf32> -> tensor<16x8xf32>
    %cb = tessel.mul %gb, %coef : (tensor<16x8xf32>, tensor<f32>) -> tensor<16x8xf32>
    %nw, %nm, %nv = tessel.adamw %wb, %cb, %m, %v, %lr, %b1, %b2, %eps, %wd, %step decay : tensor<16x8xf32>
    %w2 = tessel.all_gather %nw on @mesh grid_axes = [0] gather_axis = 0
        : tensor<16x8xf32> -> tensor<64x8xf32>
    ```

    Stage: once, after `tessel-autodiff`: `@train_step` exists, has no optimizer yet
    (`tessel.global_norm`, `tessel.adamw`, `tessel.sgd`; a second run would also meet its own
    hyper-parameter inputs) and is not fused. Gradients may already be reduced.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"", "adamw or sgd">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"",
           "the function to rewrite">,
    Option<"shardStateAxis", "shard-state-axis", "std::string", "\"\"",
           "ZeRO-1/2: the mesh axis the optimizer state is split over on dimension 0 (each "
           "rank updates its block; empty: state laid out like its parameter)">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def Fuse : Pass<"tessel-fuse", "mlir::func::FuncOp"> {
  let summary = "Group row-local ops into tessel.fused kernel regions";
  let description = [{
    A row-local op has results of one shape `[rows..., C]` and computes each row from the
    same row of full-shape operands, suffix-broadcast operands and scalars: the elementwise
    ops (add, sub, mul, scale, gelu, relu and their grads), the row reductions softmax,
    softmax_grad and layer_norm, and the optimizer updates adamw and sgd. Fusing them lets
    one kernel stream each row through the whole chain while it is in cache.

    1. Walk the ops in order. A row-local op joins the group of an operand's producer when
       the group has the same shape and every other operand is defined before the group's
       first op (so the group can be emitted there without creating a cycle); otherwise it
       starts a new group.
    2. Each group of two or more ops becomes a `tessel.fused` op at its first op: the
       operands from outside are its inputs, the values used outside are its results
       (yielded), and the rest stays inside the region and never reaches memory.

    GEMMs stay library calls; embedding, transposes, reductions across rows and the loss
    are not fused.

    Stage: once, last: the function has no `tessel.fused` yet.
  }];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def FuseClassifier : Pass<"tessel-fuse-classifier", "mlir::func::FuncOp"> {
  let summary = "Merge a cross_entropy and its cross_entropy_grad into tessel.fused_classifier";
  let description = [{
    After autodiff a training step computes the loss (`tessel.cross_entropy`, a kernel
    reading every row of logits for its max and sum of exponentials) and later its gradient
    (`tessel.cross_entropy_grad`, reading every row again for the same statistics). One
    `tessel.fused_classifier` computes both in one pass over the logits (llm.c's fused
    classifier):

    1. For each `cross_entropy` of the function, find the `cross_entropy_grad` ops on the
       same logits and targets in the same block; fuse only when there is exactly one.
    2. The grad's `dloss` must not depend on the loss: no op of its backward slice is the
       `cross_entropy` (autodiff's seed is the constant 1.0; a loss scaled before it is
       returned gives a scale of it). Otherwise the pair is left alone.
    3. The ops of that slice placed after the `cross_entropy` (after the first of the two
       ops, in general) must be free of memory effects; they move, in order, to right
       before it, so `dloss` is defined there.
    4. The fused op goes where the first of the two was (the `cross_entropy` in autodiff's
       output), with the cross_entropy's location; its `loss`
       replaces the cross_entropy's result everywhere and its `dlogits` the grad's result.
       Both values are computed exactly as before (the op's semantics are the two ops').

    It runs after autodiff (and the optimizer), before `tessel-fuse`.

    Stage: the function is not fused (a fused region could hold ops of the slice that step
    3 moves).
  }];
  let dependentDialects = ["::tessel::TesselDialect"];
}

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
    2. a linear layer followed by one activation (gelu, relu) and another linear layer: the
       first column-parallel, the second row-parallel;
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
    norm's input is asked for its rows (dimension 1, T) split over that axis, which seeds
    the residual stream's split.

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
           "sequence parallelism: split the layer norms' rows over this mesh axis">,
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

#endif // TESSEL_PASSES_TD
