// What codegen cannot lower is an error at the op's location, in both targets, never a
// crash: an op without a kernel (attention is decomposed before codegen), a parameter
// assigned twice in one function, a tensor whose shape is not static (as an argument, a
// result or an op's value), and a module with no function at all.
// RUN: tessel-translate --tessel-to-cpp -split-input-file -verify-diagnostics %s
// RUN: not tessel-translate --tessel-to-cuda -split-input-file %s 2>&1 | FileCheck %s
// The CUDA target names itself, never the CPU.
// RUN: not tessel-translate --tessel-to-cuda -split-input-file %s 2>&1 | FileCheck %s --check-prefix=NOCPU
// NOCPU-NOT: for the CPU

// CHECK: error: 'tessel.causal_attention' has no CUDA kernel; it cannot be compiled for the GPU
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

// -----

// CHECK: error: @dynamic_argument takes 'tensor<?xf32>': codegen needs static shapes
// expected-error @+1 {{@dynamic_argument takes 'tensor<?xf32>': codegen needs static shapes (every buffer has a fixed size)}}
func.func @dynamic_argument(%a: tensor<?xf32>) -> tensor<?xf32> {
  return %a : tensor<?xf32>
}

// -----

// CHECK: error: @unranked_result returns 'tensor<*xf32>': codegen needs static shapes
// expected-error @+1 {{@unranked_result returns 'tensor<*xf32>': codegen needs static shapes (every buffer has a fixed size)}}
func.func @unranked_result(%a: tensor<4xf32>) -> tensor<*xf32> {
  %u = tensor.cast %a : tensor<4xf32> to tensor<*xf32>
  return %u : tensor<*xf32>
}

// -----

// CHECK: error: 'tensor.cast' makes 'tensor<?xf32>': codegen needs static shapes
func.func @dynamic_value(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tensor.cast' makes 'tensor<?xf32>': codegen needs static shapes (every buffer has a fixed size)}}
  %d = tensor.cast %a : tensor<4xf32> to tensor<?xf32>
  %s = tensor.cast %d : tensor<?xf32> to tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// CHECK: error: the module has no func.func to lower
// expected-error @+1 {{the module has no func.func to lower}}
module {
}
