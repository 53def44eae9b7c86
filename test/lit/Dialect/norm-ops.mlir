// Round-trip of silu, silu_grad, rms_norm and rms_norm_grad (the Llama block's activation and
// norm): parse, print, parse the printed form, print again; the second RUN line goes through
// the generic form, which must print the same custom form.
// RUN: tessel-opt %s -split-input-file | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -mlir-print-op-generic | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x256xf32>, %[[DY:.*]]: tensor<4x32x256xf32>)
// CHECK: %[[Y:.*]] = tessel.silu %[[X]] : tensor<4x32x256xf32>
// CHECK: %[[DX:.*]] = tessel.silu_grad %[[X]], %[[DY]] : tensor<4x32x256xf32>
// CHECK: return %[[Y]], %[[DX]]
// GENERIC-LABEL: sym_name = "silu"
// GENERIC: "tessel.silu"(%{{.*}}) : (tensor<4x32x256xf32>) -> tensor<4x32x256xf32>
// GENERIC: "tessel.silu_grad"(%{{.*}}, %{{.*}}) : (tensor<4x32x256xf32>, tensor<4x32x256xf32>) -> tensor<4x32x256xf32>
func.func @silu(%x: tensor<4x32x256xf32>, %dy: tensor<4x32x256xf32>) -> (tensor<4x32x256xf32>, tensor<4x32x256xf32>) {
  %y = tessel.silu %x : tensor<4x32x256xf32>
  %dx = tessel.silu_grad %x, %dy : tensor<4x32x256xf32>
  return %y, %dx : tensor<4x32x256xf32>, tensor<4x32x256xf32>
}

// -----

// CHECK-LABEL: func.func @silu_bf16
// CHECK: tessel.silu %{{.*}} : tensor<2x8xbf16>
func.func @silu_bf16(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %y = tessel.silu %x : tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

// The default epsilon (1e-5), whether implied or written, is elided by the printer.
// CHECK-LABEL: func.func @rms_norm_default_epsilon
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[W:.*]]: tensor<64xf32>)
// CHECK: %[[Y0:.*]] = tessel.rms_norm %[[X]], %[[W]] : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
// CHECK: %[[Y1:.*]] = tessel.rms_norm %[[Y0]], %[[W]] : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
// CHECK: return %[[Y1]]
// GENERIC-LABEL: sym_name = "rms_norm_default_epsilon"
// GENERIC: "tessel.rms_norm"(%{{.*}}, %{{.*}}) <{epsilon = 1.000000e-05 : f64}>
func.func @rms_norm_default_epsilon(%x: tensor<4x32x64xf32>, %w: tensor<64xf32>) -> tensor<4x32x64xf32> {
  %y0 = tessel.rms_norm %x, %w : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  %y1 = tessel.rms_norm %y0, %w {epsilon = 1.000000e-05 : f64} : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  return %y1 : tensor<4x32x64xf32>
}

// -----

// A non-default epsilon is kept; the gradient op returns dx and dweight.
// CHECK-LABEL: func.func @rms_norm_grad
// CHECK: %[[Y:.*]] = tessel.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
// CHECK: %[[DX:.*]], %[[DW:.*]] = tessel.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<8x64xbf16>, tensor<64xbf16>, tensor<8x64xbf16>) -> (tensor<8x64xbf16>, tensor<64xbf16>)
// CHECK: return %[[Y]], %[[DX]], %[[DW]]
func.func @rms_norm_grad(%x: tensor<8x64xbf16>, %w: tensor<64xbf16>, %dy: tensor<8x64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<64xbf16>) {
  %y = tessel.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-6 : f64} : (tensor<8x64xbf16>, tensor<64xbf16>, tensor<8x64xbf16>) -> (tensor<8x64xbf16>, tensor<64xbf16>)
  return %y, %dx, %dw : tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<64xbf16>
}
