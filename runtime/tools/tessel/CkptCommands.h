// The parts of `tessel ckpt` (Ckpt.cpp) shared with its conversions (CkptConvert.cpp).
#pragma once

#include <string>

namespace tessel::cli {

/// The checkpoint folder `path` names (ckpt::resolveCheckpoint: the folder itself, or what a
/// root's `latest` names), printing one line on stderr per uncommitted save it skipped.
/// Throws ckpt::CheckpointError.
std::string resolveCheckpointNoting(const std::string& path);

/// `tessel ckpt export DIR OUT`: every parameter (and with `optimizerState` every optimizer
/// state tensor) of the checkpoint `dir` names, whole, in its stored dtype and global shape,
/// into one safetensors file `out` with metadata {"format": "pt"} (as --export-params
/// writes). Returns the exit status; throws CheckpointError / SafeTensorsError.
int exportCheckpoint(const std::string& dir, const std::string& out, bool optimizerState);

/// `tessel ckpt import MODEL DIR`: writes the tensors of the safetensors file `model` as a
/// step-0 weights-only checkpoint DIR/step_00000000 (kind "parameter", F32; F64, BF16 and
/// F16 converted, integer tensors refused) and DIR/latest, atomically (a .tmp folder, fsync,
/// rename; then `latest` by rename). Refuses a DIR that already holds a checkpoint, and,
/// before creating anything, a tensor name that is empty or holds a control character, more
/// dimensions than an index holds, and (unless `allowNonFinite`) a NaN or infinity, naming the
/// tensor and its first such element. Returns the exit status; throws CheckpointError /
/// SafeTensorsError.
int importSafeTensors(const std::string& model, const std::string& dir, bool allowNonFinite = false);

}  // namespace tessel::cli
