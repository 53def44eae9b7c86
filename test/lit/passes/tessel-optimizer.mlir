// --tessel-optimizer (passes/Optimizer.cpp) on @train_step as tessel-autodiff leaves it:
// the hyper-parameters become trailing f32 scalar arguments tagged tessel.input; the
// gradients are clipped by their global norm; each parameter gets zero-initialised state
// params, one tessel.adamw / tessel.sgd (with `decay` only for rank >= 2) and a
// tessel.assign per updated value; the function returns (loss, grad_norm).
// The same input runs with both optimizers (ADAMW and SGD prefixes; CHECK is shared).
// RUN: tessel-opt %s -split-input-file -tessel-optimizer -verify-diagnostics | FileCheck %s --check-prefixes=CHECK,ADAMW
// RUN: tessel-opt %s -split-input-file -tessel-optimizer=optimizer=sgd -verify-diagnostics | FileCheck %s --check-prefixes=CHECK,SGD
// RUN: not tessel-opt %s -split-input-file -tessel-optimizer=optimizer=adam 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// UNKNOWN: error: tessel-optimizer: unknown optimizer 'adam' (expected adamw or sgd)

// Parameters of rank 2 and 3 decay; rank 1 and 0 (biases, gains, scalars) do not. The
// state params follow the last parameter, in gradient order.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32> {tessel.input = "x"},
// ADAMW-SAME: %[[LR:[^:]*]]: tensor<f32> {tessel.input = "lr"}, %[[B1:[^:]*]]: tensor<f32> {tessel.input = "beta1"}, %[[B2:[^:]*]]: tensor<f32> {tessel.input = "beta2"}, %[[EPS:[^:]*]]: tensor<f32> {tessel.input = "eps"}, %[[WD:[^:]*]]: tensor<f32> {tessel.input = "weight_decay"}, %[[STEP:[^:]*]]: tensor<f32> {tessel.input = "step"}, %[[MAX:[^:]*]]: tensor<f32> {tessel.input = "max_grad_norm"})
// SGD-SAME: %[[LR:[^:]*]]: tensor<f32> {tessel.input = "lr"}, %[[MOM:[^:]*]]: tensor<f32> {tessel.input = "momentum"}, %[[WD:[^:]*]]: tensor<f32> {tessel.input = "weight_decay"}, %[[STEP:[^:]*]]: tensor<f32> {tessel.input = "step"}, %[[MAX:[^:]*]]: tensor<f32> {tessel.input = "max_grad_norm"})
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<f32> {tessel.output = "grad_norm"})
// CHECK-NEXT: %[[W:.*]] = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
// CHECK-NEXT: %[[B:.*]] = tessel.param "fc.bias" init zeros : tensor<16xf32>
// CHECK-NEXT: %[[S:.*]] = tessel.param "scale" init ones : tensor<f32>
// CHECK-NEXT: %[[P:.*]] = tessel.param "pos" {std = 1.000000e+00 : f64} : tensor<2x4x8xf32>
// ADAMW-NEXT: %[[WM:.*]] = tessel.param "fc.weight:exp_avg" state init zeros : tensor<16x8xf32>
// ADAMW-NEXT: %[[WV:.*]] = tessel.param "fc.weight:exp_avg_sq" state init zeros : tensor<16x8xf32>
// ADAMW-NEXT: %[[BM:.*]] = tessel.param "fc.bias:exp_avg" state init zeros : tensor<16xf32>
// ADAMW-NEXT: %[[BV:.*]] = tessel.param "fc.bias:exp_avg_sq" state init zeros : tensor<16xf32>
// ADAMW-NEXT: %[[SM:.*]] = tessel.param "scale:exp_avg" state init zeros : tensor<f32>
// ADAMW-NEXT: %[[SV:.*]] = tessel.param "scale:exp_avg_sq" state init zeros : tensor<f32>
// ADAMW-NEXT: %[[PM:.*]] = tessel.param "pos:exp_avg" state init zeros : tensor<2x4x8xf32>
// ADAMW-NEXT: %[[PV:.*]] = tessel.param "pos:exp_avg_sq" state init zeros : tensor<2x4x8xf32>
// SGD-NEXT: %[[WBUF:.*]] = tessel.param "fc.weight:momentum_buffer" state init zeros : tensor<16x8xf32>
// SGD-NEXT: %[[BBUF:.*]] = tessel.param "fc.bias:momentum_buffer" state init zeros : tensor<16xf32>
// SGD-NEXT: %[[SBUF:.*]] = tessel.param "scale:momentum_buffer" state init zeros : tensor<f32>
// SGD-NEXT: %[[PBUF:.*]] = tessel.param "pos:momentum_buffer" state init zeros : tensor<2x4x8xf32>
// CHECK-NEXT: %[[L:.*]] = tessel.reduce_sum %[[X]]
// CHECK-NEXT: %[[GW:.*]] = tessel.constant 2.000000e+00 : tensor<16x8xf32>
// CHECK-NEXT: %[[GB:.*]] = tessel.constant 3.000000e+00 : tensor<16xf32>
// CHECK-NEXT: %[[GS:.*]] = tessel.constant 4.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[GP:.*]] = tessel.constant 5.000000e+00 : tensor<2x4x8xf32>
// CHECK-NEXT: %[[NORM:.*]] = tessel.global_norm %[[GW]], %[[GB]], %[[GS]], %[[GP]] : tensor<16x8xf32>, tensor<16xf32>, tensor<f32>, tensor<2x4x8xf32>
// CHECK-NEXT: %[[COEF:.*]] = tessel.clip_coefficient %[[NORM]], %[[MAX]] : tensor<f32>
// CHECK-NEXT: %[[CW:.*]] = tessel.mul %[[GW]], %[[COEF]] : (tensor<16x8xf32>, tensor<f32>) -> tensor<16x8xf32>
// ADAMW-NEXT: %[[NW:.*]], %[[NWM:.*]], %[[NWV:.*]] = tessel.adamw %[[W]], %[[CW]], %[[WM]], %[[WV]], %[[LR]], %[[B1]], %[[B2]], %[[EPS]], %[[WD]], %[[STEP]] decay : tensor<16x8xf32>
// ADAMW-NEXT: tessel.assign "fc.weight", %[[NW]] : tensor<16x8xf32>
// ADAMW-NEXT: tessel.assign "fc.weight:exp_avg", %[[NWM]] : tensor<16x8xf32>
// ADAMW-NEXT: tessel.assign "fc.weight:exp_avg_sq", %[[NWV]] : tensor<16x8xf32>
// SGD-NEXT: %[[NW:.*]], %[[NWBUF:.*]] = tessel.sgd %[[W]], %[[CW]], %[[WBUF]], %[[LR]], %[[MOM]], %[[WD]], %[[STEP]] decay : tensor<16x8xf32>
// SGD-NEXT: tessel.assign "fc.weight", %[[NW]] : tensor<16x8xf32>
// SGD-NEXT: tessel.assign "fc.weight:momentum_buffer", %[[NWBUF]] : tensor<16x8xf32>
// CHECK-NEXT: %[[CB:.*]] = tessel.mul %[[GB]], %[[COEF]] : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
// ADAMW-NEXT: %[[NB:.*]], %[[NBM:.*]], %[[NBV:.*]] = tessel.adamw %[[B]], %[[CB]], %[[BM]], %[[BV]], %[[LR]], %[[B1]], %[[B2]], %[[EPS]], %[[WD]], %[[STEP]] : tensor<16xf32>
// ADAMW-NEXT: tessel.assign "fc.bias", %[[NB]] : tensor<16xf32>
// ADAMW-NEXT: tessel.assign "fc.bias:exp_avg", %[[NBM]] : tensor<16xf32>
// ADAMW-NEXT: tessel.assign "fc.bias:exp_avg_sq", %[[NBV]] : tensor<16xf32>
// SGD-NEXT: %[[NB:.*]], %[[NBBUF:.*]] = tessel.sgd %[[B]], %[[CB]], %[[BBUF]], %[[LR]], %[[MOM]], %[[WD]], %[[STEP]] : tensor<16xf32>
// SGD-NEXT: tessel.assign "fc.bias", %[[NB]] : tensor<16xf32>
// SGD-NEXT: tessel.assign "fc.bias:momentum_buffer", %[[NBBUF]] : tensor<16xf32>
// CHECK-NEXT: %[[CS:.*]] = tessel.mul %[[GS]], %[[COEF]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// ADAMW-NEXT: tessel.adamw %[[S]], %[[CS]], %[[SM]], %[[SV]], %[[LR]], %[[B1]], %[[B2]], %[[EPS]], %[[WD]], %[[STEP]] : tensor<f32>
// ADAMW-COUNT-3: tessel.assign "scale
// SGD-NEXT: tessel.sgd %[[S]], %[[CS]], %[[SBUF]], %[[LR]], %[[MOM]], %[[WD]], %[[STEP]] : tensor<f32>
// SGD-COUNT-2: tessel.assign "scale
// CHECK-NEXT: %[[CP:.*]] = tessel.mul %[[GP]], %[[COEF]] : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
// ADAMW-NEXT: tessel.adamw %[[P]], %[[CP]], %[[PM]], %[[PV]], %[[LR]], %[[B1]], %[[B2]], %[[EPS]], %[[WD]], %[[STEP]] decay : tensor<2x4x8xf32>
// ADAMW-COUNT-3: tessel.assign "pos
// SGD-NEXT: tessel.sgd %[[P]], %[[CP]], %[[PBUF]], %[[LR]], %[[MOM]], %[[WD]], %[[STEP]] decay : tensor<2x4x8xf32>
// SGD-COUNT-2: tessel.assign "pos
// CHECK-NEXT: return %[[L]], %[[NORM]] : tensor<f32>, tensor<f32>
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"},
        tensor<16xf32> {tessel.grad = "fc.bias"}, tensor<f32> {tessel.grad = "scale"},
        tensor<2x4x8xf32> {tessel.grad = "pos"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %s = tessel.param "scale" init ones : tensor<f32>
  %p = tessel.param "pos" {std = 1.0 : f64} : tensor<2x4x8xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<16x8xf32>
  %gb = tessel.constant 3.0 : tensor<16xf32>
  %gs = tessel.constant 4.0 : tensor<f32>
  %gp = tessel.constant 5.0 : tensor<2x4x8xf32>
  return %l, %gw, %gb, %gs, %gp : tensor<f32>, tensor<16x8xf32>, tensor<16xf32>, tensor<f32>, tensor<2x4x8xf32>
}

