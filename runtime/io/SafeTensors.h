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
#include <vector>

namespace tessel {

/// Thrown on I/O failure or a malformed file. what() names the file and the cause.
struct SafeTensorsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Element types we read and write: "F32", "F64", "BF16", "I32", "I64" (safetensors names).
enum class StDType { F32, F64, BF16, I32, I64 };

/// Bytes per element of a dtype.
size_t dtypeSize(StDType dtype);
/// "F32" etc.
const char* dtypeName(StDType dtype);

/// One named tensor: its dtype, shape and raw little-endian bytes.
struct StTensor {
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  static StTensor fromF32(std::vector<int64_t> shape, const std::vector<float>& values);
  static StTensor fromI32(std::vector<int64_t> shape, const std::vector<int32_t>& values);
  static StTensor fromF64(std::vector<int64_t> shape, const std::vector<double>& values);
  /// Values converted to double (any dtype).
  std::vector<double> toF64() const;
  int64_t numel() const;
};

/// A whole file: tensors by name (sorted, as the format's writers do) plus string metadata.
struct SafeTensorsFile {
  std::map<std::string, StTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Writes atomically (tmp file, fsync, rename). Throws SafeTensorsError on failure.
void writeSafeTensors(const std::string& path, const SafeTensorsFile& file);

/// Reads and validates a file. Throws SafeTensorsError on any malformed field.
SafeTensorsFile readSafeTensors(const std::string& path);

}  // namespace tessel
