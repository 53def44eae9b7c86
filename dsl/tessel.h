// The Tessel DSL: what a user includes to write a model.
//
// A model is C++ that builds IR: every call below creates one `tessel` op whose location is
// the caller's source line (captured with std::source_location) wrapped in the parameter
// path of the module it belongs to, e.g. blocks.0.mlp.fc @ model.h:42:17. Shapes are
// checked as the model is built; a shape error throws tessel::ModelError whose message is an
// MLIR-style diagnostic at the user's line ("model.h:42:17: error: ... [blocks.0.mlp.fc]").
//
// This header deliberately includes no MLIR, so model sources compile quickly.
//
// Example (a two-layer MLP):
//
//   struct Mlp : tessel::Model {
//     tessel::Linear fc1{this, "fc1", 784, 256}, fc2{this, "fc2", 256, 10};
//   };
//   Mlp m;
//   auto x = m.input("images", {B, 784});
//   auto y = m.input("labels", {B}, tessel::DType::I32);
//   m.set_loss(tessel::cross_entropy(m.fc2(tessel::relu(m.fc1(x))), y));
//   tessel::Program p = m.compile();
#pragma once

#include "dsl/Plan.h"
#include "runtime/exec/Executor.h"
#include "runtime/reference/Reference.h"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel {

struct SafeTensorsFile;  // runtime/io/SafeTensors.h: named tensors, e.g. gathered parameters


class Graph;  // the IR under construction (dsl/Graph.h); opaque to model code
class Model;

/// Element types of tensors: builtin f32, bf16 and i32.
enum class DType { F32, BF16, I32 };

/// Static shapes, outermost dimension first.
using Shape = std::vector<int64_t>;

/// Where and why building a model failed: the user's file, line and column, the parameter
/// path of the module the op belongs to ("" at the top level), and the message.
struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string path;
  std::string message;
};

/// Thrown when a model cannot be built or compiled. what() is the full diagnostic text,
/// "file:line:col: error: message [path]"; diagnostic() gives its parts.
class ModelError : public std::runtime_error {
 public:
  explicit ModelError(Diagnostic d);
  const Diagnostic& diagnostic() const { return diag_; }

 private:
  Diagnostic diag_;
};

/// A value in the model under construction. Cheap to copy; it refers to an SSA value of the
/// model's graph. Its shape and dtype are known as soon as it exists. A Tensor must not
/// outlive its Model (a compiled Program may).
class Tensor {
 public:
  Tensor() = default;
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  /// Dimension i; negative i counts from the end (dim(-1) is the last). Throws
  /// std::out_of_range if i is out of range.
  int64_t dim(int64_t i) const;
  DType dtype() const { return dtype_; }
  bool valid() const { return graph_ != nullptr; }

 private:
  friend class Graph;
  Graph* graph_ = nullptr;
  void* value_ = nullptr;  // mlir::Value::getAsOpaquePointer()
  Shape shape_;
  DType dtype_ = DType::F32;
};

/// A tensor operand together with the source line of the expression that uses it. Lets
/// operators (+, -, *) record the user's line, since operators cannot take a defaulted
/// std::source_location argument of their own.
struct At {
  Tensor tensor;
  std::source_location loc;
  At(Tensor t, std::source_location l = std::source_location::current())  // NOLINT
      : tensor(std::move(t)), loc(l) {}
};

using Loc = std::source_location;

// ---- elementwise (suffix broadcasting: see the dialect description) --------------------
Tensor operator+(At lhs, const Tensor& rhs);
Tensor operator-(At lhs, const Tensor& rhs);
Tensor operator*(At lhs, const Tensor& rhs);
/// x * factor, a compile-time constant.
Tensor operator*(At x, double factor);
Tensor scale(const Tensor& x, double factor, Loc loc = Loc::current());
/// GELU, tanh form (PyTorch gelu(approximate="tanh")).
Tensor gelu(const Tensor& x, Loc loc = Loc::current());
Tensor relu(const Tensor& x, Loc loc = Loc::current());
/// SiLU (swish), x * sigmoid(x), elementwise (PyTorch F.silu; Elfwing et al. 2017).
Tensor silu(const Tensor& x, Loc loc = Loc::current());
/// SwiGLU gating (Shazeer 2020, "GLU Variants Improve Transformer"): silu(gate) * up, both of
/// one shape [..., H]; the Llama MLP is down(swiglu(gate(x), up(x))).
Tensor swiglu(const Tensor& gate, const Tensor& up, Loc loc = Loc::current());