// -----

// A parameter the loss ignores (autodiff's explicit zero gradient, tessel.constant 0.0) is
// left exactly as it is, as torch.optim skips a parameter whose .grad is None: no state
// params, no update (so no weight decay either, though its rank 2 would decay), no assign.
// Its zero still goes into the global norm, where it adds nothing.
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[W:.*]] = tessel.param "fc.weight"
// CHECK-NEXT: %[[AUX:.*]] = tessel.param "aux.weight"
// ADAMW-NEXT: tessel.param "fc.weight:exp_avg" state
// ADAMW-NEXT: tessel.param "fc.weight:exp_avg_sq" state
// SGD-NEXT: tessel.param "fc.weight:momentum_buffer" state
// CHECK-NOT: "aux.weight:
// CHECK: %[[GW:.*]] = tessel.constant 2.000000e+00 : tensor<16x8xf32>
// CHECK-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<4x8xf32>
// CHECK-NEXT: %[[NORM:.*]] = tessel.global_norm %[[GW]], %[[Z]]
// CHECK-NOT: %[[AUX]]
// CHECK-NOT: "aux.weight
// ADAMW: tessel.adamw %[[W]]
// SGD: tessel.sgd %[[W]]
// CHECK-NOT: %[[AUX]]
// CHECK-NOT: "aux.weight
// CHECK: return
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"},
        tensor<4x8xf32> {tessel.grad = "aux.weight"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %aux = tessel.param "aux.weight" {std = 2.000000e-02 : f64} : tensor<4x8xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<16x8xf32>
  %gaux = tessel.constant 0.0 : tensor<4x8xf32>
  return %l, %gw, %gaux : tensor<f32>, tensor<16x8xf32>, tensor<4x8xf32>
}

