// --export-params FILE.safetensors: every trainable parameter, gathered to its global,
// logical shape, in f32, under its DSL name (the buffer's name), written by rank 0.
//
// Promise: the file is the same whatever the plan: a sharded parameter is reassembled from
// every rank's shard by the layout rule (runtime/exec/Sharding.h), a replicated one is taken
// from the replica at coordinate 0 of its replica group. Optimizer state is not exported.
// Under pipeline parallelism (Program::pipeline) each stage's ranks hold only that stage's
// parameters; world rank 0 still writes every parameter of every stage, a tied one once
// (runtime/exec/PipelineRuntime.h gatherPipelineParameters).
// The write is atomic (runtime/io/SafeTensors.h: temp file, fsync, rename), so a reader never
// sees half a file.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/io/SafeTensors.h"

#include <string>

namespace tessel::rt {

/// Every Parameter buffer of `ex`'s program, global and f32, gathered over `world` (every
/// rank must call this at the same point; null or a world of one: this rank's buffers, which
/// then must be unsharded or sharded over axes of size 1). The result is meaningful on rank 0
/// only (the other ranks get an empty file). Throws std::runtime_error if the world is not the
/// program's mesh size.
SafeTensorsFile gatherParameters(const ProgramExecutor& ex, Communicator* world);

/// gatherParameters, then rank 0 writes `path` (writeSafeTensors). Collective over `world`.
void exportParameters(const ProgramExecutor& ex, Communicator* world, const std::string& path);

}  // namespace tessel::rt