// ---- matrix products -----------------------------------------------------------------
/// Transpose flags of matmul.
struct MatmulOptions {
  bool transpose_lhs = false;
  bool transpose_rhs = false;
};
/// lhs [b..., M, K] x rhs [b..., K, N] (or rank-2 rhs shared by every batch) -> [b..., M, N].
Tensor matmul(const Tensor& lhs, const Tensor& rhs, MatmulOptions options = {},
              Loc loc = Loc::current());

// ---- normalisation, softmax, attention, loss --------------------------------------------
/// Layer norm over the last dimension; gamma, beta [C]. eps must lie in [2^-126, 1] (f32's
/// smallest normal number to 1; see shapes::normEpsilonError), else a ModelError at this line.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5,
                  Loc loc = Loc::current());
/// RMS norm over the last dimension (Zhang & Sennrich 2019; PyTorch nn.RMSNorm):
/// x / sqrt(mean(x^2) + eps) * weight, with weight [C] and x [..., C]; eps as layer_norm's.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-5, Loc loc = Loc::current());
/// Rotary position embedding (Su et al. 2021, RoFormer) of x [B, T, heads * D], D even, in the
/// "rotate half" pairing of GPT-NeoX and Hugging Face Llama: for each head and i < D/2, the pair
/// (x[i], x[i + D/2]) at position t (the index along T, from 0) turns by the angle
/// t * theta^(-2i/D). theta must keep every theta^(-2i/D) and t * theta^(-2i/D) finite and
/// theta^(-2i/D) > 0 (shapes::ropeThetaError: theta > 0 finite, not below about 1e-300), else a
/// ModelError at this line.
Tensor rope(const Tensor& x, int64_t heads, double theta = 10000.0, Loc loc = Loc::current());
/// Why `eps` cannot be the epsilon of layer_norm, rms_norm, LayerNorm or RMSNorm, or "" if it
/// can: the check those make, for a trainer's flags ("epsilon must be in [...], got 1e+300").
std::string norm_epsilon_error(double eps);
/// Why `theta` cannot be rope's base for head size `head_size` (D, even) at `positions` (T)
/// positions, or "" if it can: the check rope makes, for a trainer's flags.
std::string rope_theta_error(double theta, int64_t head_size, int64_t positions);
/// Softmax over the last dimension; with causal, x is [..., T, T] and j > i is masked.
Tensor softmax(const Tensor& x, bool causal = false, Loc loc = Loc::current());
/// Multi-head causal self-attention on qkv [B, T, 3C] -> [B, T, C] (GPT-2 layout).
Tensor causal_attention(const Tensor& qkv, int64_t heads, Loc loc = Loc::current());
/// Grouped-query causal attention (Ainslie et al. 2023, GQA): q [B, T, heads * D], k and v
/// [B, T, kv_heads * D] -> [B, T, heads * D]; query head h attends with key/value head
/// h / (heads / kv_heads), so kv_heads == heads is multi-head and kv_heads == 1 multi-query
/// attention. kv_heads must divide heads. Scores are scaled by 1/sqrt(D).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                        int64_t kv_heads, Loc loc = Loc::current());
/// Mean token cross-entropy of logits [..., V] against i32 targets [...] -> f32 scalar.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Loc loc = Loc::current());
/// Row gather: table [V, C], i32 indices [...] -> [..., C].
Tensor embedding(const Tensor& table, const Tensor& indices, Loc loc = Loc::current());

// ---- shapes and reductions -------------------------------------------------------------
Tensor reshape(const Tensor& x, Shape shape, Loc loc = Loc::current());
/// result.shape[i] = x.shape[perm[i]].
Tensor transpose(const Tensor& x, std::vector<int64_t> perm, Loc loc = Loc::current());
/// `parts` equal pieces along `axis`.
std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t parts, Loc loc = Loc::current());
Tensor concat(const std::vector<Tensor>& xs, int64_t axis, Loc loc = Loc::current());
/// Sum / mean over dims, which are removed from the shape.
Tensor reduce_sum(const Tensor& x, std::vector<int64_t> dims, Loc loc = Loc::current());
Tensor reduce_mean(const Tensor& x, std::vector<int64_t> dims, Loc loc = Loc::current());

// ---- modules -------------------------------------------------------------------------
/// How the runtime initialises a parameter.
enum class Init { Normal, Zeros, Ones };

