// The executable program format: what codegen produces and the runtime executes.
//
// Promise: a Program is plain data (no MLIR), saved as `program.json` plus the generated
// kernel source `kernels.cpp` (and, for a program lowered for the CUDA target too,
// `kernels.cu`) in one folder, so a program compiled on one machine runs on another through
// `runtime/` alone. Every buffer has a fixed size and, for temporaries, a
// fixed offset in one arena whose size the memory plan computed ahead of time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/comm/MeshAxis.h"  // defines: MeshAxis
#include "runtime/numeric/DType.h"

namespace tessel::rt {

/// What a buffer holds and who owns it.
enum class BufferKind {
  Parameter,  // trainable parameter: persistent, initialised by the runtime, checkpointed
  State,      // optimizer state: persistent, zero-initialised
  Input,      // a function argument the caller provides each call (tokens, lr, ...)
  Temp,       // an intermediate: lives in the arena at `offset`
  Coordinate, // an i32 scalar the executor fills once: this rank's index along
              // `coordinateAxes` of Program::mesh (row-major, listed axes outermost first)
              // times `coordinateStride` (tessel.mesh_coordinate: e.g. the first vocabulary
              // row of this rank's shard); 0 without a mesh
};

/// How one dimension of a sharded buffer lies in its global tensor (as #tessel.sharding's
/// split axes and blocks say, compiler/TesselDialect.td). The global dimension G is `blocks` equal blocks of G / blocks; each block is
/// split into P = product of the sizes of `axes` equal contiguous parts, and a rank holds part
/// p of every block, concatenated, where p is the row-major index of the rank's coordinates on
/// `axes` (listed outermost first). So the local dimension is G / P, and blocks = 1 is a plain
/// contiguous split; no axes (P = 1) is an unsplit dimension. A dimension that P does not
/// divide (blocks = 1 only) is padded: `padding` elements (0 <= padding < P) are appended to
/// G so that the local dimension is L = (G + padding) / P; a rank's local elements from
/// G - p * L on are padding, which belongs to no global element (zero in a parameter, never
/// exported).
struct ShardDim {
  std::vector<std::string> axes;  // mesh axes, outermost first; empty: not split
  int64_t blocks = 1;             // >= 1, dividing the local dimension
  int64_t padding = 0;            // elements appended to the global dimension; 0 unless uneven
  bool operator==(const ShardDim&) const = default;
};

/// One tensor-sized region of memory.
struct Buffer {
  std::string name;            // parameter/state/input name, or "%12" for temporaries
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major
  BufferKind kind = BufferKind::Temp;
  int64_t offset = 0;          // Temp only: byte offset in the arena (64-byte aligned)
  std::string init;            // Parameter: "normal", "zeros" or "ones"
  double stddev = 0.0;         // Parameter with "normal" init
  std::string location;        // the op that produced it, "file:line:col [path]"
  /// Parameter and State only: the global tensor this rank holds a shard of (`shape` is the
  /// local shard), and per dimension how it is split over Program::mesh (ShardDim). Both empty:
  /// not sharded, every rank of the mesh holds the whole tensor.
  std::vector<int64_t> globalShape;
  std::vector<ShardDim> sharding;
  /// Coordinate only: the mesh axes (outermost first) and the factor of the index.
  std::vector<std::string> coordinateAxes;
  int64_t coordinateStride = 1;

