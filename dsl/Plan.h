// The parallelism plan: HOW a model is laid over the ranks (examples' plans.h); it never
// changes WHAT is computed. Included by dsl/tessel.h; no MLIR.
//
//   tessel::Plan plan = tessel::Plan(tessel::Mesh{{"dp", 4}})
//                           .shard_batch("dp")   // data parallelism over the 4 ranks
//                           .bucket_mb(25)       // gradient all-reduce buckets
//                           .grad_accumulation(2)
//                           .overlap(true);
//   tessel::Program p = model.compile({.plan = plan});
//
// Every call records its source line; a plan that cannot run (a mesh whose size is not the
// job's world size, a global batch the data-parallel degree does not divide, an axis the
// compiler does not support yet) is a tessel::ModelError at the plan's line. The trainer's
// `--plan dp=4` builds the same plan from the command line (parsePlan), and its errors name
// the flag and the column of the offending item.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

/// Where a plan call was written: the user's file, line and column (a std::source_location),
/// or for a plan given on the command line, "--plan" and the 1-based column in its text.
struct PlanSite {
  std::string file;
  int line = 0;
  int column = 0;
  static PlanSite of(const std::source_location& loc) {
    return {loc.file_name(), static_cast<int>(loc.line()), static_cast<int>(loc.column())};
  }
};

/// The most ranks a mesh may have (and so each of its axes): 2^20, far above any job, and
/// small enough that products of sizes and batch splits cannot overflow int64.
inline constexpr int64_t kMaxMeshRanks = int64_t{1} << 20;

/// The logical array of ranks with named axes, e.g. Mesh{{"dp", 2}, {"tp", 2}}; its size is
/// the product of the axis sizes. Throws ModelError at its line for an empty or duplicate
/// axis name, a size outside [1, 2^20] or a product of sizes above 2^20 (kMaxMeshRanks).
class Mesh {
 public:
  Mesh(std::initializer_list<std::pair<std::string, int64_t>> axes,
       std::source_location loc = std::source_location::current());
  Mesh(std::vector<std::pair<std::string, int64_t>> axes, PlanSite site);
  const std::vector<std::pair<std::string, int64_t>>& axes() const { return axes_; }
  /// The size of `axis`, or 0 if the mesh has no such axis.
  int64_t size(const std::string& axis) const;
  /// Total ranks: the product of the axis sizes.
  int64_t size() const;
  const PlanSite& site() const { return site_; }

 private:
  std::vector<std::pair<std::string, int64_t>> axes_;
  PlanSite site_;
};

/// A parallelism plan on a mesh. The default plan is one rank: the single-device program.
class Plan;
Plan parsePlan(const std::string& text, int64_t microsteps);

class Plan {
 public:
  Plan();
  explicit Plan(Mesh mesh, std::source_location loc = std::source_location::current());

  /// Data parallelism: split the global batch (the inputs' leading dimension) over `axis`;
  /// each rank holds a replica of every parameter, and gradients are averaged over the axis.
  /// Throws ModelError here if the mesh has no such axis.
  Plan& shard_batch(const std::string& axis,
                    std::source_location loc = std::source_location::current());
  /// Gradient all-reduce bucket capacity in MiB (default 25, as torch DDP's bucket_cap_mb);
  /// must be > 0 and finite.
  Plan& bucket_mb(double mb, std::source_location loc = std::source_location::current());
  /// Gradient accumulation: `microsteps` forward/backward passes of B / (dp * microsteps)
  /// rows per optimizer step, synchronising gradients only on the last (>= 1; default 1).
  Plan& grad_accumulation(int64_t microsteps,
                          std::source_location loc = std::source_location::current());
  /// Start each bucket's all-reduce during the backward pass (default true); false places
  /// all communication after it (exposed), for comparison.
  Plan& overlap(bool on, std::source_location loc = std::source_location::current());

  const Mesh& mesh() const { return mesh_; }
  /// Ranks the batch is split over (1 without shard_batch).
  int64_t dp() const;
  const std::string& batch_axis() const { return batchAxis_; }
  double bucket_mb() const { return bucketMb_; }
  int64_t microsteps() const { return microsteps_; }
  bool overlap() const { return overlap_; }

  /// Startup checks against the job: the mesh size must equal `worldSize` (else ModelError
  /// at the mesh's line), and every mesh axis other than the batch axis must have size 1
  /// (tensor and pipeline parallelism are not supported yet; ModelError at the mesh's line).
  void check_world_size(int64_t worldSize) const;
  /// The global batch must be divisible by dp() * microsteps() (ModelError at the line of
  /// shard_batch, or of grad_accumulation when it is the microsteps that do not divide).
  void check_batch(int64_t globalBatch) const;
  /// "dp=4" / "dp=2 microsteps=2 bucket_mb=25 overlap=on" (for logs and --explain).
  std::string describe() const;

 private:
  friend Plan parsePlan(const std::string& text, int64_t microsteps);
  Mesh mesh_;
  PlanSite site_, batchSite_, accumulationSite_;
  std::string batchAxis_;
  double bucketMb_ = 25.0;
  int64_t microsteps_ = 1;
  bool overlap_ = true;
};

/// The plan of the trainer's --plan flag: comma-separated `axis=size` items, e.g. "dp=4" or
/// "dp=2,tp=2"; the mesh has those axes in order and the batch is sharded over "dp" when
/// present. Throws ModelError ("--plan:1:<column>: error: ...") for malformed items,
/// duplicate axes, sizes < 1 and unknown axis names (dp, tp, pp are known). tp and pp parse,
/// and check_world_size rejects them (size > 1) as not supported yet. `microsteps` (>= 1,
/// the --grad-accumulation flag) is the plan's grad_accumulation.
Plan parsePlan(const std::string& text, int64_t microsteps = 1);

}  // namespace tessel
