// --tessel-partition gives tessel.rope and tessel.grouped_attention their local head counts
// (each rank holds whole heads: heads / P of them), and refuses a split that would cut a head.
// RUN: tessel-opt %s -split-input-file --tessel-propagate-sharding --tessel-insert-reshards \
// RUN:   --tessel-partition -verify-diagnostics | FileCheck %s

// q [2, 4, 16] split over tp = 2 (4 heads of D = 4 -> 2 per rank), k and v [2, 4, 8] split
// alike (2 kv heads -> 1 per rank).
// CHECK-LABEL: func.func @forward
// CHECK: tessel.rope %{{.*}} heads 2 theta 1.000000e+04 : tensor<2x4x8xf32>
// CHECK: tessel.rope %{{.*}} heads 1 theta 1.000000e+04 : tensor<2x4x4xf32>
// CHECK: tessel.grouped_attention %{{.*}}, %{{.*}}, %{{.*}} heads 2 kv_heads 1 : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x16xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<16x16xf32>
  %wk = tessel.param "wk" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<8x16xf32>
  %wv = tessel.param "wv" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<8x16xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<16x16xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k = tessel.matmul %x, %wk transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %v = tessel.matmul %x, %wv transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %qr = tessel.rope %q heads 4 theta 1.0e4 : tensor<2x4x16xf32>
  %kr = tessel.rope %k heads 2 theta 1.0e4 : tensor<2x4x8xf32>
  %a = tessel.grouped_attention %qr, %kr, %v heads 4 kv_heads 2 : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  %o = tessel.matmul %a, %wo transpose_rhs : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %l = tessel.reduce_mean %o [0, 1, 2] : tensor<2x4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// 3 heads of D = 4 (12 channels) split over tp = 2: 6 channels per rank would be a head and
// a half.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x12xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<12x12xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  // expected-error @+1 {{tessel-partition: the heads 3 are split over 2 ranks {-, -, tp}, which do not divide them (each rank must hold whole heads)}}
  %qr = tessel.rope %q heads 3 theta 1.0e4 : tensor<2x4x12xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<12x12xf32>
  %o = tessel.matmul %qr, %wo transpose_rhs : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  %l = tessel.reduce_mean %o [0, 1, 2] : tensor<2x4x12xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// 2 kv heads split over tp = 4 (by a plan's own shardings; tensor_parallel would replicate
// them instead): the kv heads cannot be divided.
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x16xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<32x16xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %wk = tessel.param "wk" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<16x16xf32>
  %k = tessel.matmul %x, %wk transpose_rhs : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  // expected-error @+1 {{tessel-partition: the key/value heads 2 are split over 4 ranks {-, -, tp}, which do not divide them (each rank must hold whole heads)}}
  %a = tessel.grouped_attention %q, %k, %k heads 4 kv_heads 2 : (tensor<2x4x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x32xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<16x32xf32>
  %o = tessel.matmul %a, %wo transpose_rhs : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
  %l = tessel.reduce_mean %o [0, 1, 2] : tensor<2x4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
