// Startup agreement among the ranks of a job, MLIR-free: shared by the trainers (dsl/trainer)
// and tessel-run.
//
// Promise: before anything trains, a job launched as N ranks either has a plan for N ranks,
// every rank runs the same command line and reads the same data, or every rank throws
// std::runtime_error with one line naming what differs (and the ranks that differ). A plain
// run (one rank, no launcher) always agrees with itself. These checks are collectives: every
// rank calls them in the same order.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/data/Idx.h"
#include "runtime/data/TextDataset.h"
#include "runtime/numeric/Fnv1a.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

namespace tessel::trainer {

/// Throws std::runtime_error unless a job of `world` ranks can run a plan of `planRanks`
/// ranks, described as `plan` (the --plan syntax, e.g. "dp=2"). The message says how to fix
/// it: `remedy` followed by the --plan that would fit, or the launch that would, e.g.
///   "launched as 2 ranks but the plan is dp=1 (one rank); pass --plan dp=2 or launch one process"
/// (remedy "pass"; a bundle says "compile the bundle with"); a world of one "started as one
/// rank". A plan with other axes than dp (pp, tp, fsdp) gets the launch first and no dp=N
/// (which would drop those axes): "...; launch 4 processes (mpirun -np 4), or pass a plan
/// whose axis sizes multiply to 3". Not collective: every rank
/// decides the same from the same plan and world size, so every rank refuses.
void requireWorldSize(int world, int64_t planRanks, const std::string& plan, const std::string& remedy);

/// Every rank of an SPMD job must run the same command: all-gathers a hash of argv[1..] and
/// throws std::runtime_error naming the ranks whose arguments differ from rank 0's (e.g. a
/// different --batch or --seed under mpirun's MPMD syntax, which would train on different
/// batches or diverge silently). A world of one always passes.
void checkSameCommandLine(int argc, char** argv, rt::Communicator& comm);

/// What identifies a rank's data: FNV-1a (runtime/numeric/Fnv1a.h) over its bytes, and
/// their count. Feed every byte the rank may train or validate on, in a fixed order.
struct DataFingerprint {
  uint64_t hash = numeric::kFnv1aOffsetBasis;  // no bytes yet
  uint64_t bytes = 0;
  /// Continues the fingerprint over `n` bytes at `data`.
  void add(const void* data, size_t n);
};

/// The fingerprint of a text corpus: its bytes (both splits).
DataFingerprint fingerprintOf(const TextDataset& data);
/// The fingerprint of image sets (e.g. the training and test images): each one's
/// dimensions, pixels and labels, in the order given.
DataFingerprint fingerprintOf(std::initializer_list<const ImageDataset*> sets);

/// All-gathers every rank's fingerprint and throws std::runtime_error naming the ranks whose
/// data differ from rank 0's, with both sizes, unless all agree: ranks that read different
/// files (another copy at the same path on another host, a different --data) would
/// otherwise train on different global batches while their replicas stayed in step.
/// `where` names the data in the message (e.g. "'input.txt'", the path as given). A world of one always passes.
void requireSameData(rt::Communicator& comm, const DataFingerprint& mine, const std::string& where);

/// All-gathers every rank's fingerprint of the bundle it loaded (runtime/bundle/Bundle.h:
/// its program and kernel checksums, fed to `mine` by the caller) and throws
/// std::runtime_error naming the ranks whose bundle differs from rank 0's, unless all agree:
/// ranks that loaded different bundles at the same path (another copy on another host, a
/// bundle with another optimizer) would train different programs in lockstep. `where` names
/// the bundle as given. A world of one always passes.
void requireSameBundle(rt::Communicator& comm, const DataFingerprint& mine, const std::string& where);

/// Writes `message` and a newline to stderr in one write, so the lines of several ranks
/// (forwarded by mpirun) never run into each other; under a launcher the line ends with
/// " [rank R of N]" (the message itself keeps its "file:line:col: error:" start).
void reportError(const std::string& message);

/// Runs `body` and returns its exit code, turning what a user can cause into one line on
/// stderr and exit code 1: "<program>: error: <what>" for a std::exception, an out-of-memory
/// line for std::bad_alloc. A CommError (a failed collective) ends the process through
/// rt::abortJob without destructors, so keep an rt::World outside `body`.
int runGuarded(const std::string& program, const std::function<int()>& body);

}  // namespace tessel::trainer
