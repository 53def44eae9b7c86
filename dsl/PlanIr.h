// The plan in the IR (internal to dsl/): what Model::compile writes into the module before
// the pipeline runs, so that the passes and --dump-ir's 00-dsl.mlir see the plan.
#pragma once

#include "dsl/Graph.h"

#include <vector>

namespace tessel {

/// The one symbol name of the plan's mesh (a plan has one mesh; passes look it up by name).
inline constexpr const char* kPlanMeshName = "mesh";

/// Writes the plan's mesh into `graph`'s module, at its top, as
///   shard.grid @mesh(shape = AxB) {tessel.axis_names = ["dp", "tp"]}
/// located at the mesh's line (axes in the plan's order), and sets on the tessel.param of
/// every parameter in `shardings` its
///   tessel.shardings = [#tessel.sharding<@mesh, [[i], []]>]
/// (mesh axis indices per dimension). Throws ModelError if the module then fails to verify
/// (a bug here, not the user's: the plan was checked by Plan::resolve_shardings).
void writePlanToModule(Graph& graph, const Plan& plan, const std::vector<ParameterSharding>& shardings);

}  // namespace tessel
