// AOT bundles: a compiled program in a folder that the runtime alone can train.
//
// Promise: a bundle folder holds program.json + kernels.cpp (saveProgram), kernels.so (the
// compiled kernel library) and bundle.json (format version, Tessel version, model config,
// the training flags the program was compiled for, and kernels.so's checksum). writeBundle
// builds it in a temporary sibling folder and renames it into place, so a reader never sees
// a half-written bundle. readBundle refuses, with a message naming the file, a missing
// folder or file, malformed JSON, another format version, or a kernels.so whose checksum
// differs. No MLIR here.
#pragma once

#include "runtime/exec/Program.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace tessel::rt {

/// The `format` field writeBundle writes and readBundle accepts.
inline constexpr int kBundleFormatVersion = 1;
/// The Tessel version recorded in (and required of) bundle.json.
inline constexpr const char* kTesselVersion = "0.1.0";

/// What bundle.json records besides the format and Tessel versions.
struct BundleInfo {
  std::string model;        // e.g. "gpt"
  nlohmann::json config;    // the model's configuration (layers, channels, heads, seq, vocab)
  int64_t seq = 0;          // --seq the program was compiled for (tokens per row)
  int64_t batch = 0;        // --batch the program was compiled for
  std::string optimizer;    // the optimizer built into @train_step
  std::string kernelsChecksum;  // kernelLibraryChecksum of kernels.so (set by writeBundle)
  std::string cpuFlags;         // hostCpuFlags() where kernels.so was built (set by writeBundle)
};

/// A bundle read back: the validated program, its metadata and the verified library's path.
struct Bundle {
  Program program;
  BundleInfo info;
  std::string kernelsPath;  // dir/kernels.so, checksum verified
};

/// Writes the bundle folder `dir` (replacing an existing one): saveProgram(program), a copy of
/// the library at `kernelLibrary` as kernels.so, and bundle.json. Throws std::runtime_error
/// naming the path on any I/O failure; on failure `dir` is left as it was.
void writeBundle(const Program& program, const std::string& kernelLibrary, BundleInfo info,
                 const std::string& dir);

/// Reads and verifies a bundle folder; throws std::runtime_error naming the offending file.
Bundle readBundle(const std::string& dir);

}  // namespace tessel::rt
