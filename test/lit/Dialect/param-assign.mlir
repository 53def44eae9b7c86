// The function-wide rules of tessel.param and tessel.assign (compiler/ParamTable.h): names
// are unique per function and every assignment targets a parameter of its function with the
// value's type, wherever in the function the ops stand (one walk per function checks them,
// led by the first op of each kind, so each case also puts ops before, between and after
// the leader).
// RUN: tessel-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Valid: parameters after other ops, an assignment before its parameter is declared, and the
// same names in two functions (uniqueness is per function).
// CHECK-LABEL: func.func @scattered
// CHECK: tessel.assign "w", %[[V:.*]] : tensor<4xf32>
// CHECK: tessel.param "w"
func.func @scattered(%x: tensor<4xf32>) {
  %a = tessel.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = tessel.param "b" init zeros : tensor<4xf32>
  tessel.assign "w", %a : tensor<4xf32>
  %c = tessel.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  tessel.assign "b", %c : tensor<4xf32>
  %w = tessel.param "w" init ones : tensor<4xf32>
  return
}
// CHECK-LABEL: func.func @same_names
func.func @same_names() {
  %b = tessel.param "b" init zeros : tensor<4xf32>
  %w = tessel.param "w" init ones : tensor<4xf32>
  tessel.assign "w", %b : tensor<4xf32>
  return
}

// -----

func.func @duplicate_after_other_ops(%x: tensor<4xf32>) {
  %a = tessel.param "a" init zeros : tensor<4xf32>
  // expected-note @+1 {{first declared here}}
  %b = tessel.param "b" init zeros : tensor<4xf32>
  %s = tessel.add %x, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tessel.param "c" init zeros : tensor<4xf32>
  // expected-error @+1 {{parameter name "b" is already used}}
  %d = tessel.param "b" init ones : tensor<4xf32>
  return
}

// -----

// The leader is not the first op of the function.
func.func @duplicate_of_a_late_leader(%x: tensor<4xf32>) {
  %s = tessel.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-note @+1 {{first declared here}}
  %a = tessel.param "a" init zeros : tensor<4xf32>
  // expected-error @+1 {{parameter name "a" is already used}}
  %b = tessel.param "a" init zeros : tensor<4xf32>
  return
}

// -----

func.func @assign_unknown_name(%x: tensor<4xf32>) {
  %w = tessel.param "w" init ones : tensor<4xf32>
  tessel.assign "w", %x : tensor<4xf32>
  %s = tessel.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{assigns "blocks.0.mlp.fc.weight", which no tessel.param in the function declares}}
  tessel.assign "blocks.0.mlp.fc.weight", %s : tensor<4xf32>
  return
}

// -----

// A parameter of another function is not a target.
func.func @declares() {
  %w = tessel.param "w" init ones : tensor<4xf32>
  return
}
func.func @assigns_elsewhere(%x: tensor<4xf32>) {
  // expected-error @+1 {{assigns "w", which no tessel.param in the function declares}}
  tessel.assign "w", %x : tensor<4xf32>
  return
}

// -----

func.func @assign_wrong_type(%x: tensor<4xf32>, %y: tensor<8xf32>) {
  %w = tessel.param "w" init ones : tensor<4xf32>
  %v = tessel.param "v" init ones : tensor<4xf32>
  tessel.assign "w", %x : tensor<4xf32>
  // expected-error @+1 {{value type 'tensor<8xf32>' differs from "v"'s type 'tensor<4xf32>'}}
  tessel.assign "v", %y : tensor<8xf32>
  return
}
