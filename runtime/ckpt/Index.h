// The checkpoint index: what a distributed checkpoint holds and where each byte lies.
//
// A checkpoint is one folder (runtime/ckpt/Checkpoint.h writes it):
//   step_00000010/
//     index.json                  this file's Index, written last (the commit)
//     rank_00000.safetensors      each writing rank's shards (safetensors; any reader opens them)
//     rank_00001.safetensors ...
// and a checkpoint root holds several of them plus `latest` (the folder name of the newest
// committed one). Format (JSON, version 1):
//   {"format": "tessel-checkpoint", "version": 1, "step": 10, "optimizer_state": true,
//    "tensors": {"wte.weight": {"kind": "parameter", "dtype": "F32", "shape": [256, 32],
//       "shards": [{"offsets": [0, 0], "lengths": [128, 32], "file": "rank_00000.safetensors",
//                   "key": "wte.weight@0,0", "byte_range": [1234, 17618],
//                   "block_bytes": 1048576, "crc32": [305419896]}, ...]}, ...},
//    "trainer": {...}}
// A shard is a box of the global tensor: the elements [offsets[d], offsets[d] + lengths[d]) of
// every dimension d, stored row-major (C order) as tensor `key` of `file`, whose bytes are
// [byte_range[0], byte_range[1]) of that file (absolute file offsets, header included, so a
// reader reads exactly those bytes without parsing the rest). The shards of a tensor cover it
// exactly once. `crc32` holds the zlib CRC-32 of each consecutive `block_bytes` block of the
// shard's bytes (the last one shorter), so a reader that needs part of a shard reads and
// verifies only the blocks covering that part. "kind" is "parameter" (trainable, f32 master
// weights under mixed precision) or "optimizer_state" (a State buffer: "<param>:exp_avg",
// "<param>:exp_avg_sq", "<param>:momentum_buffer"). "optimizer_state": false marks a checkpoint
// of weights only (`tessel ckpt import`): loading it starts the optimizer state at zero.
// "trainer" is the loop's state (runtime/train/Checkpointing.h writes and reads it; this
// layer checks only that it is an object whose "step" equals the index's step).
//
// Promise: parseIndex never trusts its input. Every number is checked before use (integers
// only, no negatives, shapes and offsets within int64 without overflow, element counts times
// dtype size equal to the byte range), every file name is a plain name inside the folder (no
// '/', '\\', "..", leading '.', NUL or control characters), every shard lies inside its tensor,
// the shards of a tensor neither overlap nor leave a gap, and the CRC list has one entry per
// block. Any violation throws CheckpointError naming the index file, the tensor and the field.
// Loading never executes anything (plain JSON and raw little-endian numbers).
#pragma once

