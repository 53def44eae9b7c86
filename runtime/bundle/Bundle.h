// AOT bundles: a compiled program in a folder that the runtime alone can train.
//
// Promise: a bundle folder holds program.json + kernels.cpp (saveProgram), kernels.so (the
// compiled kernel library) and bundle.json (format version, Tessel version, model config,
// the training flags the program was compiled for, the plan with its mesh, and kernels.so's
// checksum). The program is every rank's program (data parallelism is SPMD): a bundle of a
// plan for N ranks runs under a launcher of N ranks (`mpirun -np N tessel-run DIR`). writeBundle
// builds it in a temporary sibling folder and renames it into place, so a reader never sees
// a half-written bundle, and leaves no temporary folder behind on failure or SIGINT/SIGTERM
// (runtime/bundle/BundleFolder.h). readBundle refuses, with a message naming the file, a
// missing folder or file, malformed JSON, another format version, an integer field that is not
// a JSON integer in range (naming the field), a kernels.so whose checksum differs, or a
// program.json, kernels.cpp or recorded bundle.json field (model, config, train_flags,
// optimizer, plan) that differs from the program checksum. No MLIR here.
//
// A bundle of a program lowered for the CUDA target too (Program::cudaSource, launches on
// the kernel steps) also holds kernels.cu (saveProgram), kernels.cubin (NVRTC's ELF for one
// arch, e.g. sm_90) and kernels.ptx (the same module as PTX, which the driver can JIT for a
// newer arch), with the arch and their checksums under "cuda" in bundle.json. Such a bundle
// still runs on the CPU (kernels.so, the same steps); a GPU runs it from the cubin.
#pragma once

#include "runtime/exec/Program.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

/// The `format` field writeBundle writes and readBundle accepts. Version 3: program.json with
/// kernel signatures and collective bucket numbers (runtime/exec/Program.h, program format 3
/// and 4), and "plan" in bundle.json (the mesh, microsteps, bucket size and overlap).
/// Version 4: the program checksum also covers bundle.json's model, config, train_flags,
/// optimizer and plan (canonical JSON), so an edit of what tessel-run believes is damage.
/// Version 5: "plan" also records the fully sharded axis (FSDP / ZeRO, with HSDP the batch is
/// split over it and the batch axis), which a version-4 reader would not split the batch over.
inline constexpr int kBundleFormatVersion = 5;
/// The Tessel version recorded in (and required of) bundle.json.
inline constexpr const char* kTesselVersion = "0.1.0";

/// The parallelism plan a bundle was compiled for (dsl/Plan.h, flattened): bundle.json's
/// "plan". Its mesh is the program's (Program::mesh) when the program has one; otherwise every
/// axis other than the batch axes has size 1 (runtime/bundle/BundleConfig.h).
struct BundlePlan {
  std::vector<std::pair<std::string, int64_t>> mesh{{"dp", 1}};  // axes in mesh order
  /// The axis the global batch is sharded over ("": none): Plan::batch_axis, the shard_batch
  /// axis, or without one the fully sharded axis.
  std::string batchAxis = "dp";
  /// The fully sharded (FSDP / ZeRO) axis, Plan::fully_shard_axis ("": none). It splits the
  /// batch too: with a shard_batch axis (HSDP, e.g. dp=2,fsdp=2) the batch is split over both.
  std::string fullyShardAxis;
  int64_t microsteps = 1;        // gradient accumulation: microsteps per optimizer step
  double bucketMb = 25.0;        // gradient all-reduce bucket capacity, MiB
  bool overlap = true;           // all-reduces start during the backward pass
  /// Ranks the plan runs on: the product of the mesh's axis sizes.
  int64_t ranks() const;
  /// Every axis the batch is split over, in mesh order: batchAxis and fullyShardAxis (each
  /// once; axes the mesh lacks are left out).
  std::vector<std::string> batchAxes() const;
  /// Ranks the batch is split over: the product of the batchAxes() sizes (1 without any).
  int64_t dp() const;
  /// The mesh in --plan syntax, e.g. "dp=2".
  std::string meshText() const;
};

/// What bundle.json records besides the format and Tessel versions.
struct BundleInfo {
  std::string model;        // e.g. "gpt"
  nlohmann::json config;    // the model's configuration (layers, channels, heads, seq, vocab)
  int64_t seq = 0;          // --seq the program was compiled for (tokens per row)
  int64_t batch = 0;        // --batch the program was compiled for
  std::string optimizer;    // the optimizer built into @train_step
  BundlePlan plan;          // how the program is laid over the ranks
  std::string kernelsChecksum;  // kernelLibraryChecksum of kernels.so (set by writeBundle)
  std::string cpuFlags;         // hostCpuFlags() where kernels.so was built (set by writeBundle)
  /// The checksum of program.json, kernels.cpp and the fields above (set by writeBundle and
  /// readBundle): with kernelsChecksum, what identifies a bundle across ranks.
  std::string programChecksum;
};

/// The compiled CUDA module of a bundle (codegen/Nvrtc.h compileCuda of Program::cudaSource).
struct CudaBinary {
  std::string arch;   // the cubin's target, "sm_XY" (e.g. "sm_90")
  std::string cubin;  // the ELF cubin's bytes
  std::string ptx;    // the PTX text of the same module (may be empty: no JIT fallback)
};

/// A bundle read back: the validated program, its metadata and the verified library's path.
struct Bundle {
  Program program;
  BundleInfo info;
  std::string kernelsPath;  // dir/kernels.so, checksum verified
  std::optional<CudaBinary> cuda;  // set iff the program has CUDA kernels; checksums verified
  /// Why kernels.so cannot run on this CPU (it was built for features this CPU lacks), or
  /// empty. Only a CPU run loads kernels.so: see requireCpuKernels.
  std::string cpuKernelsProblem;
};

/// Throws std::runtime_error with bundle.cpuKernelsProblem if kernels.so cannot run on this
/// CPU (instead of dying of SIGILL in the first kernel). Call before loading kernels.so.
void requireCpuKernels(const Bundle& bundle);

/// Writes the bundle folder `dir` (replacing an existing one): saveProgram(program), a copy of
/// the library at `kernelLibrary` as kernels.so, with `cuda` kernels.cubin and kernels.ptx,
/// and bundle.json. `cuda` must be given exactly when program.cudaSource is non-empty, with a
/// non-empty cubin whose arch is "sm_" and digits. Throws std::runtime_error naming the path
/// on any I/O failure or inconsistency; on failure `dir` is left as it was.
void writeBundle(const Program& program, const std::string& kernelLibrary, BundleInfo info,
                 const std::string& dir, const CudaBinary* cuda = nullptr);

/// Reads and verifies a bundle folder; throws std::runtime_error naming the offending file
/// (and the field, for a model config or plan that disagrees with program.json: see
/// runtime/bundle/BundleConfig.h).
/// A kernels.so built for CPU features this CPU lacks is not an error here (a GPU run does
/// not load it); it is recorded in cpuKernelsProblem.
Bundle readBundle(const std::string& dir);

}  // namespace tessel::rt
