// tessel-run: trains a compiled bundle (written by `tessel-gpt`, `tessel-llama`, `tessel-mlp`
// or a lab's `tessel-lab-* --emit-bundle DIR`) with no compiler in the process: no MLIR, no LLVM, no host
// compiler. It reads and verifies the bundle, dlopens its kernels.so, initialises the
// parameters from --seed exactly as the JIT path does (Executor::initParameters), and runs
// the shared training loop (runtime/train/Loop.h) on byte text (gpt, llama), images (mlp) or
// the labs' synthetic data (lab-ddp, lab-unused, lab-fsdp, lab-tp),
// printing the same progress lines and JSON log.
//
// Ranks: the bundle records its plan. Under a launcher of N ranks (`mpirun -np N
// tessel-run DIR`) the plan must be for N ranks, or every rank refuses with one line; the
// ranks then check that they run the same command on the same data, and train their rows
// of each global batch (runtime/train/TextBatches.h, ImageBatches.h) exactly as
// `tessel-gpt --plan dp=N` does, so the losses are the JIT run's, bit for bit.
//
// Checkpoints (--checkpoint-dir, --checkpoint-every, --async-checkpoint, --resume, ...;
// runtime/train/Checkpointing.h) as the JIT trainers have them: a bundle's run saves and resumes
// the same checkpoints, so a job can move between tessel-gpt and tessel-run and between plans.
//
// --device cuda runs a bundle compiled for the GPU (tessel-gpt --emit-bundle DIR --device
// cuda) on the GPU executor (runtime/cuda/CudaExecutor.h) instead, from its cubin; the same
// bundle still runs on the CPU with --device cpu. --device auto picks the GPU when the bundle
// has CUDA kernels and a driver with a device is present.
#include "runtime/bundle/Bundle.h"
#include "runtime/bundle/BundleConfig.h"  // isLabModel
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/World.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/Driver.h"
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/ProgramProof.h"  // defines: proveTraining, proofLine
#include "runtime/exec/Sharding.h"  // deviceMeshFor
#include "runtime/data/TextDataset.h"
#include "runtime/train/Checkpointing.h"
#include "runtime/train/ImageBatches.h"
#include "runtime/train/LastValueWins.h"
#include "runtime/train/LogPath.h"
#include "runtime/train/RankData.h"
#include "runtime/train/Loop.h"
#include "runtime/train/Ranks.h"
#include "runtime/train/RunLog.h"  // requireDeviceMemory
#include "runtime/train/TextBatches.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <optional>

