// tessel-gpt: trains the byte-level GPT of model.h on a text corpus, then samples from it.
//
// The model is compiled twice: once with a train step (autodiff + AdamW) on batch B, once
// forward-only on one sequence for sampling. On the CPU both run as generated C++ kernels
// plus OpenBLAS GEMMs; with --device cuda the train step runs on the GPU executor (CUDA
// kernels compiled by NVRTC, cuBLASLt GEMMs) and the sampler, on the CPU, takes the trained
// parameters by name.
#include "examples/gpt/model.h"

#include "codegen/HostCompiler.h"
#include "codegen/Nvrtc.h"
#include "dsl/trainer/Flags.h"
#include "dsl/trainer/Sampling.h"
#include "dsl/trainer/Trainer.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/World.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/data/TextDataset.h"
#include "runtime/exec/Collectives.h"

#include <fmt/format.h>
#include <memory>
#include <random>

namespace {

/// The CUDA module of `program` (NVRTC, cached): a cubin for `arch` and its PTX.
tessel::rt::CudaBinary compileForGpu(const tessel::rt::Program& program, const std::string& arch) {
  tessel::CudaCompileOptions o;
  o.arch = arch;
  o.lineInfo = false;  // a bundle ships: keep the cubin small
  tessel::CudaModule m = tessel::compileCuda(program.cudaSource, o);
  return {arch, std::string(m.cubin.begin(), m.cubin.end()), m.ptx};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel-gpt: train a byte-level GPT on text, then sample from it", "tessel-gpt"};
  tessel::trainer::Flags flags;
  flags.layers = 4;
  flags.channels = 128;
  flags.seq = 64;
  flags.batch = 16;
  flags.steps = 300;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/games/fortunes",
                                  "text: a file, or a folder whose text files are concatenated");
  tessel::trainer::addTransformerFlags(app, flags);
  int64_t vocab = 256;
  app.add_option("--vocab", vocab, "vocabulary rows V: 256 bytes, padded up to N (rows past 256 are never "
                 "a token; e.g. 50304 for GPT-2 small's shapes)")
      ->capture_default_str()->check(tessel::trainer::integerIn(256, int64_t{1} << 24));
  tessel::trainer::TrainOptions train;
  tessel::trainer::addTrainFlags(app, train);
  tessel::trainer::SampleOptions sample;
  tessel::trainer::addSampleFlags(app, sample);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads (0: all cores)")->check(tessel::trainer::integerIn(0, 1024));
  bool profile = false;
  app.add_flag("--profile", profile, "time every step and print where a train step's time goes");
  std::string emitBundle;
  app.add_option("--emit-bundle", emitBundle,
                 "only compile: write the train program as a bundle folder for tessel-run (with "
                 "--device cuda: with CUDA kernels and a cubin; no GPU needed)")
      ->type_name("DIR");
  std::string cudaArch = "sm_90";
  app.add_option("--cuda-arch", cudaArch, "GPU architecture of the cubin in a CUDA bundle")
      ->capture_default_str();
  bool graphs = false;
  app.add_flag("--cuda-graphs", graphs, "on the GPU: capture a training step into a CUDA graph and replay it");

