// Internal to runtime/ckpt: one save's work after the snapshot (Checkpoint.h's commit steps
// 1-3), shared by the Checkpointer (Checkpointer.cpp, which snapshots and runs it inline or on
// the writer thread) and Commit.cpp (which writes the shard file and marker and, on rank 0,
// waits for the markers and commits); and how a buffer is described in the index (indexDType,
// indexKind: Load.cpp compares the two).
//
// Stale state from an earlier run: a crashed run can leave step_N.tmp with shard files, markers
// and even index.json in it. The folder name stays step_N.tmp (the documented layout, which
// resolveCheckpoint skips), but every marker carries the save's id (a 64-bit number rank 0
// draws when the Checkpointer is made, agreed with the box plan, plus the save's sequence
// number), and rank 0 accepts only markers of this save. Each rank replaces its own shard file
// (written as a temporary, renamed); once every marker of this save is in, rank 0 removes
// whatever else the folder holds (an old run's files of ranks that write nothing now, old
// markers, temporaries) before it writes index.json. A save of a step that is already
// committed (a resumed run saving the step it loaded) swaps the folders atomically
// (renameat2 RENAME_EXCHANGE) and removes the old one after `latest` is updated. Where the file
// system refuses the exchange (EINVAL: NFS, for one) it renames the old one away first; a
// crash between that rename and the next leaves `latest` naming a missing folder, the one
// window the exchange closes.
#pragma once

#include "runtime/ckpt/DurableFiles.h"  // writeFileAtomically, syncFolder
#include "runtime/ckpt/Index.h"
#include "runtime/exec/Program.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessel::ckpt::detail {

/// One box this rank writes, snapshotted into host memory.
struct SnapshotBox {
  std::string name;               // the tensor
  std::vector<int64_t> offsets, lengths;
  std::vector<uint8_t> bytes;     // row-major over lengths
};

/// A tensor's global description (what index.json says besides its shards).
struct TensorMeta {
  std::string kind;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
};

/// Everything a save needs after the snapshot; owned by the job (the writer thread's copy).
struct SaveJob {
  std::string root;
  int64_t step = 0;
  std::string saveId;   // this save's id (see the file comment)
  int rank = 0, world = 1;
  int64_t blockBytes = kDefaultBlockBytes;
  double timeoutSeconds = 300;
  int64_t keep = 0;
  nlohmann::json trainer;                    // rank 0: the index's "trainer"
  std::map<std::string, TensorMeta> tensors;  // this rank's program's Parameter/State tensors
  std::vector<SnapshotBox> boxes;            // this rank's boxes, in plan order
  double blockedSeconds = 0;                 // the snapshot's time, for the durable line
  bool async = false;                        // on the writer thread (else the caller waits for all of it)
};

/// Runs the save: this rank's shard file and marker; on rank 0 also the agreement and the
/// commit. Returns rank 0's durable line ("checkpoint step 10 durable: ..."), "" elsewhere.
/// Throws CheckpointError (after writing this rank's .failed marker where it can).
std::string runSave(SaveJob job);

/// The key of a box in its shard file: `name` for the whole tensor, else "name@o0,o1,...".
std::string boxKey(const std::string& name, const std::vector<int64_t>& offsets,
                   const std::vector<int64_t>& lengths, const std::vector<int64_t>& shape);

/// "rank_00003" and the like (the stem of a rank's shard file and markers).
std::string rankStem(int rank);

/// "<root>/step_N.tmp".
std::string tmpFolder(const std::string& root, int64_t step);

/// The index's dtype of a buffer's dtype (Index.h TensorEntry::dtype).
StDType indexDType(rt::DType dtype);

/// The index's kind of a Parameter ("parameter") or State ("optimizer_state") buffer.
const char* indexKind(rt::BufferKind kind);

/// Removes the committed checkpoints of `root` beyond the newest `keep` (index.json first, so a
/// half-removed folder is never loadable); never the folder `latest` names. 0 keeps all.
void pruneCheckpoints(const std::string& root, int64_t keep);

}  // namespace tessel::ckpt::detail