  int64_t numel() const;
  /// The elements of the global tensor (numel() when not sharded).
  int64_t globalNumel() const;
  /// True when some dimension is split over some axis.
  bool sharded() const;
  int64_t bytes() const { return numel() * dtypeBytes(dtype); }
  bool operator==(const Buffer&) const = default;
};

/// How a CUDA kernel is launched (codegen/CudaEmitter.h CudaLaunch): grid and block
/// dimensions (x, y, z; each >= 1, at most 1024 threads per block) and the dynamic shared
/// memory in bytes.
struct LaunchConfig {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t sharedBytes = 0;
  bool operator==(const LaunchConfig&) const = default;
};

/// One argument of a generated kernel as the kernel sees it: its shapes are compile-time
/// constants, so the buffer passed must have exactly this element type and element count.
/// A CUDA two-level sum's scratch (codegen/CudaEmitter.h) is shared by the function's sums
/// and sized for the largest, so for it (`atLeast`) `numel` is the least the kernel needs.
struct KernelArg {
  DType dtype = DType::F32;
  int64_t numel = 0;
  bool atLeast = false;  // "at_least" in program.json: the buffer may hold more elements
  bool operator==(const KernelArg&) const = default;
};

/// Call a generated kernel: `void symbol(void** args)` where args[i] is the base pointer of
/// buffer `args[i]` (outputs first, then inputs, as the emitter documents per kernel). In a
/// program with CUDA kernels (Program::cudaSource non-empty) the same symbol also names an
/// `extern "C" __global__` kernel with the same parameters, launched with `launch`.
struct KernelStep {
  std::string symbol;
  std::vector<int> args;
  std::string location;  // op location(s), for error messages and traces
  std::optional<LaunchConfig> launch;  // set exactly when the program has CUDA kernels
  bool operator==(const KernelStep&) const = default;
};

/// What a GEMM does to its product before storing it: an epilogue fused into the GEMM
/// (cuBLASLt's CUBLASLT_EPILOGUE_*, oneDNN's post-ops), so that the output is written once
/// instead of being re-read by a separate kernel. With P = op(A[b]) op(B[b]) (+ C[b] when
/// accumulate), per batch b, row i in [0, m), column j in [0, n):
///   pre[i, j]  = P[i, j] + bias[j]                          (bias: [n], or 0 without one)
///   preActivation[b][i, j] = pre[i, j]                      (the value GELU's gradient needs;
///                                                            cuBLASLt's GELU_AUX buffer)
///   C[b][i, j] = act(pre[i, j]) + residual[b][i, j]         (act: tanh-approximate GELU, as
///                                                            PyTorch's approximate="tanh", or
///                                                            the identity; residual or 0)
///   biasGradient[i] = sum over kk of op(A[b])[i, kk], summed over b too (cuBLASLt's BGRADA:
///                     the bias gradient of a weight gradient dW = dY^T X, where op(A) = dY^T)
/// Every buffer id is -1 when unused; all of them have C's dtype except biasGradient (f32).
/// preActivation and residual are [batch, m, n] with C's layout (stride strideC); they and
/// biasGradient never overlap A, B or C. A residual may not be combined with accumulate.
/// Run by both executors (CPU: runtime/exec/CpuGemm.h, oneDNN's bias and post-ops where they
/// apply, else GemmEpilogue.h; cuBLASLt: docs/gpu.md). Emitted by the compiler from
/// tessel.matmul_epilogue (passes: tessel-fuse-gemm-epilogues), which never fuses a bias, GELU
/// or residual into a pending partial sum (a row-parallel product still to be all-reduced:
/// the bias would be added once per rank).
struct GemmEpilogue {
  int bias = -1;
  bool gelu = false;
  int preActivation = -1;  // only with gelu
  int residual = -1;
  int biasGradient = -1;
  /// True when the epilogue does nothing (every field at its default).
  bool empty() const { return bias < 0 && !gelu && preActivation < 0 && residual < 0 && biasGradient < 0; }
  bool operator==(const GemmEpilogue&) const = default;
};

/// The CPU library that runs a GEMM step, chosen per shape and dtype by measurement when the
/// program is compiled (codegen's GEMM tuner, cached like the kernels) and shown by --explain.
/// Default: the executor's own choice (OpenBLAS), for programs compiled before the choice
/// existed. A GPU runs every GEMM with cuBLASLt whatever this says.
enum class GemmBackend { Default, OpenBlas, OneDnn };
/// "default", "openblas" or "onednn" (program.json's spelling).
const char* gemmBackendName(GemmBackend backend);

/// C[b] = op(A[b]) * op(B[b]) (+ C[b] if accumulate), then `epilogue`, row-major f32 or bf16
/// (A, B and C may differ; a bf16 GEMM accumulates in f32), b in [0, batch), with element
/// strides between batches (0 = shared, e.g. a weight). Executed with OpenBLAS or oneDNN on
/// the CPU (`backend`) and cublasLtMatmul on a GPU (runtime/cuda/CudaGemm.h).
struct GemmStep {
  int a = -1, b = -1, c = -1;
  bool transA = false, transB = false, accumulate = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  std::string location;
  GemmEpilogue epilogue;
  GemmBackend backend = GemmBackend::Default;
  bool operator==(const GemmStep&) const = default;
};

/// dst = src (same byte size); used where an assignment cannot be done in place.
struct CopyStep {
  int src = -1, dst = -1;
  bool operator==(const CopyStep&) const = default;
};

/// One half of an asynchronous all-reduce of a bucket of tensors over a group of ranks
/// (runtime/comm/Communicator.h). Start: packs `tensors` in order into the flat f32 buffer
/// `buffer` and issues the all-reduce, which runs while later steps compute. Wait: blocks
/// until it is complete and unpacks `buffer` into `tensors` (the reduced values). The start
/// and the wait of one bucket share `bucket` and `buffer`; a start precedes its wait.
/// Payload: the buffer's bytes, once per start.
/// An `inPlace` bucket (both halves set it; PyTorch DDP's gradient_as_bucket_view) has no
/// copies: its tensors are views of the buffer, each Temp's offset exactly where the packing
/// would have put it (tensor i at the buffer's offset plus the bytes of tensors 0 .. i-1, all
/// f32), so the steps that produce the start's tensors write the bucket directly, the
/// all-reduce runs on it in place and the wait's tensors read the reduced values where they
/// lie. For liveness the buffer holds the views' bytes from start to wait (tempLiveness); no
/// step between the start and the wait names the buffer or a view (the communicator owns
/// them), no step after the start names a start tensor (it now holds the reduced
/// values), and none before the wait names a wait tensor; no tensor is both (tempLiveness).
/// The group is this rank's group along `axes` of Program::mesh (DeviceMesh::group); a program
/// without a mesh reduces over the whole world, which must then have `group` ranks.
/// A `synchronous` collective (a forward or backward all-reduce of the partitioned model,
/// tessel.all_reduce) is one tensor whose wait is the step right after its start; the others
/// are gradient buckets (tessel.all_reduce_start/wait) that overlap the backward pass.
///
/// The synchronous collectives that move shards (tessel.all_gather / reduce_scatter /
/// all_to_all, compiler/TesselGatherScatterOps.td) are one step each, complete when the
/// step returns: `tensors` = {input, output} (same dtype: f32 or bf16; every communicator
/// moves and reduces both), `dim` the tensor dimension gathered, scattered or split, `concatDim` the
/// dimension all_to_all concatenates along, and `buffer` a staging Temp of the tensors'
/// dtype live for this step only (`bucket` is unused, 0). The communicators concatenate rank
/// blocks contiguously (block r = group rank r, DeviceMesh's row-major order over `axes`,
/// the order the IR's sharding layout assumes), so the executor repacks through the staging
/// buffer (runtime/exec/BlockLayout.h):
///   AllGather [.., n, ..] -> [.., P n, ..] along dim: the communicator gathers the input into
///     staging [P][input] (P x input elements), which is unpacked into the output;
///   ReduceScatter [.., P m, ..] -> [.., m, ..]: the input is packed into staging [P][output]
///     (block r = slice r of dim), which the communicator reduce-scatters ("sum" or "avg")
///     into the output;
///   AllToAll: the input is packed into the first half of staging ([P][input / P], block j =
///     slice j of `dim`, sent to rank j), exchanged into the second half, whose block j (from
///     rank j) is unpacked into slice j of `concatDim` of the output; staging holds 2 x input.
/// Uneven sizes (fully sharded data parallelism of a first dimension G that P does not
/// divide, shards of m = ceil(G / P)): AllGather's output may hold G < P n along dim, the
/// unpack dropping the trailing padding (gather-then-trim); ReduceScatter's input may hold
/// G < P m, staging being zeroed first so that the padding sums zeros.
/// Payload (Communicator.h's rule): AllGather and ReduceScatter P x the shard's bytes
/// (padding included; the output's, resp. input's bytes when P divides), AllToAll the
/// input's.
///
/// An AllGather may also be split in two steps (FSDP prefetch, tessel.all_gather_start /
/// wait): `phase` Start issues it (the communicator reads the input and fills the staging
/// buffer in the background) and Wait completes it and unpacks the output. Both steps carry
/// the same tensors, buffer, dim, axes and group, and `bucket` numbers the in-flight slot
/// (after the function's all-reduce buckets); input, staging and output stay live from the
/// Start to the Wait. Only the Start counts towards the payload.
///
/// A SendRecv step (pipeline parallelism, tessel.send / tessel.recv grouped by the schedule)
/// is one group of point-to-point transfers that are all posted, then all waited for, so
/// that a rank may send and receive in one step without deadlock (MPI Isend/Irecv + Waitall;
/// ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd). `axes` is exactly one axis, the pipeline
/// axis ("pp"), and `group` its size; `tensors` are the buffers, `peers[i]` the peer of
/// tensor i as its coordinate along that axis (the group rank of DeviceMesh::group(axes),
/// never this rank's own coordinate), and the first `sends` tensors are sent, the others
/// received, each whole, into its own buffer (same dtype and bytes as the peer's send);
/// `names[i]` labels transfer i ("SEND_F mb 2 chunk 0"). `buffer` is unused (-1), as are
/// bucket, reduce, dim, concatDim, phase, unit, anchor and synchronous: program.json does not
/// store them, so they keep their defaults (a program built with other values does not
/// round-trip equal). Payload: the bytes sent.
struct CollectiveStep {
  enum class Kind { AllReduceStart, AllReduceWait, AllGather, ReduceScatter, AllToAll, SendRecv };
  /// Whole: the one-step shard move; Start / Wait: the two halves of an asynchronous one.
  enum class Phase { Whole, Start, Wait };
  Kind kind = Kind::AllReduceStart;
  Phase phase = Phase::Whole;
  /// The FSDP unit of a parameter gather: its module path, "(root)" for the root unit, ""
  /// for a collective that gathers no unit (compiler/FsdpUnits.h).
  std::string unit;
  int bucket = 0;            // the bucket's number in [0, buckets of the function), in issue order
  int buffer = -1;           // the bucket's flat f32 buffer (a Temp of sum-of-tensors elements)
  std::vector<int> tensors;  // start: the inputs packed; wait: the outputs unpacked
  /// start: per input, the parameter it is the gradient of (a gradient bucket) or the path of
  /// the op that needed it (a synchronous collective); may be empty
  std::vector<std::string> names;
  std::string reduce = "avg";      // "sum", "avg" (the sum divided by group) or "max"
  std::vector<std::string> axes{"dp"};  // the mesh axes spanning the group, in mesh order
  int64_t group = 1;               // ranks in the group: the product of the axes' sizes
  bool synchronous = false;        // see above
  bool inPlace = false;            // all-reduce only: the tensors are views of the buffer (above)
  std::string location;            // the collective op's location
  std::string anchor;              // start: "after <op> at <loc>"; wait: "before <op> at <loc>"
  int64_t dim = 0;                 // AllGather/ReduceScatter/AllToAll: gathered/scattered/split dim
  int64_t concatDim = 0;           // AllToAll: the dimension the received blocks are concatenated on
  /// SendRecv: per tensor, the peer's coordinate along the one axis (a group rank).
  std::vector<int64_t> peers;
  /// SendRecv: how many of `tensors` (the first ones) are sent; the rest are received.
  int64_t sends = 0;
  /// True for AllGather, ReduceScatter and AllToAll (the one-step collectives above).
  bool movesShards() const {
    return kind == Kind::AllGather || kind == Kind::ReduceScatter || kind == Kind::AllToAll;
  }
  bool operator==(const CollectiveStep&) const = default;
};

/// The collective kinds counted apart (CollectiveCounters, --explain): all_reduce (buckets and
/// synchronous), all_gather, reduce_scatter, all_to_all, send_recv, in this order.
inline constexpr int kCollectiveKinds = 5;
/// The index of `c`'s kind in [0, kCollectiveKinds) (both halves of an all-reduce: 0).
int collectiveKindIndex(const CollectiveStep& c);
/// "all_reduce", "all_gather", "reduce_scatter", "all_to_all" or "send_recv" for an index of
/// collectiveKindIndex.
const char* collectiveKindName(int index);

using Step = std::variant<KernelStep, GemmStep, CopyStep, CollectiveStep>;

/// Every buffer id a step names: a kernel's arguments, a GEMM's a, b and c, a copy's source and
/// destination, a collective's tensors then its bucket or staging buffer (a SendRecv has
/// none). What a temporary's
/// lifetime is read from (validateProgram's liveness check, runtime/exec/MemoryBreakdown.h).
std::vector<int> stepBuffers(const Step& step);

/// One pipeline action of a function (pp-design: torch.distributed.pipelining's vocabulary):
/// the steps [firstStep, endStep) that carry it out. `name` is the action's full text as
/// runtime/pipeline's Action::text prints it ("0F2": chunk 0, forward, microbatch 2;
/// "1SEND_B3"). Traces show each span as an event enclosing its steps (cat "pipeline").
struct ActionSpan {
  std::string name;
  int64_t firstStep = 0;  // index of the first step of the action
  int64_t endStep = 0;    // one past its last step; firstStep < endStep <= steps.size()
  bool operator==(const ActionSpan&) const = default;
};

/// One callable function (forward, train_step).
struct Function {
  std::string name;
  std::vector<int> inputs;   // buffers the caller fills, in argument order
  std::vector<int> outputs;  // buffers the caller reads afterwards, in result order
  std::vector<std::string> outputNames;
  std::vector<Step> steps;
  int64_t arenaBytes = 0;    // peak bytes of this function's temporaries
  /// N when the function runs on one of N shards of the global batch (data-parallel ranks x
  /// microsteps: tessel-shard-batch's tessel.batch_shards), 0 when the batch was never split.
  /// What a bundle's plan is checked against (runtime/bundle/BundleConfig.h).
  int64_t batchShards = 0;
  /// The pipeline actions the steps carry out, in step order and non-overlapping (steps
  /// outside every span belong to no action: the optimizer, the loss all-reduce); empty in a
  /// program without pipeline parallelism.
  std::vector<ActionSpan> actions;
  bool operator==(const Function&) const = default;
};

/// What a pipelined program is: the stage of the pipeline it was compiled for. Every rank
/// compiles only its own stage, so the programs of different pp coordinates differ (their
/// parameters, their steps); the ranks of one stage run the same program. Parameters of a
/// pipelined program are those of its stage only; a parameter present on two stages (a tied
/// embedding) is replicated across them.
struct PipelineInfo {
  std::string axis = "pp";       // the mesh axis the stages lie along (outermost in the plan)
  int64_t stages = 0;            // the axis' size: ranks along the pipeline (p)
  int64_t stage = 0;             // this program's coordinate along `axis`, in [0, stages)
  int64_t microbatches = 1;      // microbatches per train_step (M, grad accumulation included)
  int64_t virtualStages = 1;     // chunks per rank (v; interleaved schedules have v >= 2)
  std::string schedule;          // "gpipe", "1f1b", "interleaved", "zero-bubble" or a CSV's name
  bool operator==(const PipelineInfo&) const = default;
};

/// A whole compiled program.
struct Program {
  /// The plan's device mesh, axes outermost first (runtime/comm/DeviceMesh.h's layout), or
  /// empty when the program was compiled without one (it then runs on any world whose size
  /// equals its collectives' groups).
  std::vector<MeshAxis> mesh;
  std::vector<Buffer> buffers;
  std::vector<Function> functions;
  std::string kernelSource;  // C++ source of every KernelStep symbol
  /// CUDA C++ source of every KernelStep symbol (one translation unit: the emitter's
  /// preamble, then the kernels), or empty for a CPU-only program.
  std::string cudaSource;
  /// The arguments of every kernel symbol, in order (outputs first, then inputs): what each
  /// step calling it must pass. Recorded by codegen/Lowering from the op's types.
  std::map<std::string, std::vector<KernelArg>> kernels;
  /// Set for a program of one pipeline stage (PipelineInfo), empty without pipeline
  /// parallelism.
  std::optional<PipelineInfo> pipeline;

