// Where the GPU executor's compute stream waits for the all-gathers and reduce-scatters it
// issues on the communication stream: plain C++ over the Program, no CUDA, unit-tested
// without a GPU (test/unit/CudaOverlapTest.cpp).
//
// Promise: a one-step all_gather or reduce_scatter (CollectiveStep::AllGather /
// ReduceScatter, Program.h) whose communicator blocks are already the tensor's layout (the
// gathered or scattered dimension has nothing before it, e.g. dimension 0 of every fully
// sharded parameter and its gradient) and whose input and output do not overlap in memory
// runs straight between its tensors: no staging buffer and no packing copies, so nothing
// after the collective has to run on the compute stream. The compute stream then waits for
// it (an event, runtime/comm/StreamCommunicator.h) only before the first later step that
// touches memory the collective reads or writes, or at the end of the function, instead of
// right after the issue. The steps in between overlap the collective (a gradient's
// reduce-scatter runs during the backward of the layers before it; an all-gather placed
// ahead of its use, as prefetch places it, runs during the unit before). Results are
// unchanged: every reader and writer of the collective's memory still comes after it.
// "Touches" is conservative, by bytes: a Temp is its arena range [offset, offset + bytes),
// which later Temps may reuse once the memory plan considers it dead (the memory plan places
// the input of a reduce-scatter as dead after the step, so a later Temp in the same bytes is
// a wait); any other buffer is its own allocation. A step touches every buffer it names
// (kernel arguments, GEMM operands, copy ends, a collective's bucket or staging buffer and
// tensors).
#pragma once

#include "runtime/exec/Program.h"

#include <cstddef>
#include <vector>

namespace tessel::rt {

/// Whether step `c` of `program` (a validated collective step) runs straight between its
/// input and output (see the promise): an AllGather or ReduceScatter of group > 1 whose
/// moved dimension has only dimensions of size 1 before it, and whose two tensors are
/// distinct buffers whose memory does not overlap.
bool directShardMove(const Program& program, const CollectiveStep& c);

/// For each step index i of `f` (a function of the validated `program`) and for i =
/// f.steps.size() (the end of the function): the indices of the direct shard moves
/// (directShardMove) that the compute stream must wait for before step i, in issue order.
/// Every direct shard move appears exactly once, at a later index than its own.
std::vector<std::vector<size_t>> shardMoveWaits(const Program& program, const Function& f);

}  // namespace tessel::rt