/// A node in the module tree. Its path is the parent's path plus its name
/// ("blocks.3" + "attn.qkv" -> "blocks.3.attn.qkv"); parameters are named path + "." + name.
/// Ops created by a module's own calls carry its path in their locations.
class Module {
 public:
  Module(Module* parent, std::string name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// "blocks.3.attn"; "" for the model itself.
  const std::string& path() const { return path_; }
  /// path() + "." + local (or just local at the top level).
  std::string qualify(const std::string& local) const;

  /// While the returned guard lives, free-function ops (+, gelu, ...) carry this module's
  /// path in their locations. Library modules open it themselves.
  class Scope {
   public:
    explicit Scope(const Module& m);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Graph* graph_;
  };
  Scope scope() const { return Scope(*this); }

 protected:
  explicit Module(Model* root);  // for Model itself
  /// Declares a parameter `local` of this module; `loc` is where it is declared.
  void declare_parameter(const std::string& local, Shape shape, Init init, double stddev,
                         Loc loc);
  /// For a constructor argument that the module's op `opName` refuses: a non-empty `error`
  /// is a ModelError "'<opName>' op <error>" at `loc` (where the module is declared).
  void check_argument(const std::string& error, const std::string& opName, Loc loc) const;
  /// The parameter's value in the graph (created on first use).
  Tensor parameter(const std::string& local, Loc loc) const;
  Model& root() const { return *root_; }

 private:
  Model* root_;
  std::string path_;
};

/// Options of Linear.
struct LinearOptions {
  bool bias = true;
  /// Standard deviation of the weight's N(0, std^2) initialisation.
  double std = 0.02;
};

/// y = x W^T + b with W [out, in] (PyTorch layout, so column-parallel sharding splits dim 0)
/// and b [out]. Parameters "<path>.weight", "<path>.bias".
class Linear : public Module {
 public:
  Linear(Module* parent, std::string name, int64_t in, int64_t out, LinearOptions options = {},
         Loc loc = Loc::current());
  /// x [..., in] -> [..., out].
  Tensor operator()(const Tensor& x, Loc loc = Loc::current()) const;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  bool bias_;
};

/// Layer norm over the last dimension with "<path>.weight" (ones) and "<path>.bias" (zeros).
/// An eps outside layer_norm's range is a ModelError at the constructor's line.
class LayerNorm : public Module {
 public:
  LayerNorm(Module* parent, std::string name, int64_t channels, double eps = 1e-5,
            Loc loc = Loc::current());
  Tensor operator()(const Tensor& x, Loc loc = Loc::current()) const;

 private:
  double eps_;
};

/// RMS norm over the last dimension with "<path>.weight" [C] (ones), no bias (Llama). An eps
/// outside rms_norm's range is a ModelError at the constructor's line.
class RMSNorm : public Module {
 public:
  RMSNorm(Module* parent, std::string name, int64_t channels, double eps = 1e-5,
          Loc loc = Loc::current());
  Tensor operator()(const Tensor& x, Loc loc = Loc::current()) const;

