// tessel.dynamic_slice (compiler/TesselSliceOps.td): the first RUN line round-trips a block of
// rows at a mesh coordinate (ZeRO-1/2's block of a replicated parameter); the following splits
// check that the verifier rejects a result that is not a block of the input's rows.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics | tessel-opt -split-input-file | FileCheck %s

shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["dp", "fsdp"]}
// CHECK-LABEL: func.func @block
// CHECK: %[[C:.*]] = tessel.mesh_coordinate on @mesh grid_axes = [1] stride 16 : tensor<i32>
// CHECK: tessel.dynamic_slice %{{.*}}[%[[C]]] : tensor<64x8xf32> -> tensor<16x8xf32>
// CHECK: tessel.dynamic_slice %{{.*}}[%[[C]]] : tensor<64xbf16> -> tensor<16xbf16>
func.func @block(%w: tensor<64x8xf32>, %b: tensor<64xbf16>) -> (tensor<16x8xf32>, tensor<16xbf16>) {
  %c = tessel.mesh_coordinate on @mesh grid_axes = [1] stride 16 : tensor<i32>
  %wb = tessel.dynamic_slice %w[%c] : tensor<64x8xf32> -> tensor<16x8xf32>
  %bb = tessel.dynamic_slice %b[%c] : tensor<64xbf16> -> tensor<16xbf16>
  return %wb, %bb : tensor<16x8xf32>, tensor<16xbf16>
}

// -----

func.func @other_dims(%w: tensor<64x8xf32>, %c: tensor<i32>) -> tensor<16x4xf32> {
  // expected-error @+1 {{'tessel.dynamic_slice' op result 16x4 is not a block of rows of the input 64x8 (same rank >= 1, same dimensions after the first, 1 to 64 rows)}}
  %wb = tessel.dynamic_slice %w[%c] : tensor<64x8xf32> -> tensor<16x4xf32>
  return %wb : tensor<16x4xf32>
}

// -----

func.func @too_many_rows(%w: tensor<8xf32>, %c: tensor<i32>) -> tensor<16xf32> {
  // expected-error @+1 {{is not a block of rows of the input 8 (}}
  %wb = tessel.dynamic_slice %w[%c] : tensor<8xf32> -> tensor<16xf32>
  return %wb : tensor<16xf32>
}

// -----

func.func @element_type(%w: tensor<8xf32>, %c: tensor<i32>) -> tensor<4xbf16> {
  // expected-error @+1 {{result element type 'bf16' differs from the input's 'f32'}}
  %wb = tessel.dynamic_slice %w[%c] : tensor<8xf32> -> tensor<4xbf16>
  return %wb : tensor<4xbf16>
}
