// Gathering and exporting the parameters; see ExportParams.h.
#include "runtime/exec/ExportParams.h"

#include "runtime/exec/PipelineRuntime.h"  // defines: gatherPipelineParameters
#include "runtime/exec/Sharding.h"

#include <fmt/format.h>

#include <stdexcept>

namespace tessel::rt {

SafeTensorsFile gatherParameters(const ProgramExecutor& ex, Communicator* world) {
  const Program& p = ex.program();
  // Each stage holds its own parameters: exchanged by name (runtime/exec/PipelineRuntime.h).
  if (p.pipeline && world && world->worldSize() > 1) return gatherPipelineParameters(ex, *world);
  const int n = world ? world->worldSize() : 1;
  const int rank = world ? world->rank() : 0;
  // Without a mesh every rank holds whole replicas: one axis over the world.
  const std::vector<MeshAxis> axes = p.mesh.empty() ? std::vector<MeshAxis>{{"world", n}} : p.mesh;
  const MeshLayout layout(axes);
  if (layout.size() != n)
    throw std::runtime_error(fmt::format("--export-params: the program's mesh {} has {} ranks but the world has {}",
                                         layout.describe(), layout.size(), n));
  SafeTensorsFile file;
  file.metadata["format"] = "pt";
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = p.buffers[i];
    if (b.kind != BufferKind::Parameter) continue;
    const int64_t local = b.numel();
    std::vector<float> mine(static_cast<size_t>(local));  // parameters are f32 (validateProgram)
    ex.readBuffer(static_cast<int>(i), mine.data());
    // Every rank's shard, rank after rank (all shards of one buffer have one size).
    std::vector<float> all;
    if (n > 1) {
      all.resize(static_cast<size_t>(local) * static_cast<size_t>(n));
      world->allGather(mine.data(), all.data(), local * n, DType::F32, "export " + b.name)->wait();
    } else {
      all = mine;
    }
    if (rank != 0) continue;
    std::vector<float> global(static_cast<size_t>(b.globalNumel()));
    const std::vector<std::string> replicas = p.mesh.empty() ? std::vector<std::string>{"world"} : replicaAxes(b, axes);
    for (int r = 0; r < n; ++r) {
      const std::vector<int> at = layout.coordinates(r);
      bool first = true;  // the replica at coordinate 0 of every axis that does not split b
      for (const std::string& a : replicas) first = first && at[static_cast<size_t>(layout.axisIndex(a))] == 0;
      if (!first) continue;
      const std::vector<int64_t> index = globalIndices(b, layout, at);
      const float* shard = all.data() + static_cast<size_t>(r) * static_cast<size_t>(local);
      for (size_t k = 0; k < index.size(); ++k)
        if (index[k] >= 0) global[static_cast<size_t>(index[k])] = shard[k];  // padding is dropped
    }
    file.tensors[b.name] = StTensor::fromF32(b.globalShape.empty() ? b.shape : b.globalShape, global);
  }
  return file;
}

void exportParameters(const ProgramExecutor& ex, Communicator* world, const std::string& path) {
  SafeTensorsFile file = gatherParameters(ex, world);
  if (!world || world->rank() == 0) writeSafeTensors(path, file);
}

}  // namespace tessel::rt