 private:
  double eps_;
};

/// A lookup table "<path>.weight" [V, C], N(0, 0.02^2).
class Embedding : public Module {
 public:
  Embedding(Module* parent, std::string name, int64_t vocab, int64_t channels,
            Loc loc = Loc::current());
  /// i32 indices [...] -> [..., C].
  Tensor operator()(const Tensor& indices, Loc loc = Loc::current()) const;
  /// The table itself, e.g. for an LM head tied to the token embedding.
  Tensor weight(Loc loc = Loc::current()) const;
};

// ---- the model and its compiled program ----------------------------------------------------
/// A declared parameter: full name, shape, initialisation.
struct ParameterSpec {
  std::string name;
  Shape shape;
  Init init = Init::Normal;
  double std = 0.02;
  /// Optimizer state ("<param>:exp_avg", ...) rather than a trainable parameter.
  bool state = false;
};

/// What compile() does besides building the IR.
struct CompileOptions {
  /// If set, the IR after every pipeline stage is written there as NN-<stage>.mlir.
  std::string dump_ir_dir;
  /// Build @train_step (autodiff, clipping, optimizer) when the model has a loss.
  bool train = true;
  /// "adamw" (torch.optim.AdamW), "sgd" (torch.optim.SGD with momentum), or "none":
  /// @train_step then returns the loss followed by one gradient per parameter (in
  /// parameters() order) and updates nothing.
  std::string optimizer = "adamw";
  /// F32, or BF16 for mixed precision (passes/MixedPrecision.cpp): bf16 activations,
  /// gradients of activations and GEMM/kernel inputs, stored as 16 bits and rounded to
  /// nearest even; f32 master weights, optimizer state, accumulators and loss. I32 is
  /// rejected (std::invalid_argument).
  DType precision = DType::F32;
  /// How the program is laid over the ranks (dsl/Plan.h). The default is one rank; with
  /// shard_batch over dp > 1 ranks (or grad_accumulation > 1) the program runs on the
  /// local batch and averages gradients over the replicas. The global batch (the inputs'
  /// leading dimension) is checked against the plan here (ModelError at the plan's line).
  Plan plan;
  /// With a pipelined plan (Plan::pipeline, pp() > 1): which stage's program to compile, the
  /// rank's coordinate along the pipeline axis, in [0, pp()); each stage's program holds only
  /// its stages' layers and parameters. Must be 0 for other plans. Out of range:
  /// std::invalid_argument.
  int64_t pipeline_stage = 0;
  /// Rewrite attention into transposes, batched matmuls and a causal softmax
  /// (tessel-decompose-attention) instead of one fused kernel per (batch, head) and its
  /// fused backward. The GPU trainer (--device cuda) sets it: the fused CUDA kernels are
  /// checked against the C++ ones in the SIMT harness but not yet timed on a GPU.
  bool decompose_attention = false;
  /// Fold each GEMM's bias add, GELU, residual add and bias-gradient sum into the GEMM's
  /// epilogue (tessel-fuse-gemm-epilogues). False keeps them separate kernels: for
  /// comparisons with a program that must have the unfused GELU and bias-gradient roundings.
  bool fuse_gemm_epilogues = true;
};

/// How a program becomes machine code on this CPU.
struct NativeOptions {
  /// OpenMP and OpenBLAS threads; 0 keeps their defaults (all cores).
  int threads = 0;
  /// Kernel cache folder; "" uses $TESSEL_CACHE_DIR or ~/.cache/tessel (see
  /// codegen/HostCompiler.h).
  std::string cache_dir;
  /// Seed of the parameters' initialisation (runtime/Init.h: a function of seed and name).
  uint64_t seed = 1337;
  /// Time every step (rt::Executor::stepSeconds).
  bool profile = false;
  /// The ranks' world (not owned; null: one rank). A program with a mesh gets its device mesh
  /// over it (rt::Executor::setMesh) before its parameters are initialised, so that each rank
  /// keeps its shard; without a mesh its collectives use the world itself.
  rt::Communicator* world = nullptr;
  /// On a kernel cache miss, print which library is built and when it is done
  /// (HostCompileOptions::announce); the trainers set it when stdout is a terminal.
  bool announce_build = false;
};

/// A program compiled to machine code: its functions lowered to generated C++ kernels
/// (built by the host compiler, cached on disk) and OpenBLAS GEMMs, with the parameters,
/// optimizer state and the memory-planned arena allocated. Move-only.
class NativeProgram {
 public:
  NativeProgram(NativeProgram&&) noexcept;
  NativeProgram& operator=(NativeProgram&&) noexcept;
  ~NativeProgram();

  /// The executor: set inputs, run functions ("forward", "train_step"), read outputs.
  rt::Executor& executor();
  const rt::Program& program() const;
  /// Bytes of the arena all temporaries share, as planned before running.
  int64_t arena_bytes() const;
  /// Whether building compiled the kernels (false: reused from the cache).
  bool compiled_kernels() const;
  /// The compiled kernel library's file (in the kernel cache): what --emit-bundle ships.
  const std::string& kernel_library_path() const;

  /// Copies every parameter (not optimizer state) from `other` (a CPU or GPU executor, e.g.
  /// another NativeProgram's executor()) that has one of the same name; returns how many were
  /// copied. Throws std::runtime_error when a parameter of that name has another size there
  /// (a shard of a sharded program: copy from its gathered parameters instead).
  int copy_parameters_from(rt::ProgramExecutor& other);
  /// Copies every parameter from `full`, tensors in their global shapes under their names
  /// (runtime/exec/ExportParams.h gatherParameters, or a --export-params file); returns how
  /// many were copied. Throws std::runtime_error for a tensor of another size or dtype than
  /// f32.
  int copy_parameters_from(const SafeTensorsFile& full);