  const Function* function(const std::string& name) const;
  int findBuffer(const std::string& name) const;  // -1 if absent
  /// The one arena all functions share: the max over functions of arenaBytes. Every Temp
  /// buffer lies inside it, and inside the arenaBytes of every function that uses it.
  int64_t arenaBytes() const;
  bool operator==(const Program&) const = default;
};

/// The steps [first, last] each Temp of `fn` is live: from the first step naming it to the
/// last (a function output: to `outputsEnd`), except for the views of in-place buckets
/// (CollectiveStep::inPlace), whose bytes the bucket holds from its start to its wait: a start
/// tensor is live up to the step before the start, a wait tensor from the step after the wait
/// (a view left with no step is absent). What validateProgram's no-shared-bytes check and
/// runtime/exec/MemoryBreakdown.h read; it relies on validateProgram's checks of in-place
/// buckets (no view named between start and wait, no start tensor after it, no wait tensor
/// before it).
std::map<int, std::pair<size_t, size_t>> tempLiveness(const Program& program, const Function& fn,
                                                      size_t outputsEnd);

/// The `version` field saveProgram writes for a program with CUDA kernels (launch
/// configurations on kernel steps, kernels.cu), and for a CPU-only one; loadProgram reads
/// both. Older versions are refused with a message saying to recompile: 1 (CPU) and 2 (CUDA),
/// from before kernel signatures and bucket numbers; 3 (CPU) and 4 (CUDA), from before the
/// mesh, sharded buffers and collectives over a list of axes. 5 (CPU) and 6 (CUDA), from
/// before pipeline parallelism (no send_recv steps, action spans or pipeline record), are
/// still read: they are this format without those keys.
inline constexpr int kProgramFormatVersion = 8;
inline constexpr int kProgramFormatVersionCpu = 7;
/// True for the versions whose programs have CUDA kernels (kernels.cu, launches): 6 and 8.
inline constexpr bool programFormatHasCuda(int64_t version) { return version == 6 || version == 8; }

/// Checks every invariant loadProgram checks (the mesh, buffer shardings and collective axes
/// against it: runtime/exec/ProgramMesh.cpp; ids in range, kinds, dtypes, positive shapes,
/// unique names, 64-byte aligned Temp offsets inside the arena of every function using them,
/// no two simultaneously live Temps sharing bytes, every kernel step's arguments against the
/// kernel's signature, GEMM extents and aliasing, copy sizes, bucket numbers and sizes, the
/// shapes, dtypes and staging of all_gather / reduce_scatter / all_to_all steps, the
/// pairing of a split all_gather's start and wait (one wait per start, same buffers), and
/// with CUDA kernels a valid launch on every kernel step, the same launch for every step of
/// one symbol, and the pipeline parts: the pipeline record against the mesh, send_recv peers
/// (in range, not the program's own stage), sends <= tensors, action spans in order and inside
/// the steps; runtime/exec/ProgramCheck.cpp and PipelineCheck.cpp list them) on an in-memory
/// program; throws
/// std::runtime_error "<context>: <field>: <problem>" (plus " (function '<name>')" inside a
/// function). The Executor calls it on construction.
void validateProgram(const Program& program, const std::string& context);

/// Writes `dir/program.json`, `dir/kernels.cpp` and, with CUDA kernels, `dir/kernels.cu`
/// (atomically, each through a temp file that is fsynced and renamed; the kernels first, so a
/// program.json never names missing kernels).
/// Validates first and throws without writing anything if the program is inconsistent.
void saveProgram(const Program& program, const std::string& dir);
/// Reads a folder written by saveProgram; throws std::runtime_error naming the file and the
/// field on any malformed or inconsistent content (buffer ids out of range, sizes, ...).
Program loadProgram(const std::string& dir);

}  // namespace tessel::rt