  // The ranks' world outlives runMain's error handlers: a failed collective ends the job
  // there (rt::abortJob) without the world's orderly shutdown, which would wait for peers.
  std::optional<tessel::rt::World> ranks;
  return tessel::trainer::runMain(app, argc, argv, [&] {
    // Emitting needs no device: --device cuda only asks for CUDA kernels in the bundle. Ranks
    // launched onto GPUs learn together whether every rank can use its GPU (the NCCL
    // bootstrap below), so one rank without a GPU makes every rank exit with the reasons.
    const tessel::rt::WorldInfo launch = tessel::rt::detectWorld();
    const bool gpuRanks = flags.device == "cuda" && launch.launched() && launch.size != 1;
    const std::string device =
        !emitBundle.empty() ? flags.device
        : gpuRanks          ? std::string("cuda")
                            : tessel::trainer::resolveDeviceFlag(flags, app.get_name(), /*cudaReady=*/true);
    gpt::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq, vocab};

    // The ranks: the launcher's world (mpirun/srun; a plain run is one rank without MPI).
    // The plan is checked against it at startup, so `--plan dp=4` in a plain run is an
    // error naming the flag.
    const tessel::Plan plan = tessel::trainer::planFromFlags(flags);
    ranks = tessel::rt::makeWorld({.timeoutSeconds = flags.commTimeout});
    const int rank = ranks->info.rank, world = ranks->comm->worldSize();
    tessel::rt::Communicator* comm = ranks->comm.get();
    tessel::trainer::checkSameCommandLine(argc, argv, *comm);
    // --explain of a plan for more ranks than this process has only compiles and reports,
    // so a plan can be inspected on one machine before launching it.
    const bool explainOnly = flags.explain && plan.mesh().size() != world;
    plan.check_world_size(explainOnly ? plan.mesh().size() : world);
    const int64_t microsteps = plan.microsteps();
    // Ranks on GPUs all-reduce gradients with NCCL, bootstrapped over the MPI world (which
    // keeps the host-side collectives: loss averages, schedule and replica checks); each rank
    // uses the GPU of its local rank. Collective: if a rank cannot start, every rank throws,
    // naming the ranks and causes. Declared before the executor, which holds its in-flight work.
    std::unique_ptr<tessel::rt::NcclCommunicator> nccl;
    if (device == "cuda" && world > 1 && emitBundle.empty() && !explainOnly)
      nccl = std::make_unique<tessel::rt::NcclCommunicator>(
          *comm, tessel::rt::NcclOptions{.timeoutSeconds = flags.commTimeout, .hostWait = false});
    if (!emitBundle.empty() && plan.dp() * microsteps > 1)
      throw std::runtime_error("--emit-bundle: bundles of data-parallel or accumulating plans are not supported "
                               "yet; use --plan dp=1 --grad-accumulation 1");

    gpt::GPT model(cfg);
    gpt::build(model, flags.batch);
    tessel::Program program =
        model.compile({.dump_ir_dir = flags.dumpIr,
                       .optimizer = train.optimizer,
                       .precision = flags.precisionType(),
                       .plan = plan});
    tessel::NativeOptions native{.threads = threads, .seed = flags.seed, .profile = profile};
    if (flags.explain && rank == 0) {
      fmt::print("plan: {} ({} rank{}), global batch {}, {} rows per rank per microstep\n", plan.describe(),
                 plan.mesh().size(), plan.mesh().size() == 1 ? "" : "s",
                 flags.batch, flags.batch / (plan.dp() * microsteps));
      std::string report = tessel::rt::explainCollectives(program.lower(false), "train_step");
      fmt::print("{}", report.empty() ? "no collectives: the program runs on one rank\n" : report);
      if (explainOnly) return 0;
    }
    if (!emitBundle.empty()) {
      const bool cuda = device == "cuda";
      tessel::rt::Program lowered = program.lower(cuda);
      tessel::KernelLibrary lib = tessel::buildKernelLibrary(lowered.kernelSource);
      std::optional<tessel::rt::CudaBinary> binary;
      if (cuda) binary = compileForGpu(lowered, cudaArch);
      tessel::rt::BundleInfo info;
      info.model = "gpt";
      info.config = {{"layers", cfg.layers}, {"channels", cfg.channels}, {"heads", cfg.heads},
                     {"seq", cfg.seq}, {"vocab", cfg.vocab}};
      info.seq = flags.seq;
      info.batch = flags.batch;
      info.optimizer = train.optimizer;
      tessel::rt::writeBundle(lowered, lib.path(), info, emitBundle, binary ? &*binary : nullptr);
      fmt::print("tessel-gpt: wrote bundle '{}' (L={} C={} NH={} T={} B={}{}, {} parameters{}); "
                 "train it with: tessel-run {}\n",
                 emitBundle, cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch,
                 cfg.vocab == 256 ? std::string() : fmt::format(" V={}", cfg.vocab),
                 tessel::trainer::parameterCount(program),
                 cuda ? fmt::format(", CUDA kernels for {}", cudaArch) : std::string(), emitBundle);
      return 0;
    }
    tessel::TextDataset data(flags.data);
    data.requireSequenceLength(flags.seq);
    tessel::trainer::requireLogIsNotData(train.logJson, data);

    // The CPU program (also the sampler's source of parameters), or the GPU executor.
    std::optional<tessel::NativeProgram> cpu;
    std::unique_ptr<tessel::rt::CudaExecutor> gpu;
    if (device == "cuda") {
      tessel::rt::Program lowered = program.lower(/*cuda_kernels=*/true);
      tessel::rt::CudaBinary binary = compileForGpu(lowered, cudaArch);
      gpu = std::make_unique<tessel::rt::CudaExecutor>(std::move(lowered), binary,
                                                       tessel::rt::CudaExecutorOptions{-1, graphs});
      gpu->setCommunicator(nccl.get());
      gpu->initParameters(flags.seed);
      if (flags.checkSchedule) tessel::rt::checkCollectiveSchedule(gpu->program(), *comm);
    } else {
      cpu = program.native(native);
      cpu->executor().setCommunicator(comm);
      if (flags.checkSchedule) {
        tessel::rt::checkCollectiveSchedule(cpu->program(), *comm);
        if (rank == 0) fmt::print("schedule check: the {} ranks' collective schedules agree\n", world);
      }
    }
    tessel::rt::ProgramExecutor& ex = gpu ? static_cast<tessel::rt::ProgramExecutor&>(*gpu) : cpu->executor();
    if (rank == 0)
      fmt::print("tessel-gpt: L={} C={} NH={} T={} B={}, {} parameters, arena {:.1f} MiB, data "
               "'{}' ({} bytes){}\n",
               cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch,
               tessel::trainer::parameterCount(program),
               static_cast<double>(ex.arenaBytes()) / (1 << 20), data.path(), data.size(),
               gpu ? ", device " + gpu->deviceName() : std::string());

    std::mt19937_64 rng(flags.seed), valRng(flags.seed + 1);  // text generation at the end
    const tessel::trainer::TextBatchOptions batches{&data,  flags.batch, flags.seq, rank,
                                                    world,  microsteps,  flags.seed};
    train.microsteps = microsteps;
    train.comm = comm;
    train.deviceComm = nccl.get();
    train.checkReplicas = flags.checkReplicas;
    train.steps = flags.steps;
    train.tokensPerStep = flags.batch * flags.seq;
    if (gpu)
      tessel::trainer::train(*gpu, train, tessel::trainer::textTrainFeeder(batches),
                             tessel::trainer::textValFeeder(batches));
    else
      tessel::trainer::train(*cpu, program, train, tessel::trainer::textTrainFeeder(batches),
                             tessel::trainer::textValFeeder(batches));
    if (rank != 0) return 0;  // rank 0 reports communication, memory and samples
    if (cpu) tessel::trainer::printCommunication(*cpu, flags.steps, world);
    if (profile && cpu) tessel::trainer::printProfile(*cpu, "train_step", flags.steps);
    fmt::print("memory: arena planned {:.2f} MiB, high-water {:.2f} MiB\n",
               static_cast<double>(ex.arenaBytes()) / (1 << 20),
               static_cast<double>(ex.highWaterBytes()) / (1 << 20));

    if (sample.bytes > 0) {
      gpt::GPT samplerModel(cfg);
      gpt::buildSampler(samplerModel);
      tessel::Program samplerProgram = samplerModel.compile({.train = false});
      tessel::NativeProgram sampler = samplerProgram.native(native);
      if (cpu) {
        sampler.copy_parameters_from(*cpu);
      } else {  // the trained parameters come down from the GPU, by name
        const tessel::rt::Program& mine = sampler.program();
        for (size_t i = 0; i < mine.buffers.size(); ++i) {
          if (mine.buffers[i].kind != tessel::rt::BufferKind::Parameter) continue;
          int j = gpu->program().findBuffer(mine.buffers[i].name);
          if (j >= 0 && gpu->program().buffers[j].bytes() == mine.buffers[i].bytes())
            gpu->readBuffer(j, sampler.executor().raw(static_cast<int>(i)));
        }
      }
      tessel::TokenBatch prompt = data.sample(tessel::Split::Val, 1, flags.seq, valRng);
      std::string text = tessel::trainer::sampleBytes(sampler, prompt.tokens, sample, rng);
      fmt::print("---- {} sampled bytes (temperature {}, top-k {}) ----\n{}\n----\n", sample.bytes,
                 sample.temperature, sample.topK, text);
    }
    return 0;
  });
}
