//===- PassesPipeline.td - the pipeline-parallel passes -----------*- tablegen -*-===//
//
// Pipeline parallelism (the plan's pipeline()): each rank compiles only its own stage.
// tessel-split-stages keeps the stage's part of @forward, tessel-autodiff differentiates it
// through its transfers, tessel-microbatch unrolls M microbatches into @train_step, and
// tessel-schedule-pipeline orders them by the schedule's action list.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_PASSES_PIPELINE_TD
#define TESSEL_PASSES_PIPELINE_TD

def SplitStages : Pass<"tessel-split-stages", "mlir::ModuleOp"> {
  let summary = "keep one pipeline stage of @forward; values crossing stages become send/recv";
  let description = [{
    Cuts the model's layers into `p x v` chunks (p: the size of mesh axis `axis`, v:
    `virtual-stages`), chunk c on stage `c % p`, and keeps in `@forward` the ops of
    stage `stage` only.

    - The layer of an op is N in the first `<name>.<N>` component of its module path
      (`blocks.3.attn.qkv` -> 3); an op outside every layer joins the layer before it (the
      final norm, the head and the loss join the last), or layer 0 before any (the
      embeddings). Parameters, constants and ops computed from them alone are *free*:
      every stage that uses one keeps it, and a parameter kept by several stages (a tied
      embedding) is tagged `tessel.pp_stages`.
    - `layer-ranges` (`"0-5,6-11"`, one inclusive range per chunk, in order, covering
      every layer) fixes the cut; empty: the cut that minimises the costliest chunk under
      the roofline cost model of passes/StageBalance.h (FLOPs and bytes per op; the
      embeddings and the head count with the first and last layer).
    - A value computed on another stage becomes `tessel.recv` before its first use (the
      values of one source stage received in the order it sends them, since a channel
      between two ranks is FIFO); a value computed here and used on another stage gets a
      `tessel.send` right after it, one per destination stage. Kept ops get `tessel.pp_chunk` and `tessel.pp_action = "F"`.
    - The loss is the last chunk's, 0 on the other stages, all-reduced (sum) over the
      axis, so every stage returns it. The function gets `tessel.pipeline`.

    More chunks than layers, ranges that do not cover the layers in order, a model whose
    layers lie in two containers, or a forward function with results besides the loss are
    errors (at `plan-site`, the plan's pipeline() call, where the plan is at fault).

    ```mlir
    // stage 0 of 2: blocks.0 here, blocks.1 and the head on stage 1
    %h = tessel.add %x, %y {tessel.pp_chunk = 0 : i64, tessel.pp_action = "F"} : ...
    tessel.send %h to 1 on @mesh grid_axes = [0] : tensor<4x8x16xf32>
    %zero = tessel.constant 0.0 : tensor<f32>
    %loss = tessel.all_reduce %zero reduce sum on @mesh grid_axes = [0] : tensor<f32>
    ```

    Stage: once, on `@forward` before `tessel-autodiff` and `tessel-fuse` (after the
    tensor-parallel and fsdp partition, so that a value crosses stages in its local shape).
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"pp\"", "the pipeline's mesh axis">,
    Option<"stage", "stage", "int64_t", "0", "the stage to keep: a coordinate on the axis">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1", "chunks per stage (v)">,
    Option<"layerRanges", "layer-ranges", "std::string", "\"\"",
           "inclusive layer ranges, one per chunk (\"0-5,6-11\"); empty: balanced by the cost model">,
    Option<"forwardName", "forward", "std::string", "\"forward\"", "the function to split">,
    Option<"planSite", "plan-site", "std::string", "\"\"",
           "where the plan calls pipeline(), file:line:col, for diagnostics">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def Microbatch : Pass<"tessel-microbatch", "mlir::ModuleOp"> {
  let summary = "unroll M microbatches of a pipeline stage into @train_step";
  let description = [{
    On `@train_step` of one pipeline stage (forward and backward of one microbatch, as
    `tessel-autodiff` leaves it): the ops that read the data (an argument or a
    `tessel.recv`) are cloned `microbatches` times, clone m reading its own copy of the
    arguments (the signature becomes M copies of the old one, microbatch-major) and tagged
    `tessel.pp_microbatch = m`; the other ops (parameters, constants, what is computed from
    them alone) run once, first. Each gradient and the loss become the sum over the
    microbatches in microbatch order times 1/M, the loss then all-reduced (sum) over the
    pipeline axis once at the end (replacing the per-microbatch one of
    `tessel-split-stages`). A parameter tagged `tessel.pp_stages` (held by several stages)
    has its gradient summed across them by send/recv: the others send to the first, which
    adds in stage order and sends the sum back. The result equals one step on the whole
    batch up to the order of f32 sums.

    Stage: once, after `tessel-autodiff` on a split stage, before
    `tessel-gradient-all-reduce`, `tessel-optimizer` and `tessel-fuse`.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "1", "M, microbatches per step">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"", "the function to rewrite">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

def SchedulePipeline : Pass<"tessel-schedule-pipeline", "mlir::ModuleOp"> {
  let summary = "order a pipeline stage's microbatches by the schedule's action list";
  let description = [{
    On `@train_step` as `tessel-microbatch` leaves it, takes this stage's action list of
    `schedule` (`gpipe`, `1f1b`, `interleaved`, `zero-bubble`, built by
    runtime/pipeline/Schedule.h for the p stages, v chunks per stage and M microbatches
    of `tessel.pipeline`; any other name is a CSV file of actions per rank in PyTorch's
    vocabulary, read and verified) and moves the unrolled ops into its order: the ops of no
    microbatch that come first (parameters, constants) stay first, then each action's
    ops (F, B, or I and W, SEND_F, RECV_F, SEND_B, RECV_B of one microbatch and chunk, by
    their `tessel.pp_*` tags) in their old relative order, then the step's end (sums, the
    loss, tied gradients). When the list splits the backward pass (zero-bubble), a chunk's
    backward ops that the gradient it sends back needs are its I, the rest its W
    (`tessel.pp_action` becomes "I" or "W"). The transfers of consecutive comm actions get
    one `tessel.pp_group` (one send_recv step: posted together, completed together).
    A list missing an action the stage computes, a list placing an action before one whose
    value it uses, or a schedule that cannot be built or read is an error at `plan-site`
    naming the action(s). Sets `schedule` in `tessel.pipeline`.

    Stage: once, after `tessel-microbatch`, before `tessel-gradient-all-reduce`,
    `tessel-optimizer` and `tessel-fuse`.
  }];
  let options = [
    Option<"scheduleName", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved, zero-bubble, or a CSV file of action lists">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"", "the function to rewrite">,
    Option<"planSite", "plan-site", "std::string", "\"\"",
           "where the plan calls pipeline(), file:line:col, for diagnostics">,
  ];
  let dependentDialects = ["::tessel::TesselDialect"];
}

#endif // TESSEL_PASSES_PIPELINE_TD
