// tessel-run: trains a compiled bundle (written by `tessel-gpt --emit-bundle DIR`) with no
// compiler in the process: no MLIR, no LLVM, no host compiler. It reads and verifies the
// bundle, dlopens its kernels.so, initialises the parameters from --seed exactly as the JIT
// path does (Executor::initParameters), and runs the shared training loop
// (runtime/train/Loop.h) on byte text, printing the same progress lines and JSON log.
//
// --device cuda runs a bundle compiled for the GPU (tessel-gpt --emit-bundle DIR --device
// cuda) on the GPU executor (runtime/cuda/CudaExecutor.h) instead, from its cubin; the same
// bundle still runs on the CPU with --device cpu. --device auto picks the GPU when the bundle
// has CUDA kernels and a driver with a device is present.
#include "runtime/bundle/Bundle.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/Driver.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/data/TextDataset.h"
#include "runtime/train/Loop.h"
#include "runtime/train/TextBatches.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <random>

namespace {

int64_t parameterCount(const tessel::rt::Program& program) {
  int64_t n = 0;
  for (const tessel::rt::Buffer& b : program.buffers)
    if (b.kind == tessel::rt::BufferKind::Parameter) n += b.numel();
  return n;
}

struct DeviceFlags {
  std::string device = "auto";
  bool graphs = false;
  int index = -1;
};

int runBundle(const std::string& dir, const std::string& dataPath, uint64_t seed, int threads,
              int64_t steps, tessel::trainer::TrainOptions train, const DeviceFlags& dev) {
  tessel::rt::Bundle bundle = tessel::rt::readBundle(dir);
  // Decide the device before anything else is loaded: "cuda" without a driver is an error.
  const bool hasCuda = bundle.cuda.has_value();
  std::string device = tessel::rt::resolveDevice(dev.device, /*cudaBackendReady=*/true);
  if (device == "cuda" && !hasCuda) {
    if (dev.device == "cuda")
      throw std::runtime_error(fmt::format("'{}' has no CUDA kernels; compile it for the GPU with tessel-gpt "
                                           "--emit-bundle DIR --device cuda, or use --device cpu", dir));
    device = "cpu";
  }
  if (bundle.info.model != "gpt")
    throw std::runtime_error(fmt::format("'{}/bundle.json': model '{}' is not a byte-level GPT; "
                                         "tessel-run trains text models only",
                                         dir, bundle.info.model));
  const int64_t batch = bundle.info.batch, seq = bundle.info.seq;
  tessel::TextDataset data(dataPath);
  data.requireSequenceLength(seq);
  tessel::trainer::requireLogIsNotData(train.logJson, data);
  tessel::KernelLibrary lib;
  tessel::rt::Program program = std::move(bundle.program);
  std::unique_ptr<tessel::rt::ProgramExecutor> ex;
  tessel::rt::CudaExecutor* gpu = nullptr;
  if (device == "cuda") {
    auto g = std::make_unique<tessel::rt::CudaExecutor>(std::move(program), *bundle.cuda,
                                                        tessel::rt::CudaExecutorOptions{dev.index, dev.graphs});
    gpu = g.get();
    ex = std::move(g);
  } else {
    tessel::rt::requireCpuKernels(bundle);
    lib = tessel::loadKernelLibrary(bundle.kernelsPath);
    ex = std::make_unique<tessel::rt::Executor>(
        std::move(program), [&lib](const std::string& s) { return lib.symbol(s); },
        tessel::rt::ExecutorOptions{threads, false});
  }
  ex->initParameters(seed);
  const nlohmann::json& c = bundle.info.config;
  fmt::print("tessel-run: bundle '{}' ({} L={} C={} NH={} T={} B={}), {} parameters, arena "
             "{:.1f} MiB, data '{}' ({} bytes), device {}{}\n",
             dir, bundle.info.model, c.value("layers", 0), c.value("channels", 0),
             c.value("heads", 0), seq, batch, parameterCount(ex->program()),
             static_cast<double>(ex->arenaBytes()) / (1 << 20), data.path(), data.size(),
             ex->deviceName(), gpu ? (gpu->usingGraphs() ? ", CUDA graphs" : ", eager launches") : "");

  // The same batches as tessel-gpt (runtime/train/TextBatches.h), from --seed.
  const tessel::trainer::TextBatchOptions batches{&data, batch, seq, 0, 1, 1, seed};
  train.steps = steps;
  train.tokensPerStep = batch * seq;
  train.optimizer = bundle.info.optimizer;
  tessel::trainer::train(*ex, train, tessel::trainer::textTrainFeeder(batches),
                         tessel::trainer::textValFeeder(batches));
  fmt::print("memory: arena planned {:.2f} MiB, high-water {:.2f} MiB\n",
             static_cast<double>(ex->arenaBytes()) / (1 << 20),
             static_cast<double>(ex->highWaterBytes()) / (1 << 20));
  if (gpu) {
    tessel::rt::CudaMemoryReport m = gpu->memory();
    auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
    fmt::print("device memory: allocated {:.1f} MiB (persistent {:.1f}, arena {:.1f}, workspace {:.1f}); "
               "peak used on the device {:.1f} MiB of {:.1f} MiB\n",
               mib(m.allocated), mib(m.persistent), mib(m.arena), mib(m.workspace), mib(m.devicePeakUsed),
               mib(m.deviceTotal));
    fmt::print("device time: train_step {:.3f} ms per step ({})\n",
               gpu->deviceMilliseconds("train_step") / static_cast<double>(steps),
               gpu->usingGraphs() ? "CUDA graphs" : "eager launches");
  }
  ex.reset();  // before the library it calls into
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel-run: train a compiled bundle (tessel-gpt --emit-bundle DIR); no compiler "
               "needed", "tessel-run"};
  std::string dir;
  app.add_option("BUNDLE", dir, "bundle folder written by --emit-bundle")->required();
  std::string data = "/usr/share/games/fortunes";
  app.add_option("--data", data, "text: a file, or a folder whose text files are concatenated")
      ->capture_default_str();
  uint64_t seed = 1337;
  app.add_option("--seed", seed, "parameter init and batch sampling")->capture_default_str()
      ->check(tessel::trainer::integerIn(0, int64_t{1} << 62));
  int64_t steps = 300;
  app.add_option("--steps", steps, "number of training steps")->capture_default_str()
      ->check(tessel::trainer::integerIn(1, int64_t{1} << 40));
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads (0: all cores)")->check(tessel::trainer::integerIn(0, 1024));
  DeviceFlags dev;
  app.add_option("--device", dev.device, "where to run: cpu, cuda, or auto (the GPU when the bundle has CUDA "
                 "kernels and a GPU is usable)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_flag("--cuda-graphs", dev.graphs, "capture a training step into a CUDA graph and replay it");
  app.add_option("--cuda-device", dev.index, "CUDA device index (default: the local rank, else 0)")
      ->check(tessel::trainer::integerIn(0, 1023));
  tessel::trainer::TrainOptions train;
  tessel::trainer::addTrainFlags(app, train, /*optimizerFlag=*/false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return runBundle(dir, data, seed, threads, steps, train, dev);
  } catch (const std::bad_alloc&) {
    std::cerr << "tessel-run: error: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "tessel-run: error: " << e.what() << "\n";
  }
  return 1;
}
