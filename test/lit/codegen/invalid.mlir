// What codegen cannot lower is an error at the op's location, in both targets, never a
// crash: an op without a kernel (attention is decomposed before codegen) and a parameter
// assigned twice in one function.
// RUN: tessel-translate --tessel-to-cpp -split-input-file -verify-diagnostics %s
// RUN: not tessel-translate --tessel-to-cuda -split-input-file %s 2>&1 | FileCheck %s

// CHECK: error: 'tessel.causal_attention' has no C++ kernel; it cannot be compiled for the CPU
func.func @attention(%qkv: tensor<1x4x24xf32>) -> tensor<1x4x8xf32> {
  // expected-error @+1 {{'tessel.causal_attention' has no C++ kernel; it cannot be compiled for the CPU}}
  %y = tessel.causal_attention %qkv heads 1 : tensor<1x4x24xf32> -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// CHECK: error: 'tessel.assign' op assigns "w" a second time
func.func @assign_twice(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %w = tessel.param "w" init zeros : tensor<4xf32>
  tessel.assign "w", %a : tensor<4xf32>
  // expected-error @+1 {{'tessel.assign' op assigns "w" a second time}}
  tessel.assign "w", %b : tensor<4xf32>
  return
}
