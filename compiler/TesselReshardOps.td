//===- TesselReshardOps.td - the abstract reshard ------------------*- tablegen -*-===//
//
// tessel-insert-reshards places a `tessel.reshard` wherever a value's sharding differs from
// the one its user's rule asks for (compiler/ShardingRules.h); tessel-reshard-to-collectives
// replaces each with the collectives that perform it.
//
// Why our own op rather than upstream `shard.shard`: upstream annotates a value with a
// `!shard.sharding` SSA value (made by `shard.sharding`, which has no block counts, so a
// qkv projection split by heads cannot be said), and its resharding handles 1-D grids only.
// A reshard here names both ends as #tessel.sharding attributes on any mesh.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_RESHARD_OPS_TD
#define TESSEL_RESHARD_OPS_TD

def Tessel_ReshardOp : Tessel_Op<"reshard", [SameOperandsAndResultType]> {
  let summary = "change a tensor's sharding (abstract: no collective chosen yet)";
  let description = [{
    The same global tensor as `input`, laid out as `sharding` says; `input` is laid out as
    its defining op's `tessel.shardings` says (replicated for a function argument). The
    types are global shapes: the op exists only between tessel-insert-reshards and
    tessel-reshard-to-collectives, before tessel-partition. A pending sum resolved (partial
    to not partial) becomes an all-reduce; the other changes become all-gathers, slices or
    all-to-alls as tessel-reshard-to-collectives supports them.

    Example: the row-parallel projection's pending sum, resolved before its bias is added:

    ```mlir
    %r = tessel.reshard %p : tensor<8x16x64xf32> to #tessel.sharding<@mesh, [[], [], []]>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_ShardingAttr:$sharding);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = "$input `:` type($input) `to` qualified($sharding) attr-dict";
}

#endif // TESSEL_RESHARD_OPS_TD
