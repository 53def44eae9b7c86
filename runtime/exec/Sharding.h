// Where a sharded buffer's elements lie in its global tensor (Program.h ShardDim's layout
// rule), and what follows from it: a rank's shard of an initialised parameter, the global
// tensor reassembled from every rank's shard, and the replica group of a buffer.
//
// Promise: pure arithmetic on a Program's data (no communication), so initialisation, export
// and the replica check share one definition of the layout, and a test can check it against
// a slice computed on its own.
#pragma once

#include "runtime/comm/DeviceMesh.h"  // MeshLayout
#include "runtime/exec/Program.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

/// The flat index in `b`'s global tensor (row-major over b.globalShape) of each local element
/// of the rank at `coordinates` (one per axis of `mesh`, in mesh order), in local row-major
/// order: b.numel() entries; -1 for an element of a padded dimension's padding (ShardDim).
/// For an unsharded buffer, 0 .. numel-1. Requires a buffer that passed checkProgramMesh
/// against `mesh`.
std::vector<int64_t> globalIndices(const Buffer& b, const MeshLayout& mesh, const std::vector<int>& coordinates);

/// Fills `out` (b.numel() floats) with this rank's shard of parameter `b`: each element is
/// runtime/Init.h's value for its flat global index (globalIndices) under b's name and `seed`,
/// and 0 for padding (so padding contributes nothing to any product, whatever b's init). So
/// every plan starts from the same global weights as one rank. Only this rank's elements are
/// generated (O(b.numel()) work and memory, never the global tensor). `coordinates` may be
/// empty for an unsharded buffer; throws std::runtime_error for a sharded one without a mesh.
void initParameterShard(const Buffer& b, const MeshLayout* mesh, const std::vector<int>& coordinates,
                        uint64_t seed, float* out);

/// The first padding element of `b` (ShardDim padding) on the rank at `coordinates` whose value
/// in `data` (b.numel() elements of b.dtype, this rank's shard) is not zero, as a local flat
/// index; -1 when every padding element is zero (or b has none; I32 buffers are not checked).
/// Padding starts at zero and only ops that keep zeros zero touch it (tessel-partition), so
/// anything else means the padding entered the math.
int64_t nonZeroPadding(const Buffer& b, const MeshLayout& mesh, const std::vector<int>& coordinates,
                       const void* data);

/// The value of coordinate buffer `b` (BufferKind::Coordinate) on the rank at `coordinates`
/// (one per axis of `mesh`, in mesh order): the row-major index of those coordinates on
/// b.coordinateAxes, listed axes outermost first, times b.coordinateStride. 0 without a mesh
/// (`mesh` null). Requires a buffer that passed checkProgramMesh.
int32_t coordinateValue(const Buffer& b, const MeshLayout* mesh, const std::vector<int>& coordinates);

/// The mesh axes (in mesh order) that do not split `b`: the ranks differing only along them
/// hold the same elements of `b`, which must therefore be bitwise equal (its replica group).
/// Every axis of the mesh for an unsharded buffer.
std::vector<std::string> replicaAxes(const Buffer& b, const std::vector<MeshAxis>& mesh);

/// The --explain report of the parameters on the program's mesh, one line each: name, local
/// shape, global shape and split axes (with blocks) if sharded, and the replica group's axes:
///   "  blocks.0.mlp.fc.weight  local [64, 32] of [128, 32], dim 0 over [tp]; replicas over [dp]"
/// after a header "parameters on the mesh dp=2,tp=2:". "" for a program without a mesh or
/// without a sharded parameter (data parallelism alone replicates every parameter everywhere).
std::string explainShardings(const Program& program);

/// The program's mesh as a MeshLayout (throws std::runtime_error for a program without one).
MeshLayout meshLayoutOf(const Program& program);

/// The device mesh of `program` over `world` (null for a program without a mesh): what the
/// trainers and tessel-run give the executor (setMesh). Throws CommError on every rank whose
/// world size is not the mesh's.
std::unique_ptr<DeviceMesh> deviceMeshFor(const Program& program, Communicator& world);

/// Checks the mesh (non-empty unique axis names, sizes >= 1, at most 2^31 - 1 ranks), every
/// buffer's sharding (only Parameter and State buffers; one ShardDim per dimension and a global
/// shape of the same rank; axes of the mesh, none twice in one buffer; blocks >= 1 dividing the
/// local dimension; global = local x product of the axis sizes per dimension), and every
/// collective's axes (of the mesh, in mesh order, no repeats, group = product of their sizes;
/// without a mesh only a non-empty list). Throws std::runtime_error "<context>: <field>:
/// <problem>" (validateProgram calls it first).
void checkProgramMesh(const Program& program, const std::string& context);

}  // namespace tessel::rt
