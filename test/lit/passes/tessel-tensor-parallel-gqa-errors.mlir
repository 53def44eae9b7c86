// --tessel-tensor-parallel refuses a grouped-query attention whose heads it cannot split:
// the error is at the attention (the model's line) and names NH, NKV and tp, with a note at
// the plan's tensor_parallel call (`site`).
// RUN: not tessel-opt %s -split-input-file -tessel-tensor-parallel='site=plan.cpp:12:7' 2>&1 | FileCheck %s

// CHECK: llama.cpp:30:9: error: tensor_parallel("tp") over tp=4 cannot split this grouped-query attention with 6 query heads and 2 key/value heads: tp=4 must divide the 6 query heads
// CHECK: plan.cpp:12:7: note: the plan's tensor_parallel
// CHECK: llama.cpp:30:9: error: tensor_parallel("tp") over tp=2 cannot split this grouped-query attention with 6 query heads and 3 key/value heads: tp=2 must divide the 3 key/value heads or be a multiple of them (then each rank uses one kv head)
// CHECK: plan.cpp:12:7: note: the plan's tensor_parallel
// CHECK: llama.cpp:30:9: error: tensor_parallel("tp") over tp=4 cannot split this grouped-query attention with 12 query heads and 3 key/value heads: tp=4 must divide the 3 key/value heads or be a multiple of them

// NH = 6 is not divisible by tp = 4.
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x12xf32> {tessel.input = "x"}) -> (tensor<2x4x12xf32> {tessel.output = "y"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64} : tensor<12x12xf32>
  %wk = tessel.param "wk" {std = 0.02 : f64} : tensor<4x12xf32>
  %wv = tessel.param "wv" {std = 0.02 : f64} : tensor<4x12xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64} : tensor<12x12xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  %k = tessel.matmul %x, %wk transpose_rhs : (tensor<2x4x12xf32>, tensor<4x12xf32>) -> tensor<2x4x4xf32>
  %v = tessel.matmul %x, %wv transpose_rhs : (tensor<2x4x12xf32>, tensor<4x12xf32>) -> tensor<2x4x4xf32>
  %a = tessel.grouped_attention %q, %k, %v heads 6 kv_heads 2 : (tensor<2x4x12xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x12xf32> loc("llama.cpp":30:9)
  %o = tessel.matmul %a, %wo transpose_rhs : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  return %o : tensor<2x4x12xf32>
}

// -----

// NKV = 3 over tp = 2: 2 does not divide 3 and is no multiple of it (NH = 6 is divisible).
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x12xf32> {tessel.input = "x"}) -> (tensor<2x4x12xf32> {tessel.output = "y"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64} : tensor<12x12xf32>
  %wk = tessel.param "wk" {std = 0.02 : f64} : tensor<6x12xf32>
  %wv = tessel.param "wv" {std = 0.02 : f64} : tensor<6x12xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64} : tensor<12x12xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  %k = tessel.matmul %x, %wk transpose_rhs : (tensor<2x4x12xf32>, tensor<6x12xf32>) -> tensor<2x4x6xf32>
  %v = tessel.matmul %x, %wv transpose_rhs : (tensor<2x4x12xf32>, tensor<6x12xf32>) -> tensor<2x4x6xf32>
  %qr = tessel.rope %q heads 6 theta 1.0e4 : tensor<2x4x12xf32>
  %a = tessel.grouped_attention %qr, %k, %v heads 6 kv_heads 3 : (tensor<2x4x12xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x12xf32> loc("llama.cpp":30:9)
  %o = tessel.matmul %a, %wo transpose_rhs : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  return %o : tensor<2x4x12xf32>
}

// -----

// NH = 12 is divisible by tp = 4, but NKV = 3 neither is nor divides 4.
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x24xf32> {tessel.input = "x"}) -> (tensor<2x4x24xf32> {tessel.output = "y"}) {
  %wq = tessel.param "wq" {std = 0.02 : f64} : tensor<24x24xf32>
  %wk = tessel.param "wk" {std = 0.02 : f64} : tensor<6x24xf32>
  %wv = tessel.param "wv" {std = 0.02 : f64} : tensor<6x24xf32>
  %wo = tessel.param "wo" {std = 0.02 : f64} : tensor<24x24xf32>
  %q = tessel.matmul %x, %wq transpose_rhs : (tensor<2x4x24xf32>, tensor<24x24xf32>) -> tensor<2x4x24xf32>
  %k = tessel.matmul %x, %wk transpose_rhs : (tensor<2x4x24xf32>, tensor<6x24xf32>) -> tensor<2x4x6xf32>
  %v = tessel.matmul %x, %wv transpose_rhs : (tensor<2x4x24xf32>, tensor<6x24xf32>) -> tensor<2x4x6xf32>
  %a = tessel.grouped_attention %q, %k, %v heads 12 kv_heads 3 : (tensor<2x4x24xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x24xf32> loc("llama.cpp":30:9)
  %o = tessel.matmul %a, %wo transpose_rhs : (tensor<2x4x24xf32>, tensor<24x24xf32>) -> tensor<2x4x24xf32>
  return %o : tensor<2x4x24xf32>
}