 private:
  friend class Program;
  struct Impl;
  explicit NativeProgram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A compiled model: its IR after the pipeline, its parameters and its signature. Runs on
/// the f64 reference interpreter (the oracle) or natively (native()).
class Program {
 public:
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  /// The IR as text (with locations if `locations`).
  std::string ir(bool locations = false) const;
  const std::vector<ParameterSpec>& parameters() const;
  /// Input names and shapes, in argument order.
  const std::vector<std::pair<std::string, Shape>>& inputs() const;
  /// Output names in result order; the loss, if set, is first and named "loss".
  const std::vector<std::string>& outputs() const;

  /// Runs the forward function on the reference interpreter. `params` maps every parameter
  /// name to a tensor of its shape; `inputs` follow inputs(). Returns outputs() in order.
  /// Throws InterpreterError (compiler/Interpreter.h; a std::runtime_error) on bad input.
  std::vector<ref::Tensor> run_reference(const std::map<std::string, ref::Tensor>& params,
                                         const std::vector<ref::Tensor>& inputs) const;

  /// Whether a @train_step was built (the model has a loss and CompileOptions::train).
  bool trains() const;
  /// Every tessel.param @train_step reads: the trainable parameters in declaration order,
  /// then the optimizer state the optimizer pass declared. parameters() when not training.
  const std::vector<ParameterSpec>& state() const;
  /// Names of @train_step's inputs in argument order: the model's inputs, then the
  /// optimizer's hyper-parameters ("lr", "beta1", ..., "step", "max_grad_norm").
  const std::vector<std::string>& train_inputs() const;
  /// Runs @train_step once on the reference interpreter: `state` holds every entry of
  /// state() and receives the updated parameters and optimizer state; `inputs` follow
  /// train_inputs(). Returns {loss, grad_norm} (the norm before clipping), or with the
  /// "none" optimizer {loss, gradients...}.
  std::vector<ref::Tensor> train_step_reference(std::map<std::string, ref::Tensor>& state,
                                                const std::vector<ref::Tensor>& inputs) const;

  /// Lowers every function to machine code (see NativeProgram) and initialises the
  /// parameters. Throws ModelError at the op's location if an op cannot be lowered, and
  /// tessel::HostCompileError (codegen/HostCompiler.h) if the host compiler fails.
  NativeProgram native(const NativeOptions& options = {}) const;

  /// Only lowers every function to an rt::Program (buffers, steps, memory plan, C++ kernel
  /// source), allocating and compiling nothing: what --emit-bundle ships. With
  /// `cuda_kernels`, the program also carries the CUDA kernels and each kernel step its
  /// launch (codegen/Lowering.h LoweringOptions::cuda). `multi_tensor_adamw` false keeps
  /// one AdamW kernel per parameter and the copies of the new values (LoweringOptions::
  /// multiTensorAdamW; the default updates in place with multi-tensor kernels). Throws
  /// ModelError at the op's location if an op cannot be lowered.
  rt::Program lower(bool cuda_kernels = false, bool multi_tensor_adamw = true) const;

 private:
  friend class Model;
  struct Impl;
  explicit Program(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The root module: owns the graph, declares inputs, and sets the loss and outputs.
class Model : public Module {
 public:
  /// `name` becomes the function name in the IR (@name): a non-empty identifier. `loc` (the
  /// model's declaration) is the location of the function.
  explicit Model(std::string name = "forward", Loc loc = Loc::current());
  ~Model() override;

  /// A new function argument, e.g. input("tokens", {B, T}, DType::I32).
  Tensor input(const std::string& name, Shape shape, DType dtype = DType::F32,
               Loc loc = Loc::current());
  /// The training objective: an f32 scalar. Becomes output 0, named "loss".
  void set_loss(const Tensor& loss, Loc loc = Loc::current());
  /// An extra named output (e.g. logits for sampling or comparison).
  void add_output(const std::string& name, const Tensor& value, Loc loc = Loc::current());

  /// Every declared parameter, in declaration order.
  const std::vector<ParameterSpec>& parameters() const;

  /// Finishes the function, verifies it, runs the pipeline and returns the program. The
  /// model cannot be extended afterwards. Throws ModelError on failure.
  Program compile(const CompileOptions& options = {});

  Graph& graph() const { return *graph_; }

 private:
  std::shared_ptr<Graph> graph_;
};

}  // namespace tessel
