// --check-replicas: every tensor replicated within a group of ranks is bitwise identical
// across that group. A buffer's replica group is the ranks that differ only along the mesh
// axes that do not shard it (runtime/exec/Sharding.h replicaAxes): under dp=2,tp=2 a
// tp-sharded weight is compared across dp only, a LayerNorm weight across all four ranks.
// A program without a mesh replicates every buffer over the whole world. Under pipeline
// parallelism the pipeline axis never joins a replica group of different buffers: buffers are
// compared by name among the ranks holding them, so a parameter present on several stages (a
// tied embedding) is also compared bitwise across them (PipelineRuntime.h
// pipelineReplicaMismatches).
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/exec/ProgramExecutor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

/// FNV-1a (64 bit) of the bytes of every Parameter and State buffer of `ex`'s program, in
/// buffer order (one entry per such buffer).
std::vector<uint64_t> replicaHashes(const ProgramExecutor& ex);

/// Given every rank's replicaHashes (`hashes[r]`, r a world rank of a world of
/// hashes.size() ranks), "" when each buffer's hash is equal across each of its replica
/// groups, else one line per diverged buffer (at most 8): "'<name>' differs across its replica
/// group over <axes>: rank(s) <r...> differ from rank <first>". Throws std::runtime_error if
/// the world is not the program's mesh size or a rank has the wrong number of hashes.
std::string replicaMismatches(const Program& program, const std::vector<std::vector<uint64_t>>& hashes);

/// All-gathers replicaHashes over `world` and throws std::runtime_error "replicas diverged
/// after step <step>: ..." with replicaMismatches' lines if any; a world of one passes. Also
/// checks, on every rank, that the padding of every padded buffer (Sharding.h
/// nonZeroPadding) is still zero, and throws (on every rank, so none waits for another)
/// "the padding of '<name>' is not zero on rank <r> after step <step>" if not.
void checkReplicas(const ProgramExecutor& ex, Communicator& world, int64_t step);

}  // namespace tessel::rt
