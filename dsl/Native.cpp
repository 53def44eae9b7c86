// Program::native and NativeProgram: lowering to generated kernels and running them.
#include "dsl/Graph.h"
#include "runtime/train/StartupTimes.h"

#include "codegen/GemmTuner.h"
#include "codegen/HostCompiler.h"
#include "codegen/Lowering.h"
#include "dsl/ProgramImpl.h"
#include "runtime/exec/Sharding.h"  // deviceMeshFor
#include "runtime/io/SafeTensors.h"

#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

namespace tessel {

struct NativeProgram::Impl {
  KernelLibrary library;              // must outlive the executor's resolved symbols
  std::unique_ptr<rt::DeviceMesh> mesh;  // the program's mesh over the world, if it has one
  std::unique_ptr<rt::Executor> executor;
};

NativeProgram::NativeProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NativeProgram::NativeProgram(NativeProgram&&) noexcept = default;
NativeProgram& NativeProgram::operator=(NativeProgram&&) noexcept = default;
NativeProgram::~NativeProgram() {
  if (impl_) impl_->executor.reset();  // before the library it calls into
}

rt::Executor& NativeProgram::executor() { return *impl_->executor; }
const rt::Program& NativeProgram::program() const { return impl_->executor->program(); }
int64_t NativeProgram::arena_bytes() const { return impl_->executor->arenaBytes(); }
bool NativeProgram::compiled_kernels() const { return impl_->library.compiled(); }
const std::string& NativeProgram::kernel_library_path() const { return impl_->library.path(); }

int NativeProgram::copy_parameters_from(rt::ProgramExecutor& other) {
  int copied = 0;
  const rt::Program& mine = program();
  for (size_t i = 0; i < mine.buffers.size(); ++i) {
    const rt::Buffer& b = mine.buffers[i];
    if (b.kind != rt::BufferKind::Parameter) continue;
    int j = other.program().findBuffer(b.name);
    if (j < 0) continue;
    const rt::Buffer& theirs = other.program().buffers[static_cast<size_t>(j)];
    if (theirs.bytes() != b.bytes())
      throw std::runtime_error(fmt::format(
          "copying parameters: '{}' holds {} bytes here but {} in the source program{}", b.name, b.bytes(),
          theirs.bytes(), theirs.sharded() ? " (its shard of a sharded program: copy from the gathered parameters)" : ""));
    other.readBuffer(j, executor().raw(static_cast<int>(i)));  // host or device memory alike
    ++copied;
  }
  return copied;
}

int NativeProgram::copy_parameters_from(const SafeTensorsFile& full) {
  int copied = 0;
  const rt::Program& mine = program();
  for (size_t i = 0; i < mine.buffers.size(); ++i) {
    const rt::Buffer& b = mine.buffers[i];
    if (b.kind != rt::BufferKind::Parameter) continue;
    auto it = full.tensors.find(b.name);
    if (it == full.tensors.end()) continue;
    const StTensor& t = it->second;
    if (t.dtype != StDType::F32 || t.numel() != b.numel() || b.dtype != rt::DType::F32)
      throw std::runtime_error(fmt::format("copying parameters: '{}' has {} {} elements in the source, {} here",
                                           b.name, t.numel(), dtypeName(t.dtype), b.numel()));
    std::memcpy(executor().raw(static_cast<int>(i)), t.bytes.data(), t.bytes.size());
    ++copied;
  }
  return copied;
}

rt::Program Program::lower(bool cudaKernels, bool multiTensorAdamW) const {
  Graph& g = *impl_->graph;
  rt::Program program;
  if (mlir::failed(lowerToProgram(g.module(), program,
                                  LoweringOptions{.cuda = cudaKernels, .multiTensorAdamW = multiTensorAdamW})))
    g.throwCaptured(g.module().getLoc(), cudaKernels ? "the program could not be lowered to CUDA kernels"
                                                     : "the program could not be lowered to kernels");
  return program;
}

NativeProgram Program::native(const NativeOptions& options) const {
  Graph& g = *impl_->graph;
  rt::Program program;
  if (mlir::failed(lowerToProgram(g.module(), program)))
    g.throwCaptured(g.module().getLoc(), "the program could not be lowered to kernels");
  rt::markStartupPhase("lower and emit kernels");
  auto impl = std::make_unique<NativeProgram::Impl>();
  HostCompileOptions hc;
  hc.cacheDir = options.cache_dir;
  hc.announce = options.announce_build;
  impl->library = buildKernelLibrary(program.kernelSource, hc);
  rt::markStartupPhase("host compile");
  // Each GEMM's CPU library, measured per distinct shape at the run's thread count (cached).
  tuneGemms(program, GemmTunerOptions{
                         .policy = gemmPolicyFromEnvironment(), .threads = options.threads, .cacheDir = kernelCacheDir(hc)});
  rt::markStartupPhase("GEMM tuning");
  KernelLibrary& lib = impl->library;
  impl->executor = std::make_unique<rt::Executor>(
      std::move(program), [&lib](const std::string& s) { return lib.symbol(s); },
      rt::ExecutorOptions{options.threads, options.profile});
  if (options.world) {
    impl->executor->setCommunicator(options.world);
    impl->mesh = rt::deviceMeshFor(impl->executor->program(), *options.world);
    impl->executor->setMesh(impl->mesh.get());
  }
  rt::markStartupPhase("executor");
  impl->executor->initParameters(options.seed);
  rt::markStartupPhase("parameter init");
  return NativeProgram(std::move(impl));
}

}  // namespace tessel
