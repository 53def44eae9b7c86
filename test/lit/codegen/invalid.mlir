// What codegen cannot lower is an error at the op's location, in both targets, never a
// crash: an op without a kernel (an attention backward too long for the CUDA kernel), a parameter
// assigned twice in one function, a tensor whose shape is not static (as an argument, a
// result or an op's value), a module with no function at all, a parameter sharded as a
// pending sum or into blocks its shard cannot hold, collectives on two grids, and a
// collective whose grid axes are out of the grid's order.
// RUN: tessel-translate --tessel-to-cpp -split-input-file -verify-diagnostics %s
// RUN: not tessel-translate --tessel-to-cuda -split-input-file %s 2>&1 | FileCheck %s
// The CUDA target names itself, never the CPU.
// RUN: not tessel-translate --tessel-to-cuda -split-input-file %s 2>&1 | FileCheck %s --check-prefix=NOCPU
// NOCPU-NOT: for the CPU

// The CUDA attention backward keeps G * T <= 4096 row statistics in shared memory; the C++
// kernel has no such limit.
// CHECK: error: 'tessel.causal_attention_grad' has no CUDA kernel; it cannot be compiled for the GPU (the attention backward kernel keeps at most 4096 query rows of one kv head, G * T, and D <= 256; compile with decompose_attention instead)
func.func @attention(%qkv: tensor<1x4097x6xf32>, %dy: tensor<1x4097x2xf32>) -> tensor<1x4097x6xf32> {
  %d = tessel.causal_attention_grad %qkv, %dy heads 1 : (tensor<1x4097x6xf32>, tensor<1x4097x2xf32>) -> tensor<1x4097x6xf32>
  return %d : tensor<1x4097x6xf32>
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

// -----

// A parameter holds values, never a pending sum: a partial sharding on a param is refused.
// CHECK: error: 'tessel.param' op "w" is partial in its sharding; a parameter holds values, not pending sums
shard.grid @mesh_tp2(shape = 2) {tessel.axis_names = ["tp"]}
func.func @partial_param() -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.param' op "w" is partial in its sharding; a parameter holds values, not pending sums}}
  %w = tessel.param "w" init zeros {tessel.shardings = [#tessel.sharding<@mesh_tp2, [[]], partial = [0]>]} : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// A fused weight of 3 blocks whose local rows are not 3 equal blocks is refused.
// CHECK: error: 'tessel.param' op "qkv" dimension 0 of local size 4 is not 3 equal blocks
shard.grid @mesh_tp2(shape = 2) {tessel.axis_names = ["tp"]}
func.func @uneven_blocks() -> tensor<4x2xf32> {
  // expected-error @+1 {{'tessel.param' op "qkv" dimension 0 of local size 4 is not 3 equal blocks}}
  %w = tessel.param "qkv" init zeros {tessel.shardings = [#tessel.sharding<@mesh_tp2, [[0], []], blocks = [3, 1]>]} : tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

// A program runs on one mesh: collectives over two grids are refused at the second.
// CHECK: error: names grid @mesh_b, but the program already runs on @mesh_a: a program runs on one mesh
shard.grid @mesh_a(shape = 2) {tessel.axis_names = ["dp"]}
shard.grid @mesh_b(shape = 2) {tessel.axis_names = ["tp"]}
func.func @two_grids(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = tessel.all_reduce %x reduce sum on @mesh_a grid_axes = [0] : tensor<4xf32>
  // expected-error @+1 {{names grid @mesh_b, but the program already runs on @mesh_a: a program runs on one mesh}}
  %z = tessel.all_reduce %y reduce sum on @mesh_b grid_axes = [0] : tensor<4xf32>
  return %z : tensor<4xf32>
}

// -----

// The runtime's groups number ranks in mesh order, which a collective's sharding layout
// assumes: grid axes listed out of the grid's order cannot run.
// CHECK: error: 'tessel.all_gather' op grid_axes must be listed in the grid's order
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @gather_axes_out_of_order(%x: tensor<2x4xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{'tessel.all_gather' op grid_axes must be listed in the grid's order (outermost first) to run}}
  %y = tessel.all_gather %x on @mesh grid_axes = [1, 0] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}
