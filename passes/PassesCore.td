//===- PassesCore.td - Tessel passes: attention, precision, autodiff, optimizer, fusion ---*- tablegen -*-===//
//
// The passes every training program runs: attention decomposition, mixed precision, autodiff,
// the optimizer and fusion.
// Included by passes/Passes.td (its header says what every description holds).
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_PASSES_CORE_TD
#define TESSEL_PASSES_CORE_TD

def DecomposeAttention : Pass<"tessel-decompose-attention", "mlir::func::FuncOp"> {
  let summary = "Rewrite causal_attention and grouped_attention into matmuls and a causal softmax";
  let description = [{
    Replaces each `tessel.causal_attention` with the primitive ops it is defined by, so
    later passes (autodiff, fusion) need rules only for primitives. The pipeline runs it
    only when asked (PipelineOptions::decomposeAttention, for programs lowered to CUDA);
    by default attention stays one op with a fused kernel and its own VJP:

    1. `split` the `[B, T, 3C]` projection along the last axis into q, k, v `[B, T, C]`.
    2. `reshape` each to `[B, T, NH, HS]` and `transpose` to `[B, NH, T, HS]`.
    3. scores = `matmul q, k transpose_rhs` (`[B, NH, T, T]`), `scale` by 1/sqrt(HS).
    4. `softmax causal`, then `matmul` with v (`[B, NH, T, HS]`).
    5. `transpose` back to `[B, T, NH, HS]` and `reshape` to `[B, T, C]`.

    Each `tessel.grouped_attention` (q `[B, T, NH*D]`, k and v `[B, T, NKV*D]`, G = NH/NKV)
    takes the same steps without the split and without repeating k and v: q goes to
    `[B, NH, T, D]` then `reshape` to `[B, NKV, G*T, D]` (query head h = g*G + j lands in
    kv group g), so one batched `matmul` per kv head scores all G query heads of its group
    (`[B, NKV, G*T, T]`); the scores `reshape` to `[B, NKV, G, T, T]` for the causal
    softmax and back, `matmul` with v gives `[B, NKV, G*T, D]`, which `reshape`s to
    `[B, NH, T, D]` and goes back to `[B, T, NH*D]` as in step 5. With G = 1 the three
    G*T reshapes are left out.

    Every new op keeps the location of the attention op it came from, so errors still
    point at the user's line.

    Stage: the function is not fused (tessel-fuse must see the scale and softmax this pass
    produces); autodiff has no rule for `causal_attention` or `grouped_attention`, so it runs before
    autodiff too.
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
    ops (add, sub, mul, scale, gelu, relu, silu and their grads), the row reductions softmax,
    softmax_grad, layer_norm and rms_norm, and the optimizer updates adamw and sgd. Fusing
    them lets one kernel stream each row through the whole chain while it is in cache.

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

def FuseGemmEpilogues : Pass<"tessel-fuse-gemm-epilogues", "mlir::func::FuncOp"> {
  let summary = "Fold a GEMM's bias, GELU, residual and bias gradient into tessel.matmul_epilogue";
  let description = [{
    Rewrites the ops around a `tessel.matmul` that the runtime's GEMM step can apply as its
    epilogue (runtime/exec/Program.h GemmEpilogue: oneDNN or a second pass on the CPU,
    cuBLASLt's epilogues on a GPU) into one `tessel.matmul_epilogue`, so the product is
    stored once instead of being re-read by the bias add, the GELU and the residual add:

    1. Backward: a weight-gradient `matmul dY^T X` (`transpose_lhs`, rank-2 f32 operands)
       and a `reduce_sum` of the same dY (through reshapes) over every dimension but the
       last, with an f32 result, become one op with `bias_gradient` (cuBLASLt's BGRADA).
    2. Forward, along the product's users: an `add` of a rank-1 `[N]` bias when it is the
       product's only user; then a `gelu` when it and `gelu_grad`s reading the value as
       their input are its only users (the value becomes the `pre_activation` result when
       a gelu_grad reads it; N a multiple of 8); otherwise an `add` of a tensor of the
       result's type that is the value's only user (the residual; not one sharing bytes
       with the matmul's operands). Every value replaced has no other user, shapes and
       element types match exactly. bf16 fuses the bias alone: the epilogue rounds to bf16
       once where separate ops round after each of them, which agree only for one add.
    3. The partial-sum rule: step 2 never fuses into a matmul whose product is a pending
       partial sum (it reaches `tessel.all_reduce`, `all_reduce_start` or `reduce_scatter`
       through add, sub, scale, reshape, transpose or cast: a row-parallel projection under
       tensor parallelism), or the bias, GELU or residual would be applied once per rank.
       Step 1 does not change the product and fuses regardless.
    4. The fused op stands where the last fused op was, with the matmul's location.

    The result is the same math as the separate ops: bitwise for the adds in f32, within
    twice the GELU error bound for the GELU (runtime/exec/GemmEpilogue.h), and up to the
    last bit of the bias gradient's f32 rounding. PipelineOptions::fuseGemmEpilogues turns
    the pipeline's stage off.

    Stage: the function is not fused (`tessel-fuse` would hide the adds and the GELU in
    fused regions).
  }];
  let dependentDialects = ["::tessel::TesselDialect"];
}

#endif // TESSEL_PASSES_CORE_TD
