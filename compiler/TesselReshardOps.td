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

def Tessel_ReshardOp : Tessel_Op<"reshard"> {
  let summary = "change a tensor's sharding (abstract: no collective chosen yet)";
  let description = [{
    The same global tensor as `input`, laid out as `sharding` says instead of as `from`
    says (`from` is the sharding of the input's producer). Before tessel-partition both
    types are the global shape; after it they are the local shapes of the two layouts (an
    input split over 2 ranks on a dimension the result is not split on has half of it).
    tessel-reshard-to-collectives then replaces each reshard with collectives on local
    shapes: a pending sum resolved is an all-reduce, a split gathered an all-gather, a
    pending sum resolved into a split a reduce-scatter.

    Example: the row-parallel projection's pending sum, resolved before its bias is added:

    ```mlir
    %r = tessel.reshard %p : tensor<8x16x64xf32> from #tessel.sharding<@mesh, [[], [], []], partial = [0]>
        to #tessel.sharding<@mesh, [[], [], []]> -> tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins Tessel_FloatTensor:$input, Tessel_ShardingAttr:$from,
                       Tessel_ShardingAttr:$sharding);
  let results = (outs Tessel_FloatTensor:$result);
  let assemblyFormat = [{
    $input `:` type($input) `from` qualified($from) `to` qualified($sharding) attr-dict
    `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_RESHARD_OPS_TD
