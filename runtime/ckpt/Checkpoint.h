// Distributed checkpoints: every rank saves its own shards of the parameters and optimizer
// state; any world size and plan loads them (resharding). MLIR-free; the trainers
// (dsl/trainer) and tessel-run share it through runtime/train/Checkpointing.h.
//
// Layout of a checkpoint root (--checkpoint-dir DIR):
//   DIR/latest                  the folder name of the newest committed checkpoint, one line
//   DIR/step_00000010/          a committed checkpoint (runtime/ckpt/Index.h: index.json + shards)
//   DIR/step_00000020.tmp/      a save in progress, or one a crash abandoned (never loaded)
//
// Which rank writes what: each Parameter and State buffer is cut into boxes (Boxes.h); a box
// held by several ranks (replicas: data parallelism, tensor-parallel copies, a tied parameter
// on two pipeline stages) is written once, by one of the ranks holding it: boxes are taken
// largest first and each goes to the holder with the fewest bytes to write so far, so replicas
// share the writing (as torch.distributed.checkpoint's planner spreads replicated tensors over
// their holders) instead of rank 0 writing a data-parallel model alone. The ranks agree on that when the Checkpointer is made (one all-gather of every rank's box list, before
// training), so no save needs a collective.
//
// The multi-rank commit (the same for synchronous and asynchronous saves):
//   1. every rank snapshots its boxes into host memory (the only part that blocks training
//      under --async-checkpoint), then, on its writer thread, writes
//      step_N.tmp/rank_RRRRR.safetensors, fsyncs it and the folder, and publishes its shard
//      entries as the marker step_N.tmp/rank_RRRRR.done (written to a temporary name, fsynced,
//      renamed: a marker exists only complete). A rank that fails writes rank_RRRRR.failed
//      with its reason instead.
//   2. the agreement: rank 0's writer thread waits until every rank's marker exists (polling
//      the folder; a .failed marker or the timeout aborts the commit, leaving the .tmp folder,
//      and reports why). It uses no communicator, so it can never race or reorder the
//      training collectives (which the main thread issues meanwhile), and it needs no thread
//      support from MPI or NCCL.
//   3. rank 0 merges the entries into index.json (written to index.json.tmp, fsynced,
//      renamed), renames step_N.tmp to step_N, fsyncs DIR, writes `latest` (latest.tmp,
//      fsync, rename, fsync DIR), then removes the oldest committed checkpoints beyond
//      --keep-checkpoints (index.json first, so a half-removed folder is never loadable).
// A crash at any moment leaves the previous `latest` and its folder intact: before step 3's
// folder rename nothing a loader reads has changed; after it, `latest` still names the previous
// checkpoint until its own rename.
// Requires a folder every rank can see (a shared file system across nodes), as
// torch.distributed.checkpoint's FileSystemWriter does.
#pragma once

#include "runtime/ckpt/Index.h"
#include "runtime/comm/Communicator.h"
#include "runtime/exec/ProgramExecutor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::ckpt {

/// How saves are made.
struct SaveOptions {
  std::string root;             // the checkpoint root (created if missing)
  bool async = false;           // --async-checkpoint: write on a background thread
  int64_t keep = 0;             // --keep-checkpoints K: keep the newest K committed (0: all)
  double timeoutSeconds = 300;  // how long rank 0 waits for the other ranks' markers
  int64_t blockBytes = kDefaultBlockBytes;  // CRC block size (Index.h)
};

/// The folder name of step `step`'s checkpoint: "step_" and 8 digits ("step_00000010").
std::string stepFolderName(int64_t step);

/// Saves checkpoints of one executor's state; see the file comment. One save in flight at a
/// time per rank: a save that starts while the previous one is still writing first waits for
/// it (that wait counts as blocked time).
class Checkpointer {
 public:
  /// Collective over `world` (every rank of the program's mesh calls it at the same point;
  /// null: one rank): computes and agrees on the boxes this rank writes. Creates the root.
  /// Throws CheckpointError when the root cannot be created or is not a folder.
  Checkpointer(const rt::ProgramExecutor& ex, rt::Communicator* world, SaveOptions options);
  /// Waits for a save in flight (errors are printed to stderr, not thrown).
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  /// Saves the executor's current Parameter and State buffers as checkpoint `step` with the
  /// loop's state `trainer` (rank 0's goes into the index; it must hold "step": step).
  /// Synchronous: returns once the checkpoint is committed (rank 0) or this rank's shards and
  /// marker are durable (other ranks). Asynchronous: returns after the snapshot. Returns the
  /// seconds the caller was blocked. Throws CheckpointError for an error of this save
  /// (synchronous) or of the previous asynchronous one. Saving the step saved last again
  /// (the loop's periodic save and its final one at the same step) only waits for that save.
  double save(int64_t step, const nlohmann::json& trainer);

  /// Blocks until the save in flight is durable on this rank (rank 0: committed); rethrows its
  /// error. No-op when none is in flight.
  void wait();

  /// Without blocking: one line per save that became durable since the last call, e.g.
  /// "checkpoint step 10 durable: 1.2 MB from 4 ranks in 0.03 s (blocked 0.002 s) -> 'DIR/step_00000010'"
  /// (rank 0 only; other ranks get none). Throws CheckpointError for a save that failed.
  std::vector<std::string> poll();

  /// Bytes this rank writes per save (its boxes).
  int64_t bytesPerSave() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// How a checkpoint is loaded.
struct LoadOptions {
  /// --allow-partial: load the tensors both the checkpoint and the program have, name the
  /// others in LoadResult::notes, and leave the program's other buffers as they are
  /// (initialised). Otherwise (strict) a tensor missing from the checkpoint or one the
  /// program does not have is an error listing all of them.
  bool allowPartial = false;
};

/// What loadCheckpoint did.
struct LoadResult {
  std::string dir;            // the checkpoint folder loaded
  Index index;                // its index (trainer state in index.trainer)
  std::vector<std::string> notes;  // e.g. "skipped 'DIR/step_00000020.tmp': a save that did not commit"
  ReadStats stats;            // this rank's reads
};

/// The checkpoint folder `path` names: `path` itself when it holds index.json, else the folder
/// `path`/latest names (a checkpoint root). Notes (optional) receive one line per partial
/// (.tmp) folder of the root newer than `latest`, which is skipped. Throws CheckpointError when
/// neither exists, `latest` is malformed or names a folder outside the root or without index.json,
/// and, naming exactly what is there instead, when a path is a file, FIFO or link loop where a
/// folder or index.json belongs, or the folder reached is an uncommitted save (a name ending in
/// ".tmp", given or reached through `latest`, "..", or a link): such a folder is never loaded.
/// Never blocks on a FIFO.
std::string resolveCheckpoint(const std::string& path, std::vector<std::string>* notes = nullptr);

/// Collective over `world` (null: one rank): loads the checkpoint `path` names
/// (resolveCheckpoint) into the executor's Parameter and State buffers, each rank reading only
/// the byte ranges of its own boxes (Index.h readRegion), whatever plan and world size saved
/// it. Padding elements are set to zero. A weights-only checkpoint (optimizerState false) sets
/// the State buffers to zero. Every rank agrees on the outcome: a problem on any rank (a
/// missing or unexpected tensor, a global shape or dtype that differs from the program's, a
/// corrupt file) makes every rank throw CheckpointError with the same message listing the
/// problems.
LoadResult loadCheckpoint(rt::ProgramExecutor& ex, rt::Communicator* world, const std::string& path,
                          const LoadOptions& options = {});

}  // namespace tessel::ckpt
