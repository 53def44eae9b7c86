// Round-trip of the attention ops (compiler/TesselAttentionOps.td): rope, with and without
// inverse, and grouped_attention. Parse, print, parse the printed form; the second RUN line
// goes through the generic form and must print the same custom form.
// RUN: tessel-opt %s -split-input-file | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -mlir-print-op-generic | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @rope
// CHECK: %[[Y:.*]] = tessel.rope %{{.*}} heads 4 theta 1.000000e+04 : tensor<2x8x64xf32>
// CHECK: tessel.rope %[[Y]] heads 4 theta 5.000000e+05 inverse : tensor<2x8x64xf32>
// GENERIC-LABEL: sym_name = "rope"
// GENERIC: "tessel.rope"(%{{.*}}) <{num_heads = 4 : i64, theta = 1.000000e+04 : f64}> : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
// GENERIC: "tessel.rope"(%{{.*}}) <{inverse, num_heads = 4 : i64, theta = 5.000000e+05 : f64}>
func.func @rope(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %y = tessel.rope %x heads 4 theta 1.0e4 : tensor<2x8x64xf32>
  %z = tessel.rope %y heads 4 theta 5.0e5 inverse : tensor<2x8x64xf32>
  return %z : tensor<2x8x64xf32>
}

// -----

// bf16 is accepted like every float op.
// CHECK-LABEL: func.func @rope_bf16
// CHECK: tessel.rope %{{.*}} heads 1 theta 1.000000e+04 : tensor<1x4x8xbf16>
func.func @rope_bf16(%x: tensor<1x4x8xbf16>) -> tensor<1x4x8xbf16> {
  %y = tessel.rope %x heads 1 theta 1.0e4 : tensor<1x4x8xbf16>
  return %y : tensor<1x4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @grouped_attention
// CHECK: tessel.grouped_attention %{{.*}}, %{{.*}}, %{{.*}} heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
// GENERIC-LABEL: sym_name = "grouped_attention"
// GENERIC: "tessel.grouped_attention"(%{{.*}}, %{{.*}}, %{{.*}}) <{num_heads = 4 : i64, num_kv_heads = 2 : i64}>
func.func @grouped_attention(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x32xf32>) -> tensor<2x8x64xf32> {
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}
