//===- TesselPipelineOps.td - point-to-point ops of pipeline parallelism -*- tablegen -*-===//
//
// Pipeline parallelism cuts the model into stages, one per rank along the plan's pipeline
// axis (`pp`); every rank compiles only its own stage (tessel-split-stages). A value that one
// stage computes and another uses crosses the boundary as a `tessel.send` on the producing
// stage and a `tessel.recv` on the consuming one; autodiff turns the pair into the opposite
// pair for the gradient (compiler/VJP.cpp is not involved: the two ops are roots of the
// reverse sweep, passes/Autodiff.cpp). The peer is named by its coordinate along the one grid
// axis, so the op reads the same on every data- and tensor-parallel rank of a stage.
//
// The ops have side effects (they talk to another rank), so generic passes never erase,
// merge or move them. tessel-schedule-pipeline orders them with the compute of their
// microbatch and marks the ones that progress together with `tessel.pp_group`; lowering
// turns each group into one send_recv step (runtime/exec/Program.h).
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_PIPELINE_OPS_TD
#define TESSEL_PIPELINE_OPS_TD

def Tessel_SendOp : Tessel_Op<"send"> {
  let summary = "send a tensor to the rank of another pipeline stage";
  let description = [{
    Sends `input` to the rank whose coordinate along the single axis `grid_axes` of `grid`
    is `peer` and whose other coordinates are this rank's. The peer's matching
    `tessel.recv` (the same position in the channel's order: sends from one rank to another
    are received in the order they were sent, as MPI's non-overtaking rule) has the same
    type. Completes when the peer has received it (rendezvous), unless it is grouped with
    other transfers (`tessel.pp_group`), which then progress together.
    Example (stage 0 sends a block's output to stage 1):
    ```mlir
    tessel.send %h to 1 on @mesh grid_axes = [0] : tensor<4x8x16xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, I64Attr:$peer, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let assemblyFormat = [{
    $input `to` $peer `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Tessel_RecvOp : Tessel_Op<"recv"> {
  let summary = "receive a tensor from the rank of another pipeline stage";
  let description = [{
    The tensor the peer (coordinate `peer` along the single axis `grid_axes` of `grid`, the
    other coordinates this rank's) sends with its matching `tessel.send`.
    Example:
    ```mlir
    %h = tessel.recv from 0 on @mesh grid_axes = [0] : tensor<4x8x16xf32>
    ```
  }];
  let arguments = (ins I64Attr:$peer, FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    `from` $peer `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_PIPELINE_OPS_TD