// -----

// Gradients are matched to parameters by their tessel.grad name, not by position; the
// loss need not come first; @forward and other functions are left alone; a parameter
// without a gradient result (here: optimizer state from before) gets no update.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: tessel.global_norm
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<f32> {tessel.output = "grad_norm"})
// CHECK-NEXT: %[[A:.*]] = tessel.param "a"
// CHECK-NEXT: %[[B:.*]] = tessel.param "b"
// CHECK-NEXT: tessel.param "a:old" state
// ADAMW-NEXT: tessel.param "b:exp_avg" state
// ADAMW-NEXT: tessel.param "b:exp_avg_sq" state
// ADAMW-NEXT: tessel.param "a:exp_avg" state
// ADAMW-NEXT: tessel.param "a:exp_avg_sq" state
// SGD-NEXT: tessel.param "b:momentum_buffer" state
// SGD-NEXT: tessel.param "a:momentum_buffer" state
// CHECK-NEXT: %[[GA:.*]] = tessel.constant 1.000000e+00 : tensor<3xf32>
// CHECK-NEXT: %[[GB:.*]] = tessel.constant 2.000000e+00 : tensor<5xf32>
// CHECK-NEXT: %[[L:.*]] = tessel.constant 3.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[NORM:.*]] = tessel.global_norm %[[GB]], %[[GA]] : tensor<5xf32>, tensor<3xf32>
// CHECK: tessel.mul %[[GB]]
// ADAMW-NEXT: tessel.adamw %[[B]]
// SGD-NEXT: tessel.sgd %[[B]]
// CHECK: tessel.mul %[[GA]]
// ADAMW-NEXT: tessel.adamw %[[A]]
// SGD-NEXT: tessel.sgd %[[A]]
// CHECK-NOT: tessel.assign "a:old"
// CHECK: return %[[L]], %[[NORM]]
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %l = tessel.constant 3.0 : tensor<f32>
  return %l : tensor<f32>
}
func.func @train_step() -> (tensor<5xf32> {tessel.grad = "b"}, tensor<3xf32> {tessel.grad = "a"}, tensor<f32> {tessel.output = "loss"}) {
  %a = tessel.param "a" {std = 1.0 : f64} : tensor<3xf32>
  %b = tessel.param "b" {std = 1.0 : f64} : tensor<5xf32>
  %old = tessel.param "a:old" state init zeros : tensor<3xf32>
  %ga = tessel.constant 1.0 : tensor<3xf32>
  %gb = tessel.constant 2.0 : tensor<5xf32>
  %l = tessel.constant 3.0 : tensor<f32>
  return %gb, %ga, %l : tensor<5xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// Errors (the same with either optimizer).
// expected-error @+1 {{tessel-optimizer: there is no @train_step (run tessel-autodiff first); it runs once, after tessel-autodiff (and any gradient all-reduce) and before tessel-fuse}}
module {
  func.func @forward() {
    return
  }
}

// -----

// expected-error @+1 {{result #1 is the gradient of 'w', which is not a tessel.param of @train_step}}
func.func @train_step() -> (tensor<f32> {tessel.output = "loss"}, tensor<3xf32> {tessel.grad = "w"}) {
  %v = tessel.param "v" {std = 1.0 : f64} : tensor<3xf32>
  %l = tessel.constant 1.0 : tensor<f32>
  %g = tessel.constant 1.0 : tensor<3xf32>
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// -----

// expected-error @+1 {{@train_step returns no loss}}
func.func @train_step() -> (tensor<3xf32> {tessel.grad = "v"}) {
  %v = tessel.param "v" {std = 1.0 : f64} : tensor<3xf32>
  %g = tessel.constant 1.0 : tensor<3xf32>
  return %g : tensor<3xf32>
}

// -----

// Wrong stage: run twice. The step already has the optimizer (and its hyper-parameter
// inputs, which a second run would have taken for model inputs named like them).
// expected-error @+1 {{tessel-optimizer: @train_step already updates the parameters (tessel.global_norm, tessel.adamw or tessel.sgd present); it runs once, after tessel-autodiff (and any gradient all-reduce) and before tessel-fuse}}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"}, %lr: tensor<f32> {tessel.input = "lr"},
    %mom: tensor<f32> {tessel.input = "momentum"}, %wd: tensor<f32> {tessel.input = "weight_decay"},
    %t: tensor<f32> {tessel.input = "step"}, %max: tensor<f32> {tessel.input = "max_grad_norm"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<f32> {tessel.output = "grad_norm"}) {
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %buf = tessel.param "fc.bias:momentum_buffer" state init zeros : tensor<16xf32>
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  %n = tessel.global_norm %g : tensor<16xf32>
  %c = tessel.clip_coefficient %n, %max : tensor<f32>
  %gc = tessel.mul %g, %c : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %p1, %b1 = tessel.sgd %b, %gc, %buf, %lr, %mom, %wd, %t : tensor<16xf32>
  tessel.assign "fc.bias", %p1 : tensor<16xf32>
  tessel.assign "fc.bias:momentum_buffer", %b1 : tensor<16xf32>
  return %l, %n : tensor<f32>, tensor<f32>
}

// -----

// A sharded parameter's state is laid out like it (each rank updates its own shard): the
// state params copy its tessel.shardings; an unsharded parameter's state has none.
// CHECK-LABEL: func.func @train_step
// CHECK: tessel.param "w" {std = 1.000000e+00 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]}
// ADAMW: tessel.param "w:exp_avg" state init zeros {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]}
// ADAMW-NEXT: tessel.param "w:exp_avg_sq" state init zeros {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]}
// ADAMW-NEXT: tessel.param "c:exp_avg" state init zeros : tensor<3xf32>
// SGD: tessel.param "w:momentum_buffer" state init zeros {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]}
// SGD-NEXT: tessel.param "c:momentum_buffer" state init zeros : tensor<3xf32>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %l = tessel.constant 3.0 : tensor<f32>
  return %l : tensor<f32>
}
func.func @train_step() -> (tensor<2x4xf32> {tessel.grad = "w"}, tensor<3xf32> {tessel.grad = "c"}, tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 1.0 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<2x4xf32>
  %c = tessel.param "c" {std = 1.0 : f64} : tensor<3xf32>
  %gw = tessel.constant 1.0 : tensor<2x4xf32>
  %gc = tessel.constant 2.0 : tensor<3xf32>
  %l = tessel.constant 3.0 : tensor<f32>
  return %gw, %gc, %l : tensor<2x4xf32>, tensor<3xf32>, tensor<f32>
}