namespace {

int64_t parameterCount(const tessel::rt::Program& program) {
  int64_t n = 0;
  for (const tessel::rt::Buffer& b : program.buffers)
    if (b.kind == tessel::rt::BufferKind::Parameter) n += b.numel();
  return n;
}

struct RunFlags {
  std::string dir;   // BUNDLE
  std::string data;  // --data; empty: the model's default
  uint64_t seed = 1337;
  int threads = 0;
  int64_t steps = 300;
  std::string device = "auto";
  bool graphs = false;
  int index = -1;  // --cuda-device
  std::string deviceMemory;  // --device-memory SIZE ("": no limit)
  bool checkSchedule = false, checkReplicas = false;
  double commTimeout = 300.0;
};

/// The data a `model` bundle reads by default.
std::string defaultData(const std::string& model) {
  if (tessel::rt::isLabModel(model)) return "synthetic";
  return model == "mlp" ? "/usr/share/datasets/fashion-mnist" : "/usr/share/games/fortunes";
}

/// A bundle's data on this rank: the data sets, and what the loop reads of them (made as the
/// JIT trainers make it, runtime/train/RankData.h).
struct BundleData : tessel::trainer::RankData {
  std::unique_ptr<tessel::TextDataset> text;
  tessel::ImageDataset images, test;
  tessel::SyntheticSplits synthetic;
};

/// Loads the data a `model` bundle trains on ("gpt", "llama": byte text, "mlp": Fashion-MNIST,
/// the labs: synthetic data from the seed and the bundle's config) and
/// makes this rank's feeders. Throws naming the model when tessel-run cannot train it.
void loadData(BundleData& d, const tessel::rt::BundleInfo& info, const RunFlags& f, int rank, int world,
              int64_t firstStep) {
  const int64_t batch = info.batch, microsteps = info.plan.microsteps;
  if (info.model == "gpt" || info.model == "llama") {
    d.text = std::make_unique<tessel::TextDataset>(f.data.empty() ? defaultData(info.model) : f.data);
    d.text->requireSequenceLength(info.seq);
    const tessel::trainer::TextBatchOptions o{d.text.get(), batch,  info.seq, rank,
                                              world,        microsteps, f.seed, firstStep};
    static_cast<tessel::trainer::RankData&>(d) = tessel::trainer::textRankData(o);
  } else if (info.model == "mlp") {
    const std::string dir = f.data.empty() ? defaultData(info.model) : f.data;
    d.images = tessel::readFashionMnist(dir, tessel::Split::Train);
    d.test = tessel::readFashionMnist(dir, tessel::Split::Val);
    const tessel::trainer::ImageBatchOptions o{&d.images, &d.test, batch, rank, world, microsteps, f.seed, firstStep};
    static_cast<tessel::trainer::RankData&>(d) = tessel::trainer::imageRankData(o, dir);
  } else if (tessel::rt::isLabModel(info.model)) {
    // The labs (examples/labs) draw their data from the seed, with the options in the config
    // (checked with the bundle, rt::checkConfigFields).
    if (!f.data.empty() && f.data != "synthetic")
      throw std::runtime_error(fmt::format("--data '{}': the lab bundle '{}' trains on its synthetic data only",
                                           f.data, f.dir));
    static_cast<tessel::trainer::RankData&>(d) = tessel::trainer::syntheticRankData(
        tessel::syntheticOptions(info.config), d.synthetic,
        {.batch = batch, .rank = rank, .world = world, .microsteps = microsteps, .seed = f.seed,
         .firstStep = firstStep});
  } else {
    throw std::runtime_error(fmt::format("'{}/bundle.json': model '{}' is neither a byte-level language model (gpt, "
                                         "llama), an image classifier (mlp) nor a lab (lab-ddp, lab-unused, lab-fsdp, "
                                         "lab-tp); tessel-run trains only those",
                                         f.dir, info.model));
  }
}

/// The header line's and the run log's description of a bundle's model, e.g. "llama L=2 C=64
/// NH=4 NKV=2 H=256 T=32 B=8" or "lab-ddp 64 -> 128 -> GELU -> 5 B=32". It echoes the config's
/// values as JSON text (readBundle checked them; nothing here converts them).
std::string describeBundle(const tessel::rt::BundleInfo& info) {
  auto v = [&](const char* field) {
    const nlohmann::json& c = info.config;
    return c.is_object() && c.contains(field) && c.at(field).is_number() ? c.at(field).dump() : std::string("?");
  };
  const std::string& m = info.model;
  if (m == "gpt")
    return fmt::format("gpt L={} C={} NH={} T={} B={}", v("layers"), v("channels"), v("heads"), info.seq, info.batch);
  if (m == "llama")
    return fmt::format("llama L={} C={} NH={} NKV={} H={} T={} B={}", v("layers"), v("channels"), v("heads"),
                       v("kv_heads"), v("hidden"), info.seq, info.batch);
  if (m == "mlp")
    return fmt::format("mlp {} -> {} -> {} -> {} B={}", v("pixels"), v("hidden"), v("hidden"), v("classes"),
                       info.batch);
  if (m == "lab-fsdp")
    return fmt::format("{} {} -> {} blocks of C={} -> {} B={}", m, v("features"), v("layers"), v("channels"),
                       v("classes"), info.batch);
  return fmt::format("{} {} -> {} -> GELU -> {} B={}", m, v("features"), v("hidden"), v("classes"), info.batch);
}

/// "bf16" when the bundle's program computes in bf16 (mixed precision), else "f32": the
/// trainer state's precision (informative; a run may resume in another precision).
std::string precisionOf(const tessel::rt::Program& program) {
  for (const tessel::rt::Buffer& b : program.buffers)
    if (b.dtype == tessel::rt::DType::BF16) return "bf16";
  return "f32";
}

int runBundle(const RunFlags& f, tessel::trainer::TrainOptions train, tessel::trainer::CheckpointFlags ck,
              int argc, char** argv, std::optional<tessel::rt::World>& ranks) {
  tessel::trainer::checkCheckpointFlags(ck, f.steps);
  tessel::rt::Bundle bundle = tessel::rt::readBundle(f.dir);
  // Before anything is opened for writing: the log is none of what this process reads.
  const std::vector<tessel::trainer::ReadPath> reads = {
      {"the bundle folder", f.dir}, {"the data", f.data.empty() ? defaultData(bundle.info.model) : f.data}};
  tessel::trainer::requireLogIsNotRead(train.logJson, reads);
  tessel::trainer::requireLogIsNotRead(tessel::trainer::reportPagePath(train.reportDir), reads, "--report");
  const tessel::rt::BundlePlan& plan = bundle.info.plan;
  // The ranks: the launcher's world must be the bundle's plan; every rank decides alike.
  ranks = tessel::rt::makeWorld({.timeoutSeconds = f.commTimeout});
  const int rank = ranks->info.rank, world = ranks->comm->worldSize();
  tessel::rt::Communicator* comm = ranks->comm.get();
  tessel::trainer::checkSameCommandLine(argc, argv, *comm);
  tessel::trainer::requireWorldSize(world, plan.ranks(), plan.meshText(), "compile the bundle with");
  {
    tessel::trainer::DataFingerprint loaded;  // what identifies the bundle: its checksums
    for (const std::string* sum : {&bundle.info.programChecksum, &bundle.info.kernelsChecksum})
      loaded.add(sum->c_str(), sum->size() + 1);
    if (bundle.cuda) loaded.add(bundle.cuda->cubin.data(), bundle.cuda->cubin.size());
    tessel::trainer::requireSameBundle(*comm, loaded, fmt::format("'{}'", f.dir));
  }
  // Decide the device before anything else is loaded: "cuda" without a driver is an error.
  // Ranks launched onto GPUs learn together (the NCCL bootstrap) whether every rank can.
  const bool hasCuda = bundle.cuda.has_value();
  const bool gpuRanks = f.device == "cuda" && world > 1;
  std::string device = gpuRanks ? std::string("cuda") : tessel::rt::resolveDevice(f.device, /*cudaBackendReady=*/true);
  if (device == "cuda" && !hasCuda) {
    if (f.device == "cuda")
      throw std::runtime_error(fmt::format("'{}' has no CUDA kernels; compile it for the GPU with --emit-bundle "
                                           "DIR --device cuda, or use --device cpu", f.dir));
    device = "cpu";
  }
  // Where a resumed run starts, before the feeders: every rank reads the checkpoint's index.
  tessel::trainer::RunIdentity identity{.model = bundle.info.model, .config = bundle.info.config,
                                        .globalBatch = bundle.info.batch, .seed = f.seed,
                                        .optimizer = bundle.info.optimizer,
                                        .precision = precisionOf(bundle.program), .plan = plan.meshText(),
                                        .mesh = plan.mesh, .worldSize = world};
  tessel::trainer::ResumePoint resume = tessel::trainer::findResumePoint(ck, identity);
  ck.commitTimeoutSeconds = f.commTimeout;
  tessel::trainer::checkCheckpointFlags(ck, f.steps, resume.step);
  BundleData data;
  // The batch is split over the plan's batch axes only (with HSDP the replicated and the fully
  // sharded axis); tensor-parallel peers feed the same rows.
  const auto [batchRank, batchRanks] = tessel::trainer::batchShard(plan.mesh, plan.batchAxes(), rank);
  loadData(data, bundle.info, f, batchRank, batchRanks, resume.step);
  tessel::trainer::requireSameData(*comm, data.fingerprint, data.where);
  identity.data = data.fingerprint;  // recorded in each checkpoint, compared on resume
  identity.dataWhere = data.where;
  tessel::trainer::checkResumeData(resume, identity, ck.allowPartial);
  // Before anything is allocated for the program (NCCL's bootstrap allocates device memory).
  tessel::trainer::requireDeviceMemory(bundle.program, f.deviceMemory, rank, plan.meshText());
  std::unique_ptr<tessel::rt::NcclCommunicator> nccl;  // outlives the executor's in-flight work
  if (device == "cuda" && world > 1)
    nccl = std::make_unique<tessel::rt::NcclCommunicator>(
        *comm, tessel::rt::NcclOptions{.timeoutSeconds = f.commTimeout, .device = f.index, .hostWait = false});
  tessel::KernelLibrary lib;
  tessel::rt::Program program = std::move(bundle.program);
  // The program's mesh over the world (NCCL's on GPUs), if it has one; outlives the executor.
  std::unique_ptr<tessel::rt::DeviceMesh> mesh;
  if (!program.mesh.empty()) mesh = tessel::rt::deviceMeshFor(program, nccl ? *nccl : *comm);
  std::unique_ptr<tessel::rt::ProgramExecutor> ex;
  tessel::rt::CudaExecutor* gpu = nullptr;
  if (device == "cuda") {
    auto g = std::make_unique<tessel::rt::CudaExecutor>(std::move(program), *bundle.cuda,
                                                        tessel::rt::CudaExecutorOptions{f.index, f.graphs});
    g->setCommunicator(nccl.get());
    g->setMesh(mesh.get());
    gpu = g.get();
    ex = std::move(g);
  } else {
    tessel::rt::requireCpuKernels(bundle);
    lib = tessel::loadKernelLibrary(bundle.kernelsPath);
    auto cpu = std::make_unique<tessel::rt::Executor>(
        std::move(program), [&lib](const std::string& s) { return lib.symbol(s); },
        tessel::rt::ExecutorOptions{f.threads, false});
    cpu->setCommunicator(comm);
    cpu->setMesh(mesh.get());
    ex = std::move(cpu);
  }
  // Before any step: the ranks' communication, proved together (runtime/exec/ProgramProof.h).
  if (world > 1) {
    const auto proof = tessel::rt::proveTraining(ex->program(), *comm);
    if (rank == 0) fmt::print("{}", tessel::rt::proofLine(proof, world));
  }
  if (f.checkSchedule) tessel::rt::checkCollectiveSchedule(ex->program(), *comm);
  ex->initParameters(f.seed);
  const std::string shape = describeBundle(bundle.info);
  if (rank == 0)
    fmt::print("tessel-run: bundle '{}' ({}{}), {} parameters, arena {:.1f} MiB, {}, device {}{}\n", f.dir, shape,
               plan.ranks() * plan.microsteps == 1 ? std::string() : ", plan " + plan.meshText() +
                   (plan.microsteps > 1 ? fmt::format(" x {} microsteps", plan.microsteps) : std::string()),
               parameterCount(ex->program()), static_cast<double>(ex->arenaBytes()) / (1 << 20), data.describe,
               ex->deviceName(), gpu ? (gpu->usingGraphs() ? ", CUDA graphs" : ", eager launches") : "");

  train.steps = f.steps;
  train.tokensPerStep = data.itemsPerStep;
  train.throughputUnit = data.unit;
  train.optimizer = bundle.info.optimizer;
  train.microsteps = plan.microsteps;
  train.comm = comm;
  train.deviceComm = nccl.get();
  train.checkReplicas = f.checkReplicas;
  train.counters = [&] {
    return gpu ? gpu->collectiveCounters() : static_cast<tessel::rt::Executor&>(*ex).collectiveCounters();
  };
  train.runInfo = {{"model", bundle.info.model}, {"describe", shape}, {"plan", plan.meshText()},
                   {"device", ex->deviceName()}, {"batch", bundle.info.batch}, {"seed", f.seed},
                   {"bundle", f.dir}, {"config", bundle.info.config}};
  {
    // Loads the checkpoint over the initialised parameters, and saves (collective).
    tessel::trainer::CheckpointSession checkpoints(*ex, comm, ck, identity, std::move(resume), train);
    checkpoints.attach(train);
    tessel::trainer::train(*ex, train, data.train, data.val);
    checkpoints.finish();
  }
  const int64_t ran = std::max<int64_t>(1, tessel::trainer::stepsRun(train));
  if (rank == 0) {  // what the collectives cost, as the JIT trainers print it
    const tessel::rt::CollectiveCounters& counters = gpu ? gpu->collectiveCounters()
                                                         : static_cast<tessel::rt::Executor&>(*ex).collectiveCounters();
    fmt::print("{}", tessel::rt::communicationSummary(ex->program(), counters, ran, world));
  }
  if (rank == 0)
    fmt::print("memory: arena planned {:.2f} MiB, high-water {:.2f} MiB\n",
               static_cast<double>(ex->arenaBytes()) / (1 << 20),
               static_cast<double>(ex->highWaterBytes()) / (1 << 20));
  if (gpu && rank == 0) {
    tessel::rt::CudaMemoryReport m = gpu->memory();
    auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
    fmt::print("device memory: allocated {:.1f} MiB (persistent {:.1f}, arena {:.1f}, workspace {:.1f}); "
               "peak used on the device {:.1f} MiB of {:.1f} MiB\n",
               mib(m.allocated), mib(m.persistent), mib(m.arena), mib(m.workspace), mib(m.devicePeakUsed),
               mib(m.deviceTotal));
    fmt::print("device time: train_step {:.3f} ms per step ({})\n",
               gpu->deviceMilliseconds("train_step") / static_cast<double>(ran),
               gpu->usingGraphs() ? "CUDA graphs" : "eager launches");
  }
  ex.reset();  // before the library it calls into
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel-run: train a compiled bundle (--emit-bundle DIR of tessel-gpt, tessel-llama, "
               "tessel-mlp or a tessel-lab-*); no compiler needed", "tessel-run"};
  RunFlags f;
  app.add_option("BUNDLE", f.dir, "bundle folder written by --emit-bundle")
      ->required()->check(tessel::trainer::nonEmpty("bundle folder"));
  app.add_option("--data", f.data, "the data: for a gpt or llama bundle a text file or a folder of text files "
                 "(default /usr/share/games/fortunes); for an mlp bundle a Fashion-MNIST folder (default "
                 "/usr/share/datasets/fashion-mnist)")->check(tessel::trainer::nonEmpty("file or folder"));
  // The same range as the trainers' --seed (dsl/trainer/Flags.cpp): out of range is an error,
  // never a saturated or wrapped seed.
  app.add_option("--seed", f.seed, "parameter init and batch sampling")->capture_default_str()
      ->check(tessel::trainer::integerIn(0, int64_t{1} << 62));
  app.add_option("--steps", f.steps, "number of training steps")->capture_default_str()
      ->check(tessel::trainer::integerIn(1, int64_t{1} << 40));
  app.add_option("--threads", f.threads, "CPU threads (0: all cores)")->check(tessel::trainer::integerIn(0, 1024));
  app.add_option("--device", f.device, "where to run: cpu, cuda, or auto (the GPU when the bundle has CUDA "
                 "kernels and a GPU is usable)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_flag("--cuda-graphs", f.graphs, "capture a training step into a CUDA graph and replay it");
  app.add_option("--device-memory", f.deviceMemory,
                 "memory of one device, e.g. 80GiB or 500MB: refuse, before anything is allocated, a bundle whose "
                 "program needs more on a rank (runtime/exec/MemoryBreakdown.h)")
      ->check(tessel::trainer::memorySize());
  app.add_option("--cuda-device", f.index, "CUDA device index (default: the local rank, else 0)")
      ->check(tessel::trainer::integerIn(0, 1023));
  tessel::trainer::addCommFlags(app, f.checkSchedule, f.checkReplicas, f.commTimeout);
  tessel::trainer::TrainOptions train;
  tessel::trainer::addTrainFlags(app, train, /*optimizerFlag=*/false);
  tessel::trainer::CheckpointFlags checkpoints;
  tessel::trainer::addCheckpointFlags(app, checkpoints);
  try {
    tessel::trainer::lastValueWins(app);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // The world outlives the error handlers: a failed collective ends the job there
  // (rt::abortJob) without the world's orderly shutdown, which would wait for peers.
  std::optional<tessel::rt::World> ranks;
  return tessel::trainer::runGuarded("tessel-run", [&] { return runBundle(f, train, checkpoints, argc, argv, ranks); });
}
