// The point-to-point ops of pipeline parallelism (compiler/TesselPipelineOps.td) and the
// pipeline attributes (compiler/PipelineAttrs.h, verified in TesselDialect.cpp). The first
// RUN lines round-trip the syntax in the custom and the generic form; the last checks that
// the verifiers reject every malformed peer, grid and attribute, one case per split.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// A 2-D mesh (pp outermost, dp inside): a stage sends along pp to the next one and receives
// its gradient back; the peer is a coordinate on the one named axis.
// CHECK-LABEL: func.func @stage
// CHECK-SAME: attributes {tessel.pipeline = {axis = "pp", microbatches = 2 : i64, schedule = "1f1b", stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64}}
// CHECK-NEXT: tessel.param "w" {std = 2.000000e-02 : f64, tessel.pp_stages = array<i64: 0, 1>} : tensor<4x4xf32>
// CHECK-NEXT: tessel.send %{{.*}} to 1 on @mesh grid_axes = [0] {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 1 : i64} : tensor<4x4xf32>
// CHECK-NEXT: %{{.*}} = tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_action = "I", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 0 : i64} : tensor<4x4xf32>
// CHECK-NEXT: tessel.add {{.*}}tessel.pp_action = "W"
// GENERIC: "tessel.send"(%{{.*}}) <{grid = @mesh, grid_axes = array<i16: 0>, peer = 1 : i64}> {tessel.pp_action = "F", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 1 : i64} : (tensor<4x4xf32>) -> ()
// GENERIC: "tessel.recv"() <{grid = @mesh, grid_axes = array<i16: 0>, peer = 1 : i64}> {tessel.pp_action = "I", tessel.pp_chunk = 0 : i64, tessel.pp_group = 3 : i64, tessel.pp_microbatch = 0 : i64} : () -> tensor<4x4xf32>
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["pp", "dp"]}
func.func @stage(%x: tensor<4x4xf32>) -> tensor<4x4xf32>
    attributes {tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64, microbatches = 2 : i64, schedule = "1f1b"}} {
  %w = tessel.param "w" {std = 2.0e-02 : f64, tessel.pp_stages = array<i64: 0, 1>} : tensor<4x4xf32>
  tessel.send %x to 1 on @mesh grid_axes = [0] {tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 1 : i64, tessel.pp_action = "F", tessel.pp_group = 3 : i64} : tensor<4x4xf32>
  %g = tessel.recv from 1 on @mesh grid_axes = [0] {tessel.pp_chunk = 0 : i64, tessel.pp_microbatch = 0 : i64, tessel.pp_action = "I", tessel.pp_group = 3 : i64} : tensor<4x4xf32>
  %s = tessel.add %g, %w {tessel.pp_action = "W"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %s : tensor<4x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @peer_out_of_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tessel.send' op peer 2 is outside the pipeline axis of 2 stages}}
  tessel.send %x to 2 on @mesh grid_axes = [0] : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 4) {tessel.axis_names = ["pp"]}
func.func @peer_negative() -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.recv' op peer -1 is outside the pipeline axis of 4 stages}}
  %y = tessel.recv from -1 on @mesh grid_axes = [0] : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["pp", "dp"]}
func.func @two_axes(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tessel.send' op names 2 grid axes; a pipeline transfer runs along exactly one (the pipeline axis)}}
  tessel.send %x to 1 on @mesh grid_axes = [0, 1] : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["pp", "dp"]}
