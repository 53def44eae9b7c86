// --tessel-insert-reshards (passes/InsertReshards.cpp): where an operand's sharding is not
// what its user's rule asks for, the operand is read through a tessel.reshard to that
// sharding (one per value and target, shared by its users). Here the row-parallel product's
// pending sum is resolved once before the bias add and the residual add that both need it
// replicated; the return needs its operand replicated too.
// RUN: tessel-opt %s -split-input-file -tessel-insert-reshards -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = tessel.matmul
// CHECK-NEXT: %[[R:.*]] = tessel.reshard %[[P]] : tensor<2x8xf32> from #tessel.sharding<@mesh, {{\[\[}}], []], partial = [0]> to #tessel.sharding<@mesh, {{\[\[}}], []]> {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], []]>]} -> tensor<2x8xf32>
// CHECK-NEXT: tessel.add %[[R]], %{{.*}} :
// CHECK-NEXT: tessel.add %[[R]], %{{.*}} :
// CHECK-NOT: tessel.reshard
// CHECK: return
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) {
  %wp = tessel.param "proj.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<8x8xf32>
  %bp = tessel.param "proj.b" {std = 0.02 : f64} : tensor<8xf32>
  %xs = tessel.scale %x, 1.0 {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<2x8xf32>
  %p = tessel.matmul %xs, %wp transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], []], partial = [0]>]} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %pb = tessel.add %p, %bp {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = tessel.add %p, %pb {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A pending sum returned as it is: the return asks for it replicated.
// CHECK-LABEL: func.func @forward
// CHECK: %[[S:.*]] = tessel.scale
// CHECK-NEXT: %[[R:.*]] = tessel.reshard %[[S]] : tensor<2x8xf32> from #tessel.sharding<@mesh, {{\[\[}}], []], partial = [0]> to #tessel.sharding<@mesh, {{\[\[}}], []]>
// CHECK-NEXT: return %[[R]]
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) {
  %s = tessel.scale %x, 2.0 {tessel.shardings = [#tessel.sharding<@mesh, [[], []], partial = [0]>]} : tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

// Wrong stage: nothing propagated yet.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
// expected-error @+1 {{tessel-insert-reshards: @forward has no shardings on its ops (run tessel-propagate-sharding first); it runs once, after tessel-propagate-sharding and before tessel-reshard-to-collectives}}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) {
  return %x : tensor<2x8xf32>
}
