// FSDP units: the groups of parameters that fully sharded data parallelism all-gathers
// together (FSDP2 wraps per module; a plan names the modules by glob, or by size as the
// size-based auto-wrap policy does). The one rule that the DSL (Plan::fully_shard's `unit`
// and `min_unit_params`, resolved when the model compiles) and the passes
// (tessel-fully-shard, tessel-reshard-after-forward, tessel-fsdp-prefetch) share. Plain C++,
// no MLIR.
//
// Module paths are the dotted prefixes of parameter names: "blocks.0.attn.qkv.weight" lies
// in the modules "blocks", "blocks.0", "blocks.0.attn" and "blocks.0.attn.qkv". A
// parameter's unit is a module path, or "" for the root unit (parameters in no unit: the
// embeddings, the final norm), which is gathered once per step and not freed after the
// forward pass (FSDP2 never reshards its root module after forward).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel {

// The IR tags a sharded tessel.param (and the all-gathers of it) with its unit's path ("" for
// the root unit) in `tessel.fsdp_unit` (compiler/FunctionAttrs.h kFsdpUnitAttr); absent: each
// parameter is its own unit.

/// The unit of parameter `name` under the unit globs `globs` (compiler/Glob.h's matching):
/// each glob stands for the outermost modules it matches (the shortest proper dotted prefix
/// of `name` that it matches, so "blocks.*" makes "blocks.0" a unit, not "blocks.0.attn" as
/// well), and a parameter inside several units belongs to the innermost of them (the
/// longest such prefix: "blocks.0.mlp.fc" and "blocks.0" nest as FSDP2's modules do).
/// "" (the root unit) when no glob matches a prefix. A tied parameter has one name, so it
/// belongs to exactly one unit.
std::string fsdpUnitOf(std::string_view name, const std::vector<std::string>& globs);

/// The size-based units (the seed lab's size_based_auto_wrap_policy): visiting the modules
/// (dotted prefixes of `parameters`' names) innermost first, a module becomes a unit when
/// the parameters under it that no unit inside it holds number at least `minParams`
/// elements; the model itself (the root) is never one. Returns the unit paths, innermost
/// first and then in name order; each is a glob that matches only itself (module paths
/// hold no '*' or '?'), so fsdpUnitOf over them gives every parameter its innermost unit.
/// `parameters`: (name, element count); `minParams` >= 1.
std::vector<std::string> sizeBasedFsdpUnits(const std::vector<std::pair<std::string, int64_t>>& parameters,
                                            int64_t minParams);

}  // namespace tessel
