// safetensors files: the tensor exchange format of Tessel (weights exported to PyTorch,
// later checkpoint shards).
//
// Format (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets":
// [begin, end]}, "__metadata__": {str: str}}, then the raw little-endian data. Offsets are
// relative to the end of the header. No code is ever executed on load.
//
// Promise: the reader bounds-checks every header field (header length within the file,
// offsets inside the data area, ordered and non-overlapping, byte size equal to
// dtype size x element count) and throws tessel::SafeTensorsError naming the file and the
// tensor; the writer writes to "<path>.tmp", fsyncs, then renames, so a partially written
// file never carries the final name.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel {

/// Thrown on I/O failure or a malformed file. what() names the file and the cause.
struct SafeTensorsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Element types we read and write: "F32", "F64", "BF16", "I32", "I64", "F16" (safetensors
/// names; F16 is IEEE binary16).
enum class StDType { F32, F64, BF16, I32, I64, F16 };

/// Bytes per element of a dtype.
size_t dtypeSize(StDType dtype);
/// "F32" etc.
const char* dtypeName(StDType dtype);
/// The dtype named `name` ("F32" etc., case-sensitive as in the format); false when there is none.
bool dtypeFromName(std::string_view name, StDType& out);

/// One named tensor: its dtype, shape and raw little-endian bytes.
struct StTensor {
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  static StTensor fromF32(std::vector<int64_t> shape, const std::vector<float>& values);
  static StTensor fromI32(std::vector<int64_t> shape, const std::vector<int32_t>& values);
  static StTensor fromF64(std::vector<int64_t> shape, const std::vector<double>& values);
  /// Values converted to double (any dtype; F16 and BF16 widen exactly).
  std::vector<double> toF64() const;
  int64_t numel() const;
};

/// A whole file: tensors by name (sorted, as the format's writers do) plus string metadata.
struct SafeTensorsFile {
  std::map<std::string, StTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Writes atomically (tmp file, fsync, rename). Throws SafeTensorsError on failure, and when
/// `path` (or "<path>.tmp") exists and is not a regular file (a device, FIFO, socket, folder, or a
/// link to one): it is never replaced nor written into.
void writeSafeTensors(const std::string& path, const SafeTensorsFile& file);

/// Absolute byte range [first, second) of each tensor's data in a written file, by name
/// (offsets from the start of the file: 8 + header length + the header's data_offsets).
using StByteRanges = std::map<std::string, std::pair<int64_t, int64_t>>;

/// writeSafeTensors that also returns where each tensor's bytes lie in the file (what a
/// checkpoint index records as a shard's byte_range). `durable` false skips the fsyncs of the
/// file and its folder (the write is still tmp + rename). Throws SafeTensorsError on failure.
StByteRanges writeSafeTensorsWithOffsets(const std::string& path, const SafeTensorsFile& file,
                                         bool durable = true);

/// One tensor of a header, without its data.
struct StTensorInfo {
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // absolute byte offsets of its data in the file, [begin, end)
};

/// A validated header: what readSafeTensors checks before reading any data.
struct SafeTensorsHeader {
  std::map<std::string, StTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  int64_t fileSize = 0;   // bytes of the whole file
  int64_t dataBegin = 0;  // absolute offset of the data area: 8 + header length
};

/// Validates a header held in memory: `prefix` is the file's first `prefixSize` bytes (at least
/// the 8-byte length and the header it announces), `fileSize` the size of the whole file. Every
/// check of readSafeTensors applies (length within the file and the 100 MB cap, JSON object,
/// no duplicate names, known dtypes, byte sizes equal to dtype size x element count, tensors
/// tiling the data area to the end of the file). `path` names the file in errors. Throws
/// SafeTensorsError.
SafeTensorsHeader parseSafeTensorsHeader(const void* prefix, size_t prefixSize, uint64_t fileSize,
                                         const std::string& path);

/// Reads and validates only the header of a file (parseSafeTensorsHeader), not its data.
/// Throws SafeTensorsError.
SafeTensorsHeader readSafeTensorsHeader(const std::string& path);

/// Reads and validates a file. Throws SafeTensorsError on any malformed field, and at once
/// (never blocking) when `path` is not a regular file (readSafeTensorsHeader too).
SafeTensorsFile readSafeTensors(const std::string& path);

}  // namespace tessel
