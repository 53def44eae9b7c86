//===- TesselCommOps.td - collective ops of the tessel dialect -----*- tablegen -*-===//
//
// Asynchronous collectives the data-parallel passes insert (passes/GradientAllReduce.cpp,
// BucketGradients.cpp, OverlapCollectives.cpp). The upstream `shard` dialect's collectives
// are synchronous (one op computes the result), so they cannot express a collective that
// starts in the middle of the backward pass and is waited for later; these ops split one
// all-reduce into a start and a wait, and the compiler places both. Every rank runs the same
// IR, so every rank issues the same collectives in the same order by construction.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_COMM_OPS_TD
#define TESSEL_COMM_OPS_TD

def Tessel_AllReduceStartOp : Tessel_Op<"all_reduce_start",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "start an asynchronous all-reduce of a bucket of tensors";
  let description = [{
    Starts one all-reduce over the `group_size` ranks of mesh axis `axis`, of all `inputs`
    packed into one flat buffer (a *bucket*), in operand order. `reduce` is `sum`, `avg`
    (the sum divided by `group_size`, torch.distributed.ReduceOp.AVG) or `max`. The results
    are the same tensors *in flight*: they have the inputs' types, may only be used by
    exactly one `tessel.all_reduce_wait` (all of them, in order), and hold the reduced
    values only after it. `bucket` numbers the buckets of a function in issue order;
    `params` names the parameter whose gradient each input is (for `--explain`).

    The op has side effects (it talks to other ranks), so it is never erased, merged or
    moved by generic passes; `tessel-overlap-collectives` decides where it runs.

    Example:

    ```mlir
    %f:2 = tessel.all_reduce_start %g0, %g1 reduce avg axis "dp" group 2 bucket 0
        params ["ln_f.bias", "ln_f.weight"] : tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tessel_FloatTensor>:$inputs, Tessel_ReduceKindAttr:$reduce,
                       StrAttr:$axis,
                       I64Attr:$group_size, I64Attr:$bucket, StrArrayAttr:$params);
  let results = (outs Variadic<Tessel_FloatTensor>:$in_flight);
  let assemblyFormat = [{
    $inputs `reduce` $reduce `axis` $axis `group` $group_size `bucket` $bucket
    `params` $params attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

def Tessel_AllReduceWaitOp : Tessel_Op<"all_reduce_wait",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "wait for an all-reduce started by tessel.all_reduce_start";
  let description = [{
    Blocks until the all-reduce that produced `in_flight` (every result of one
    `tessel.all_reduce_start`, in order) is complete on this rank, and returns the reduced
    tensors. Ops that need the reduced values use the results of the wait, so the wait is
    placed right before the first of them (with overlap) or at the end of the backward pass
    (without).

    Example:

    ```mlir
    %r:2 = tessel.all_reduce_wait %f#0, %f#1 : tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tessel_FloatTensor>:$in_flight);
  let results = (outs Variadic<Tessel_FloatTensor>:$results);
  let assemblyFormat = "$in_flight attr-dict `:` type($in_flight)";
  let hasVerifier = 1;
}

#endif // TESSEL_COMM_OPS_TD