func.func @peer_on_the_other_axis() -> tensor<4xf32> {
  // The peer is a coordinate of the named axis (dp has 2), not of the mesh (4 ranks).
  // expected-error @+1 {{'tessel.recv' op peer 3 is outside the pipeline axis of 2 stages}}
  %y = tessel.recv from 3 on @mesh grid_axes = [1] : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @missing_grid(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tessel.send' op grid @mesh is not a symbol of the module}}
  tessel.send %x to 1 on @mesh grid_axes = [0] : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @unnamed_axes() -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.recv' op grid @mesh has no tessel.axis_names: the runtime needs a name for each axis}}
  %y = tessel.recv from 1 on @mesh grid_axes = [0] : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["pp"]}
func.func @integer_payload(%x: tensor<4xi32>) {
  // Only floating-point tensors cross stages (activations and their gradients).
  // expected-error @+1 {{'tessel.send' op operand #0 must be}}
  tessel.send %x to 1 on @mesh grid_axes = [0] : tensor<4xi32>
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' needs i64 stage, stages and virtual_stages with 0 <= stage < stages and virtual_stages >= 1, got {axis = "pp", stage = 2 : i64, stages = 2 : i64, virtual_stages = 1 : i64}}}
func.func @stage_outside() attributes {tessel.pipeline = {axis = "pp", stage = 2 : i64, stages = 2 : i64, virtual_stages = 1 : i64}} {
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' needs i64 stage, stages and virtual_stages with 0 <= stage < stages and virtual_stages >= 1}}
func.func @no_virtual_stages() attributes {tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64}} {
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' needs the pipeline axis's name, axis}}
func.func @no_axis() attributes {tessel.pipeline = {stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64}} {
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' has a key 'chunks' that is not one of stage, stages, virtual_stages, microbatches (i64), axis and schedule (strings), or of the wrong type}}
func.func @unknown_key() attributes {tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64, chunks = 2 : i64}} {
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' has a key 'stage' that is not one of stage, stages, virtual_stages, microbatches (i64), axis and schedule (strings), or of the wrong type}}
func.func @i32_stage() attributes {tessel.pipeline = {axis = "pp", stage = 0 : i32, stages = 2 : i64, virtual_stages = 1 : i64}} {
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' has a key 'schedule' that is not one of}}
func.func @schedule_not_a_string() attributes {tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64, schedule = 1 : i64}} {
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' needs microbatches >= 1}}
func.func @no_microbatch() attributes {tessel.pipeline = {axis = "pp", stage = 0 : i64, stages = 2 : i64, virtual_stages = 1 : i64, microbatches = 0 : i64}} {
  return
}

// -----

// expected-error @+1 {{'tessel.pipeline' must be a dictionary, got "pp"}}
func.func @not_a_dictionary() attributes {tessel.pipeline = "pp"} {
  return
}

// -----

func.func @bad_action(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.pp_action' must be "F", "B", "I" or "W", got "SEND_F"}}
  %y = tessel.gelu %x {tessel.pp_action = "SEND_F"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @negative_chunk(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.pp_chunk' must be an i64 >= 0, got -1 : i64}}
  %y = tessel.gelu %x {tessel.pp_chunk = -1 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @group_not_integer(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.pp_group' must be an i64 >= 0, got "0"}}
  %y = tessel.gelu %x {tessel.pp_group = "0"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @microbatch_i32(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.pp_microbatch' must be an i64 >= 0, got 1 : i32}}
  %y = tessel.gelu %x {tessel.pp_microbatch = 1 : i32} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @one_tied_stage() -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.pp_stages' must list at least two stages >= 0, ascending, got array<i64: 1>}}
  %w = tessel.param "w" {std = 2.0e-02 : f64, tessel.pp_stages = array<i64: 1>} : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

func.func @tied_stages_unsorted() -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.pp_stages' must list at least two stages >= 0, ascending, got array<i64: 3, 0>}}
  %w = tessel.param "w" {std = 2.0e-02 : f64, tessel.pp_stages = array<i64: 3, 0>} : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

func.func @tied_stages_not_on_a_param(%x: tensor<4xf32>) -> tensor<4xf32> {
  // The message lists where each tessel attribute belongs, the pipeline ones included.
  // expected-error @+1 {{'tessel.pp_stages' is not a tessel attribute of an operation (arguments take tessel.input; results tessel.output and tessel.grad; functions tessel.batch_shards, tessel.mixed_precision, tessel.partitioned and tessel.pipeline; operations tessel.shardings, tessel.pp_chunk, tessel.pp_microbatch, tessel.pp_action and tessel.pp_group; params and all-gathers tessel.fsdp_unit; params tessel.pp_stages; shard.grid tessel.axis_names)}}
  %y = tessel.gelu %x {tessel.pp_stages = array<i64: 0, 1>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Operation tags on a function are misplaced.
// expected-error @+1 {{'tessel.pp_chunk' is not a tessel attribute of a function}}
func.func @chunk_on_function() attributes {tessel.pp_chunk = 0 : i64} {
  return
}