#include "runtime/io/SafeTensors.h"  // StDType, SafeTensorsError

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessel::ckpt {

/// Thrown for a checkpoint that cannot be written or read: I/O failure, a malformed or hostile
/// index or shard file, a checksum mismatch, a missing tensor. what() names the file (and the
/// tensor and field where there is one) and the cause, on one line.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The index's format version this build writes and reads.
inline constexpr int kIndexVersion = 1;
/// Default CRC block size in bytes (1 MiB): a partial read reads at most one block too many at
/// each end of each contiguous run it needs.
inline constexpr int64_t kDefaultBlockBytes = int64_t{1} << 20;
/// The largest index.json parseIndex/readIndex accept, in bytes (256 MiB): beyond it the index
/// is refused as hostile rather than parsed.
inline constexpr int64_t kMaxIndexBytes = int64_t{256} << 20;
/// Most dimensions a tensor may have in an index (PyTorch's limit is 64 too).
inline constexpr size_t kMaxTensorRank = 64;

/// One stored box of a tensor (see the file comment).
struct ShardEntry {
  std::vector<int64_t> offsets;  // per dimension, the box's first global index
  std::vector<int64_t> lengths;  // per dimension, its extent (>= 1 each; empty boxes are never stored)
  std::string file;              // a plain file name inside the checkpoint folder
  std::string key;               // the tensor's name inside that safetensors file
  int64_t begin = 0, end = 0;    // byte_range: absolute offsets in `file`, end - begin = bytes
  int64_t blockBytes = kDefaultBlockBytes;
  std::vector<uint32_t> crc32;   // one per block of blockBytes bytes
  bool operator==(const ShardEntry&) const = default;
};

/// One logical tensor: its global shape and dtype and its shards.
struct TensorEntry {
  std::string kind = "parameter";  // "parameter" or "optimizer_state"
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;      // global shape ([] for a scalar: one element)
  std::vector<ShardEntry> shards;
  bool operator==(const TensorEntry&) const = default;
};

/// A whole index.json.
struct Index {
  int64_t step = 0;              // optimizer steps completed when the state was taken
  bool optimizerState = true;    // false: weights only (an import)
  std::map<std::string, TensorEntry> tensors;  // by logical name (the DSL's parameter names)
  nlohmann::json trainer = nlohmann::json::object();  // the loop's state; "step" == step
  bool operator==(const Index&) const = default;
};

/// Elements of a box or shape (1 for an empty shape). Throws CheckpointError on a negative
/// extent or an int64 overflow, naming `what`.
int64_t elementCount(const std::vector<int64_t>& extents, const std::string& what);

/// The index as JSON text (deterministic: keys sorted, shards in the order given).
std::string serializeIndex(const Index& index);

/// Parses and validates index text (the file comment's promise). `path` names the file in
/// errors. Throws CheckpointError.
Index parseIndex(const std::string& text, const std::string& path);

/// Reads `dir`/index.json (at most kMaxIndexBytes) and parseIndex-es it. Throws
/// CheckpointError for a missing, unreadable, oversized or invalid file, for one that is not a
/// regular file (a FIFO is refused without blocking), and when `dir` is named like a step
/// folder ("step_" and 8 or more digits, Checkpoint.h stepFolderName) of another step than
/// the index's "step".
Index readIndex(const std::string& dir);

/// CRC-32 (zlib's crc32, the polynomial of gzip and PNG) of `n` bytes.
uint32_t crc32Of(const void* data, size_t n);
/// The CRC list of a shard's bytes in blocks of `blockBytes` (ShardEntry::crc32).
std::vector<uint32_t> blockCrcs(const void* data, size_t n, int64_t blockBytes = kDefaultBlockBytes);

/// Counters of what readRegion read, for the "each rank reads only what it needs" checks.
struct ReadStats {
  int64_t bytesRead = 0;    // bytes read from shard files (whole CRC blocks)
  int64_t bytesNeeded = 0;  // bytes of the elements the caller asked for
  int64_t files = 0;        // distinct files opened
};

/// Copies the elements [offsets[d], offsets[d] + lengths[d]) of tensor `name` (a box of its
/// global shape) from the checkpoint in `dir` into `out`, row-major over the box, in the
/// tensor's dtype. Reads only the CRC blocks of the shards that intersect the box, verifies
/// each block's CRC, and checks each shard file's safetensors header against the index (the
/// key's dtype, shape and data offsets must give exactly byte_range) before using it. Throws
/// CheckpointError naming the file and tensor on any mismatch, short file or I/O error, and
/// for a box outside the tensor. `stats` (optional) accumulates what was read.
void readRegion(const std::string& dir, const Index& index, const std::string& name,
                const std::vector<int64_t>& offsets, const std::vector<int64_t>& lengths, void* out,
                ReadStats* stats = nullptr);

/// A box of a tensor: per dimension its first global index and its extent.
using Box = std::pair<std::vector<int64_t>, std::vector<int64_t>>;

/// readRegion for several disjoint boxes of one tensor at once: box i goes to outs[i]. A CRC
/// block that several boxes need (the q, k and v blocks of a fused weight split over tensor
/// parallelism can lie in one block) is read and checked once, so `stats` counts it once.
/// Throws CheckpointError as readRegion does, and when outs and boxes differ in number.
void readRegions(const std::string& dir, const Index& index, const std::string& name, const std::vector<Box>& boxes,
                 const std::vector<void*>& outs, ReadStats* stats = nullptr);

/// What verifyCheckpoint found.
struct VerifyReport {
  int64_t tensors = 0, shards = 0, files = 0, bytes = 0;
};

/// `tessel ckpt verify`: reads every shard of the checkpoint in `dir` in full, checks every
/// header against the index and every CRC block. Throws CheckpointError at the first problem,
/// naming the file and tensor.
VerifyReport verifyCheckpoint(const std::string& dir);

}  // namespace tessel::ckpt
