// Gradients written straight into their all-reduce bucket (PyTorch DDP's
// gradient_as_bucket_view=True): the memory plan of a lowered function, with every gradient
// bucket that can be made in place (runtime/exec/Program.h CollectiveStep::inPlace) placed
// as one block holding its tensors as views, so that no step copies into or out of it.
//
// Promise: the program this leaves passes validateProgram's in-place and liveness checks
// (each view exactly where packing would put it; its bytes reserved from the step producing
// its gradient to the last read of its reduced value); a bucket that cannot be in place keeps its copies, never a
// silent wrong result. Plain C++ over rt::Program (no MLIR).
#pragma once

#include "codegen/MemoryPlan.h"
#include "runtime/exec/Program.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tessel {

/// Plans the temporaries `temps` of `fn` (ids into program.buffers; `live` gives each one's
/// [first, last] step, function outputs past the last step) with planMemory and writes their
/// offsets; returns the arena's bytes. With `inPlaceBuckets`, first marks in place (start and
/// wait) every asynchronous all-reduce bucket of `fn` whose start tensors are f32 temps of
/// `fn`, distinct, named by no step after the start (and not outputs), whose wait tensors are
/// f32 temps first named by the wait, none of them a view of another bucket, and whose tensors
/// but the last have byte sizes that keep the next view 64-byte aligned; such a bucket is
/// planned as one block of parts (LiveBuffer::parts), the views at the bucket's offset plus
/// the bytes before them, part i busy from the step producing start tensor i to the last
/// step naming wait tensor i, so a view's bytes are not held before its gradient exists. Start tensor i and wait tensor i then share
/// bytes: the start's gradient is written there, reduced in place and read by the optimizer.
/// Synchronous all-reduces, shard moves (ZeRO/FSDP) and send_recv steps are left alone.
int64_t planTemps(rt::Program& program, rt::Function& fn, const std::vector<int>& temps,
                  const std::map<int, std::pair<int64_t, int64_t>>& live, bool inPlaceBuckets);

}  // namespace tessel
