// Durable small files and folders for checkpoints: what the save's commit (Commit.cpp) and
// `tessel ckpt import` (runtime/tools/tessel/CkptConvert.cpp) both write: index.json, the
// markers and `latest`.
#pragma once

#include <string>

namespace tessel::ckpt {

/// Writes `text` to `path` through "<path>.tmp" (written, fsynced, renamed), then fsyncs the
/// folder. The temporary is opened without following a symbolic link and without blocking, and
/// must be a regular file: a FIFO, folder or device standing at "<path>.tmp" is refused
/// ("cannot create 'X.tmp': it is a FIFO, not a regular file"), never written through or waited
/// on. Throws CheckpointError naming the path and the cause; never leaves a partial file under
/// `path`.
void writeFileAtomically(const std::string& path, const std::string& text);

/// fsyncs folder `dir` (making renames and creations in it durable). Throws CheckpointError
/// naming the folder.
void syncFolder(const std::string& dir);

}  // namespace tessel::ckpt
