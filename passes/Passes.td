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

    Autodiff differentiates the casts, so parameter gradients are f32.
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
       disables clipping), and every gradient multiplied by the coefficient.
    3. Per parameter, declare its optimizer state as zero-initialised `tessel.param ... state`
       (`<name>:exp_avg`, `<name>:exp_avg_sq`, or `<name>:momentum_buffer`), apply
       `tessel.adamw` / `tessel.sgd`, and `tessel.assign` the new parameter and state.
       Weight decay applies only to parameters of rank >= 2 (matrices and embeddings), not
       to LayerNorm gains or biases, the usual GPT-2 / nanoGPT no-decay rule. A parameter
       whose gradient is autodiff's explicit zero (the loss ignores it) is not updated at
       all, as PyTorch skips parameters whose gradient was never set.
    4. Return the loss and the (unclipped) gradient norm, tagged "loss" and "grad_norm".
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"", "adamw or sgd">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"",
           "the function to rewrite">,
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
  }];
  let dependentDialects = ["::tessel::TesselDialect"];
}

#endif // TESSEL_PASSES_TD
