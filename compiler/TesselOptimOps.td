//===- TesselOptimOps.td - optimizer ops of the tessel dialect -----*- tablegen -*-===//
//
// Ops that the tessel-optimizer pass creates. Hyper-parameters (learning rate, betas,
// epsilon, weight decay, momentum, step number, clipping threshold) are f32 scalar
// operands, i.e. runtime inputs of the train step, so a schedule needs no recompile. Every
// update is elementwise, so later passes can shard and fuse it like any other op. Each
// mirrors a kernel in runtime/reference/ReferenceGrad.h.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_OPTIM_OPS_TD
#define TESSEL_OPTIM_OPS_TD

def Tessel_AssignOp : Tessel_Op<"assign"> {
  let summary = "write a new value into a parameter or optimizer state";
  let description = [{
    Stores `value` as the new value of the `tessel.param` called `name` in the same
    function, whose type it must have. Every `tessel.param` read in a function sees the
    value from before the call; assignments take effect when the function returns, and each
    name is assigned at most once per function (checked by the interpreter and the lowering,
    which see all assignments at once).

    Example:

    ```mlir
    tessel.assign "blocks.0.attn.qkv.weight", %new : tensor<192x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Tessel_FloatTensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Tessel_AdamWOp : Tessel_Op<"adamw", [Pure, AllTypesMatch<["param", "grad", "exp_avg",
    "exp_avg_sq", "new_param", "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "one AdamW update of a parameter";
  let description = [{
    torch.optim.AdamW (Loshchilov & Hutter 2019), elementwise, with `t` = `step`:

    ```
    p  = p * (1 - lr * weight_decay)            (only with `decay`)
    m  = beta1 * m + (1 - beta1) * g
    v  = beta2 * v + (1 - beta2) * g^2
    p  = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    ```

    Without the `decay` flag the parameter is not decayed (LayerNorm gains and biases).
    The scalars are f32 `tensor<f32>` runtime inputs.

    Example:

    ```mlir
    %p1, %m1, %v1 = tessel.adamw %p, %g, %m, %v, %lr, %b1, %b2, %eps, %wd, %t decay
        : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$param, Tessel_FloatTensor:$grad,
                       Tessel_FloatTensor:$exp_avg, Tessel_FloatTensor:$exp_avg_sq,
                       Tessel_ScalarF32:$lr, Tessel_ScalarF32:$beta1, Tessel_ScalarF32:$beta2,
                       Tessel_ScalarF32:$eps, Tessel_ScalarF32:$weight_decay,
                       Tessel_ScalarF32:$step, UnitAttr:$decay);
  let results = (outs Tessel_FloatTensor:$new_param, Tessel_FloatTensor:$new_exp_avg,
                      Tessel_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $beta1 `,` $beta2 `,` $eps `,`
    $weight_decay `,` $step (`decay` $decay^)? attr-dict `:` type($param)
  }];
}

def Tessel_SGDOp : Tessel_Op<"sgd", [Pure, AllTypesMatch<["param", "grad", "momentum_buffer",
    "new_param", "new_momentum_buffer"]>]> {
  let summary = "one SGD-with-momentum update of a parameter";
  let description = [{
    torch.optim.SGD (dampening 0, not Nesterov), elementwise, with `t` = `step`:

    ```
    g   = g + weight_decay * p                  (only with `decay`)
    buf = t == 1 ? g : momentum * buf + g
    p   = p - lr * buf
    ```

    With `momentum` = 0 the buffer is not used: `p = p - lr * g` and the buffer is
    returned unchanged (as torch.optim.SGD, which then keeps no buffer). `step` is an f32
    scalar, exact up to 2^24.

    Example:

    ```mlir
    %p1, %b1 = tessel.sgd %p, %g, %buf, %lr, %mom, %wd, %t decay : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$param, Tessel_FloatTensor:$grad,
                       Tessel_FloatTensor:$momentum_buffer, Tessel_ScalarF32:$lr,
                       Tessel_ScalarF32:$momentum, Tessel_ScalarF32:$weight_decay,
                       Tessel_ScalarF32:$step, UnitAttr:$decay);
  let results = (outs Tessel_FloatTensor:$new_param, Tessel_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $momentum `,` $weight_decay `,` $step
    (`decay` $decay^)? attr-dict `:` type($param)
  }];
}

def Tessel_GlobalNormOp : Tessel_Op<"global_norm", [Pure]> {
  let summary = "the L2 norm of all gradients together";
  let description = [{
    `sqrt(sum over every element of every input of x^2)`, an f32 scalar
    (torch.nn.utils.clip_grad_norm_'s total norm with norm_type 2).

    Example:

    ```mlir
    %norm = tessel.global_norm %g0, %g1 : tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tessel_FloatTensor>:$inputs);
  let results = (outs Tessel_ScalarF32:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

def Tessel_ClipCoefficientOp : Tessel_Op<"clip_coefficient", [Pure]> {
  let summary = "the factor global-norm clipping scales gradients by";
  let description = [{
    `min(1, max_norm / (norm + 1e-6))`, as torch.nn.utils.clip_grad_norm_. Pass an infinite
    `max_norm` to disable clipping (the coefficient is then exactly 1).

    Example:

    ```mlir
    %c = tessel.clip_coefficient %norm, %max_norm : tensor<f32>
    ```
  }];
  let arguments = (ins Tessel_ScalarF32:$norm, Tessel_ScalarF32:$max_norm);
  let results = (outs Tessel_ScalarF32:$result);
  let assemblyFormat = "$norm `,` $max_norm attr-dict `:` type($result)";
}

#endif // TESSEL_OPTIM_OPS_TD
