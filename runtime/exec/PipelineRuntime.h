// The runtime half of pipeline parallelism: what the executors and the rank-level checks do
// with a program of one pipeline stage (Program::pipeline, CollectiveStep::Kind::SendRecv,
// Function::actions; runtime/exec/Program.h).
//
// Promise:
// - A send_recv step posts all of its sends and receives, then waits for all of them, so a
//   rank may send to and receive from its neighbours in one step without deadlock; a peer
//   that never answers ends in the communicators' timeout, a CommError naming the step's
//   transfer labels, never a hang.
// - Under a pipelined program every rank holds only its stage's parameters. The rank-level
//   functions that look at every rank's parameters (--export-params, --check-replicas,
//   --check-schedule) exchange what each rank has by name, in a fixed order, so every rank
//   takes part the same way whatever its stage.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceMesh.h"
#include "runtime/exec/Program.h"
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/exec/Trace.h"
#include "runtime/io/SafeTensors.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

/// validateProgram's pipeline checks (runtime/exec/PipelineCheck.cpp lists them): the
/// pipeline record against the mesh, every send_recv step (one axis, peers in range and not
/// the program's own stage, sends <= tensors, names, distinct tensors) and every function's
/// action spans (in order, non-overlapping, inside the steps). Throws std::runtime_error
/// "<context>: <field>: <problem>" (" (function '<name>')" inside a function).
void checkProgramPipeline(const Program& program, const std::string& context);

/// Throws std::runtime_error unless a pipelined `program` runs on a rank whose coordinate
/// along the pipeline axis of `mesh` is the program's stage (world rank `worldRank`): a rank
/// running another stage's program would exchange with the wrong peers. A program without a
/// pipeline record passes.
void checkPipelineStage(const Program& program, const MeshLayout& mesh, int worldRank);

/// The executors' setMesh for a pipelined program: forms every group along which some rank's
/// program runs a collective, in one order on every rank. DeviceMesh::group forms a group
/// collectively over the world, so the ranks must ask for the groups in the same order; the
/// stages' programs differ, and so may the order in which their collectives first name each
/// set of axes (a stage that starts with a receive names pp first). So the ranks all-gather
/// over `host` (a communicator of host memory over the mesh's world: MPI) which sets of axes
/// their collectives use (a bit per subset of the mesh's axes, at most 16 axes) and form the
/// union's groups in increasing bit order. With `host` null (the GPU executor, whose mesh
/// world is NCCL and takes device memory only) each rank forms its own program's groups in
/// that order, which agrees across stages when every stage's collectives use the same sets
/// of axes (the pipeline's plans do: pp, and the dp / tp / fsdp sets, on every stage); a
/// disagreement is the CommError of DeviceMesh::group's agreement check. Collective over the
/// mesh's world; throws std::runtime_error for a mesh of more than 16 axes.
void formPipelineGroups(const Program& program, DeviceMesh& mesh, Communicator* host);

/// Runs send_recv step `c` of function `function` over `group` (the communicator along the
/// step's axis, whose rank i is the rank at coordinate i): posts, as one group
/// (Communicator::sendRecv), a send of tensors[i] to peer peers[i] for i < sends and a
/// receive into tensors[i] from peers[i] for the others, in the step's order, then waits for
/// every one. `tensors` are the steps' buffers (pointer, bytes)
/// and `program` gives their dtypes. Returns the bytes sent (the step's payload). Throws
/// CommError (from the communicator: a timeout, a dead peer) naming the transfer's label.
int64_t runSendRecv(const CollectiveStep& c, const Program& program,
                    const std::vector<std::pair<void*, size_t>>& tensors, Communicator& group,
                    const std::string& function);

/// The transfers of send_recv step `c` of `function` (Communicator::sendRecv): tensor i at
/// pointers[i] (host or device memory, whatever the communicator moves), sent for i < sends,
/// else received, to or from group rank peers[i], named by sendRecvTransferName.
std::vector<P2pTransfer> sendRecvTransfers(const CollectiveStep& c, const Program& program,
                                           const std::vector<void*>& pointers, const std::string& function);

/// The name a send_recv's transfer i is issued under: "<label> (send to pp 1, send_recv of
/// @train_step)", with label = names[i] or "transfer i" when the step has no names.
std::string sendRecvTransferName(const CollectiveStep& c, size_t i, const std::string& function);

/// Records a function's action spans (Function::actions) on a trace while its steps run: one
/// event per span, category "pipeline", named by the action's text, from before its first step
/// to after its last, so it encloses the steps' own events. With a null trace it does nothing.
class ActionTracer {
 public:
  /// `actions` must outlive the tracer; `trace` null or inactive: record nothing.
  ActionTracer(const std::vector<ActionSpan>& actions, TraceRecorder* trace);
  /// Call before step `step` runs (steps in increasing order).
  void beforeStep(size_t step);
  /// Call after step `step` ran (and was traced).
  void afterStep(size_t step);

 private:
  const std::vector<ActionSpan>& actions_;
  TraceRecorder* trace_;
  size_t next_ = 0;  // the next span to open or close
  std::chrono::steady_clock::time_point start_;
};

/// --export-params of a pipelined program: every parameter of every stage, global and f32,
/// written once (the first stage that holds a name provides it: a tied parameter on two
/// stages appears once). Collective over `world` (a world of the program's mesh size): within
/// each stage its ranks send their shards to the stage's lead rank (the stage's rank whose
/// other coordinates are all 0), which reassembles them (runtime/exec/Sharding.h); then the
/// leads of stages 1, 2, ... send name, shape and values to world rank 0 (stage 0's lead), in
/// pp order. The result is complete on world rank 0; other ranks get an empty file. Throws
/// std::runtime_error if the world is not the mesh's size.
SafeTensorsFile gatherPipelineParameters(const ProgramExecutor& ex, Communicator& world);

/// --check-replicas of a pipelined program: all-gathers, per rank and per Parameter and State
/// buffer, its name, the lowest world rank of its replica group over the mesh axes that do not
/// shard it, the pipeline axis included (the ranks whose copy must be equal if they hold it),
/// and its FNV-1a hash; returns "" when every group's holders agree, else one line per
/// diverged buffer (at most 8), as replicaMismatches does. Within a stage this is the plain
/// replica check; across stages it compares the parameters present on several stages (tied)
/// bitwise. Collective over `world`; every rank gets the same answer. Also checks the padding
/// of padded buffers (nonZeroPadding) and throws naming the buffer and rank if it is not zero.
std::string pipelineReplicaMismatches(const ProgramExecutor& ex, Communicator& world, int64_t step);

}  // namespace tessel::rt
