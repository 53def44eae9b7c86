// The trainer application; see App.h.
#include "dsl/trainer/App.h"
#include "runtime/train/StartupTimes.h"

#include "codegen/GemmTuner.h"
#include "codegen/HostCompiler.h"
#include "codegen/Nvrtc.h"
#include "dsl/trainer/ExplainPipeline.h"
#include "dsl/trainer/Trainer.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/bundle/BundleConfig.h"
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/World.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/exec/Collectives.h"
#include "runtime/exec/AllocationCounter.h"
#include "runtime/exec/CpuGemm.h"  // cpuGemmThreads
#include "runtime/exec/ExportParams.h"
#include "runtime/exec/MemoryBreakdown.h"
#include "runtime/exec/ProgramProof.h"  // defines: proveTraining, proofLine
#include "runtime/exec/Sharding.h"  // deviceMeshFor
#include "runtime/train/LogPath.h"
#include "runtime/train/RunLog.h"  // requireDeviceMemory
#include "runtime/train/Progress.h"  // stdoutIsTerminal

#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <optional>

namespace tessel::trainer {

namespace {

/// The CUDA module of `program` (NVRTC, cached): a cubin for `arch` and its PTX.
rt::CudaBinary compileForGpu(const rt::Program& program, const std::string& arch) {
  CudaCompileOptions o;
  o.arch = arch;
  o.lineInfo = false;  // a bundle ships: keep the cubin small
  CudaModule m = compileCuda(program.cudaSource, o);
  return {arch, std::string(m.cubin.begin(), m.cubin.end()), m.ptx};
}

/// The plan as bundle.json records it.
rt::BundlePlan bundlePlan(const Plan& plan) {
  rt::BundlePlan p;
  // Every axis of the plan's mesh, in its order (the program's mesh is checked against it);
  // a plan without one (a single rank) records the batch axis alone. A plan that does not
  // split the batch (tensor parallelism alone) records no batch axis.
  p.mesh = plan.mesh().axes();
  if (p.mesh.empty()) p.mesh = {{"dp", 1}};
  p.batchAxis = plan.batch_axis();
  p.fullyShardAxis = plan.fully_shard_axis();
  if (p.batchAxis.empty() && p.mesh.size() == 1 && p.mesh[0].first == "dp") p.batchAxis = "dp";
  p.microsteps = plan.microsteps();
  p.bucketMb = plan.bucket_mb();
  p.overlap = plan.overlap();
  return p;
}

/// --emit-bundle: lowers `program` (with CUDA kernels for --device cuda) and writes the bundle.
void emitBundle(const Program& program, const ModelRecipe& recipe, const Flags& flags, const RunFlags& run,
                const std::string& optimizer, const Plan& plan, const std::string& name) {
  const bool cuda = flags.device == "cuda";
  rt::Program lowered = program.lower(cuda);
  KernelLibrary lib = buildKernelLibrary(lowered.kernelSource);
  // The CPU GEMM libraries, chosen here as the trainer would (codegen/GemmTuner.h, the same
  // cache), so that tessel-run on a CPU computes exactly what this trainer computes (a CUDA
  // bundle's GPU runs every GEMM with cuBLASLt whatever they say).
  tuneGemms(lowered, {.policy = gemmPolicyFromEnvironment(), .threads = run.threads, .cacheDir = kernelCacheDir({})});
  std::optional<rt::CudaBinary> binary;
  if (cuda) binary = compileForGpu(lowered, run.cudaArch);
  rt::BundleInfo info;
  info.model = recipe.model;
  info.config = recipe.config;
  info.seq = recipe.seq > 0 ? recipe.seq : 1;
  info.batch = flags.batch;
  info.optimizer = optimizer;
  info.plan = bundlePlan(plan);
  rt::writeBundle(lowered, lib.path(), info, run.emitBundle, binary ? &*binary : nullptr);
  const int64_t ranks = plan.mesh().size();
  // tessel-run feeds only the data of the models Tessel ships; say so rather than suggest a
  // command that would refuse this bundle.
  const std::string next =
      rt::tesselRunFeeds(recipe.model)
          ? fmt::format("train it with: {}tessel-run {}", ranks == 1 ? std::string() : fmt::format("mpirun -np {} ", ranks),
                        run.emitBundle)
          : fmt::format("tessel-run feeds only the data of gpt, llama, mlp and lab bundles, not of model '{}'",
                        recipe.model);
  fmt::print("{}: wrote bundle '{}' ({}, {} parameters{}{}); {}\n", name, run.emitBundle, recipe.describe,
             parameterCount(program), cuda ? fmt::format(", CUDA kernels for {}", run.cudaArch) : std::string(),
             ranks * plan.microsteps() == 1 ? std::string() : ", plan " + plan.describe(), next);
}

/// --memory-json's object: the compiled program's memory per rank (rt::memoryJson; every rank
/// runs this one program) with the padding each rank holds, for `tessel memory --model`.
nlohmann::json memoryReport(const rt::Program& lowered, const Plan& plan, int64_t parameters) {
  const int64_t world = plan.mesh().size();
  nlohmann::json j;
  j["format"] = "tessel-memory-compiled";
  j["plan"] = plan.describe();
  j["world"] = world;
  j["parameters"] = parameters;
  j["per_rank"] = rt::memoryJson(rt::memoryBreakdown(lowered));
  nlohmann::json padding = nlohmann::json::array();
  for (int r = 0; r < world; ++r) padding.push_back(rt::paddingBytes(lowered, r));
  j["padding_by_rank"] = padding;
  return j;
}

/// --dump-ir DIR: creates the folder (as the pipeline would) before anything is compiled, so
/// that a path that is a file, or a folder that cannot be made, is an error naming the flag
/// and the path rather than one at the model's source line, where the pipeline reports it.
void prepareDumpIrFolder(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw std::runtime_error(fmt::format("--dump-ir '{}': exists and is not a folder", dir));
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("--dump-ir '{}': cannot create the folder: {}", dir, ec.message()));
}

}  // namespace

TrainerApp::TrainerApp(CLI::App& app, Flags& flags, TrainOptions& train, const DataFlag& data)
    : app_(app), flags_(flags), train_(train) {
  addCommonFlags(app, flags, data.defaultPath, data.help, data.minSteps, data.stepsHelp);
  addTrainFlags(app, train);
  addCheckpointFlags(app, checkpoints_);
  app.add_option("--threads", run_.threads, "CPU threads (0: all cores)")->check(integerIn(0, 1024));
  app.add_flag("--profile", run_.profile, "time every step and print where a train step's time goes");
  app.add_flag("!--no-gemm-epilogues", run_.gemmEpilogues,
               "compile without tessel-fuse-gemm-epilogues: bias adds, GELU, residual adds and bias gradients as "
               "separate kernels (to compare with the fused program)");
  app.add_option("--emit-bundle", run_.emitBundle,
                 "only compile, in one plain process, for any --plan but a pipeline (pp): write the train program as "
                 "a bundle folder for tessel-run (with --device cuda: with CUDA kernels and a cubin; no GPU needed)")
      ->type_name("DIR")->check(nonEmpty("folder"));
  app.add_option("--cuda-arch", run_.cudaArch, "GPU architecture of the cubin in a CUDA bundle")
      ->capture_default_str()->check(nonEmpty("GPU architecture (such as sm_90)"));
  app.add_flag("--cuda-graphs", run_.graphs, "on the GPU: capture a training step into a CUDA graph and replay it");
  addPipelineCostFlags(app, ppCost_);
}

int TrainerApp::run(int argc, char** argv, const std::function<ModelRecipe()>& makeRecipe) {
  return runMain(app_, argc, argv, [&] { return train(argc, argv, makeRecipe()); });
}

void TrainerApp::join(int argc, char** argv, const Plan& plan, bool compileOnly) {
  const rt::WorldInfo launch = rt::detectWorld();
  const int64_t planRanks = plan.mesh().size();
  if (!run_.emitBundle.empty() && launch.launched() && launch.size != 1) {
    // Joined to learn the size (a PMIx launcher tells it only to MPI), and so that every rank
    // reports before any exits (see world_).
    world_ = rt::makeWorld({.timeoutSeconds = flags_.commTimeout});
    if (world_->comm->worldSize() > 1)
      throw std::runtime_error(fmt::format("launched as {} ranks, but --emit-bundle only compiles, in one plain "
                                           "process, for any plan; run it without a launcher",
                                           world_->comm->worldSize()));
  }
  if (compileOnly) {
    plan.check_world_size(planRanks);  // only the axes: the plan is for any world
    return;
  }
  world_ = rt::makeWorld({.timeoutSeconds = flags_.commTimeout});
  // First the collective check, so that ranks with other plans on their command lines are
  // told so rather than deciding differently below.
  checkSameCommandLine(argc, argv, *world_->comm);
  const int world = world_->comm->worldSize();
  if (launch.launched()) requireWorldSize(world, planRanks, flags_.plan, "pass");
  plan.check_world_size(world);  // unsupported axes; in a plain run, the launch the plan needs
}

int TrainerApp::train(int argc, char** argv, const ModelRecipe& recipe) {
  const std::string name = app_.get_name();
  const Plan plan = planFromFlags(flags_);
  prepareDumpIrFolder(flags_.dumpIr);
  checkCheckpointFlags(checkpoints_, flags_.steps);  // the steps again below, once the recipe set them
  const int64_t planRanks = plan.mesh().size();
  const bool emitting = !run_.emitBundle.empty();
  // Each pipeline stage compiles a program of its own; a bundle holds one program for every
  // rank (runtime/bundle), so it cannot hold a pipeline yet.
  if (emitting && plan.pp() > 1)
    throw std::runtime_error(fmt::format("--emit-bundle: bundles of pipeline plans are not supported yet (the plan "
                                         "{} has {} pipeline stages, each with its own program); train it with "
                                         "mpirun -np {} {} instead",
                                         plan.describe(), plan.pp(), planRanks, name));
  // Microbatches per @train_step under a pipeline (M_eff = microbatches x grad accumulation),
  // 0 otherwise; the data is then cut into M_eff microbatches per step instead of microsteps.
  const int64_t pipelineMicrobatches = plan.pipeline_microbatches_per_step();
  const int64_t microbatches = pipelineMicrobatches > 0 ? pipelineMicrobatches : plan.microsteps();
  // Before anything is opened for writing: the log is none of what this process reads.
  const std::vector<ReadPath> reads = {{"the data", flags_.data},
                                       {"the kernel cache", kernelCacheDir({})},
                                       {"the CUDA kernel cache", cubinCacheDir({})}};
  requireLogIsNotRead(train_.logJson, reads);
  requireLogIsNotRead(reportPagePath(train_.reportDir), reads, "--report");
  // Compiling only (a bundle, --memory-json, or --explain of a plan for other than one rank) happens in one
  // plain process, for any plan: no world to join.
  const bool compileOnly = emitting || flags_.memoryJson ||
                           (flags_.explain && !rt::detectWorld().launched() && planRanks != 1);
  join(argc, argv, plan, compileOnly);
  rt::Communicator* comm = world_ ? world_->comm.get() : nullptr;
  const int rank = world_ ? world_->info.rank : 0, world = comm ? comm->worldSize() : 1;
  // The device. Emitting needs none: --device cuda only asks for CUDA kernels in the bundle.
  // Ranks launched onto GPUs learn together whether every rank can use its GPU (the NCCL
  // bootstrap), so one rank without a GPU makes every rank exit with the reasons.
  const bool gpuRanks = flags_.device == "cuda" && world > 1;
  const std::string device = compileOnly ? flags_.device
                             : gpuRanks  ? std::string("cuda")
                                         : resolveDeviceFlag(flags_, name, /*cudaReady=*/true);
  std::unique_ptr<rt::NcclCommunicator> nccl;  // declared before the executor, which holds its work
  // This rank's stage: its coordinate along the pipeline axis (stage 0 when only compiling).
  const int64_t stage =
      plan.pp() > 1 ? batchShard(plan.mesh().axes(), std::vector<std::string>{plan.pipeline_axis()}, rank).first : 0;
  rt::markStartupPhase("process start and flags");
  const bool decomposeAttention = flags_.attention == "decomposed" || (flags_.attention == "auto" && device == "cuda");
  Program program = recipe.compile({.dump_ir_dir = flags_.dumpIr,
                                    .optimizer = train_.optimizer,
                                    .precision = flags_.precisionType(),
                                    .plan = plan,
                                    .pipeline_stage = stage,
                                    .decompose_attention = decomposeAttention,
                                    .fuse_gemm_epilogues = run_.gemmEpilogues});
  rt::markStartupPhase("compile (graph and MLIR passes)");
  if (flags_.memoryJson) {
    fmt::print("{}\n", memoryReport(program.lower(false), plan, parameterCount(program)).dump(2));
    return 0;
  }
  // Under a pipeline, every stage's cost model for --explain's chart and --trace's predicted
  // track: compiling only, this process compiles every stage; launched, each rank models its own
  // stage and the ranks combine them (collective).
  std::optional<rt::PipelineInfo> pipelineInfo;
  std::vector<StageModel> stageModels;
  if (plan.pp() > 1 && (flags_.explain || !train_.traceFile.empty())) {
    const rt::Program lowered = program.lower(false);
    pipelineInfo = lowered.pipeline;
    const StageModel mine = stageModel(lowered, ppCost_);
    stageModels = compileOnly ? std::vector<StageModel>{mine} : gatherStageModels(mine, stage, plan.pp(), comm);
    for (int64_t s = 1; compileOnly && s < plan.pp(); ++s) {
      const Program other = recipe.compile({.dump_ir_dir = "", .optimizer = train_.optimizer,
                                            .precision = flags_.precisionType(), .plan = plan, .pipeline_stage = s,
                                            .decompose_attention = decomposeAttention,
                                            .fuse_gemm_epilogues = run_.gemmEpilogues});
      stageModels.push_back(stageModel(other.lower(false), ppCost_));
    }
  }
  // Before any rank allocates: every rank runs the same program, so each finds the same answer
  // and every rank refuses (each naming itself) without waiting for the others.
  if (!flags_.deviceMemory.empty()) requireDeviceMemory(program.lower(false), flags_.deviceMemory, rank, plan.describe());
  // NCCL's bootstrap allocates device memory, so it comes after the --device-memory check.
  if (device == "cuda" && world > 1)
    nccl = std::make_unique<rt::NcclCommunicator>(*comm, rt::NcclOptions{.timeoutSeconds = flags_.commTimeout,
                                                                         .hostWait = false});

  if (flags_.explain && rank == 0) {
    fmt::print("plan: {} ({} rank{}), global batch {}, {} rows per rank per {}\n", plan.describe(), planRanks,
               planRanks == 1 ? "" : "s", flags_.batch, flags_.batch / (plan.dp() * microbatches),
               pipelineMicrobatches > 0 ? "microbatch" : "microstep");
    const rt::Program lowered = program.lower(false);
    fmt::print("{}", rt::explainShardings(lowered));
    std::string report = rt::explainCollectives(lowered, "train_step");
    fmt::print("{}", report.empty() ? "no collectives: the program runs on one rank\n" : report);
    if (auto f = recipe.communication ? recipe.communication(plan) : std::nullopt) {
      const rt::CollectiveBytes counted = rt::collectiveBytes(lowered, "train_step");
      auto ratio = [](int64_t got, int64_t want) { return want == 0 ? (got == 0 ? 1.0 : 0.0) : double(got) / want; };
      fmt::print("closed form per rank per step: all_reduce {} = {} bytes (counted / closed form {:.2f}), "
                 "all_gather {} = {} bytes ({:.2f})\n",
                 f->allReduce, f->allReduceBytes, ratio(counted.kindPayloadBytes[0], f->allReduceBytes),
                 f->allGather, f->allGatherBytes, ratio(counted.kindPayloadBytes[1], f->allGatherBytes));
    }
    // The activation arena (codegen/MemoryPlan): every temporary of a step, placed before
    // launch; activation checkpointing lowers it.
    fmt::print("memory: activation arena {} bytes ({:.3f} MiB) per rank\n", lowered.arenaBytes(),
               static_cast<double>(lowered.arenaBytes()) / (1 << 20));
    fmt::print("{}", rt::explainMemory(lowered, rt::memoryBreakdown(lowered)));
    if (device == "cpu" && !emitting) {  // each GEMM's CPU library (codegen/GemmTuner.h); cached for the run
      rt::Program tuned = lowered;
      const GemmPolicy policy = gemmPolicyFromEnvironment();
      const auto choices = tuneGemms(tuned, {.policy = policy, .threads = run_.threads, .cacheDir = kernelCacheDir({})});
      fmt::print("{}", explainGemmChoices(choices, policy, rt::cpuGemmThreads()));
    }
    if (pipelineInfo) fmt::print("{}", explainPipeline(*pipelineInfo, stageModels, ppCost_));
    if (compileOnly && !emitting) return 0;
  }
  if (emitting) {
    emitBundle(program, recipe, flags_, run_, train_.optimizer, plan, name);
    return 0;
  }
  train_.steps = flags_.steps;  // the recipe may give --steps 0 a meaning (e.g. one epoch)
  // The batch is split over the plan's batch axes only (shard_batch's and fully_shard's):
  // ranks that differ on other axes (the tp ranks of one data-parallel replica) feed the
  // same rows.
  const auto [batchRank, batchRanks] = batchShard(plan.mesh().axes(), plan.batch_axes(), rank);
  // Where a resumed run starts, before the feeders: every rank reads the checkpoint's index.
  RunIdentity identity{.model = recipe.model, .config = recipe.config, .globalBatch = flags_.batch,
                       .seed = flags_.seed, .optimizer = train_.optimizer, .precision = flags_.precision,
                       .plan = plan.describe(), .mesh = plan.mesh().axes(), .worldSize = world};
  ResumePoint resume = findResumePoint(checkpoints_, identity);
  checkpoints_.commitTimeoutSeconds = flags_.commTimeout;
  RankData data =
      recipe.data({batchRank, batchRanks, flags_.batch, microbatches, flags_.seed, resume.step}, train_);
  requireSameData(*comm, data.fingerprint, data.where);
  rt::markStartupPhase("data");
  identity.data = data.fingerprint;  // recorded in each checkpoint, compared on resume
  identity.dataWhere = data.where;
  checkResumeData(resume, identity, checkpoints_.allowPartial);
  checkCheckpointFlags(checkpoints_, train_.steps, resume.step);

  // The CPU program, or the GPU executor.
  NativeOptions native{.threads = run_.threads, .seed = flags_.seed, .profile = run_.profile, .world = comm,
                       .announce_build = stdoutIsTerminal()};
  std::optional<NativeProgram> cpu;
  std::unique_ptr<rt::DeviceMesh> gpuMesh;  // the program's mesh over NCCL; outlives the executor
  std::unique_ptr<rt::CudaExecutor> gpu;
  if (device == "cuda") {
    rt::Program lowered = program.lower(/*cuda_kernels=*/true);
    rt::CudaBinary binary = compileForGpu(lowered, run_.cudaArch);
    gpuMesh = rt::deviceMeshFor(lowered, nccl ? *nccl : *comm);  // one rank: groups of one, no NCCL
    gpu = std::make_unique<rt::CudaExecutor>(std::move(lowered), binary, rt::CudaExecutorOptions{-1, run_.graphs});
    gpu->setCommunicator(nccl.get());
    gpu->setMesh(gpuMesh.get());
    gpu->initParameters(flags_.seed);
  } else {
    cpu = program.native(native);  // with the world: its mesh, if the program has one
  }
  rt::ProgramExecutor& ex = gpu ? static_cast<rt::ProgramExecutor&>(*gpu) : cpu->executor();
  // Before any step: the ranks' communication, proved together (runtime/exec/ProgramProof.h).
  if (world > 1) {
    const auto proof = rt::proveTraining(ex.program(), *comm);
    if (rank == 0) fmt::print("{}", rt::proofLine(proof, world));
  }
  if (flags_.checkSchedule) {
    rt::checkCollectiveSchedule(ex.program(), *comm);
    if (rank == 0) fmt::print("schedule check: the {} ranks' collective schedules agree\n", world);
  }
  if (rank == 0)
    fmt::print("{}: {}, {} parameters, arena {:.1f} MiB, {}{}\n", name, recipe.describe, parameterCount(program),
               static_cast<double>(ex.arenaBytes()) / (1 << 20), data.describe,
               gpu ? ", device " + gpu->deviceName() : std::string());

  train_.microsteps = pipelineMicrobatches > 0 ? 1 : plan.microsteps();  // a pipeline has no @accumulate_step
  train_.pipelineMicrobatches = pipelineMicrobatches;
  train_.comm = comm;
  train_.deviceComm = nccl.get();
  train_.checkReplicas = flags_.checkReplicas;
  if (train_.steps < 1) throw std::logic_error(name + ": the recipe left --steps 0 without a meaning");
  train_.tokensPerStep = data.itemsPerStep;
  train_.throughputUnit = data.unit;
  train_.counters = [&] { return gpu ? gpu->collectiveCounters() : cpu->executor().collectiveCounters(); };
  train_.runInfo = {{"model", recipe.model}, {"describe", recipe.describe}, {"plan", plan.describe()},
                    {"device", ex.deviceName()}, {"batch", flags_.batch}, {"seed", flags_.seed},
                    {"precision", flags_.precision}, {"config", recipe.config}};
  // Loads the checkpoint over the initialised parameters, and saves (collective).
  CheckpointSession checkpoints(ex, comm, checkpoints_, identity, std::move(resume), train_);
  checkpoints.attach(train_);
  if (cpu)
    trainer::train(*cpu, program, train_, data.train, data.val);
  else
    trainer::train(ex, train_, data.train, data.val);
  checkpoints.finish();
  if (pipelineInfo && !train_.traceFile.empty() && rank == 0) {
    std::vector<int64_t> stageOfRank;
    for (int w = 0; w < world; ++w)
      stageOfRank.push_back(batchShard(plan.mesh().axes(), std::vector<std::string>{plan.pipeline_axis()}, w).first);
    addPredictedTrack(train_.traceFile, *pipelineInfo, stageModels, stageOfRank, ppCost_);
  }
  // A sharded program's parameters are gathered (by every rank) for the report, which runs
  // on rank 0 alone: it cannot use the executor's shards.
  std::optional<SafeTensorsFile> gathered;
  const auto& buffers = ex.program().buffers;
  // So are a pipeline's: rank 0 holds only its stage's.
  if (recipe.report && (ex.program().pipeline ||
                        std::any_of(buffers.begin(), buffers.end(), [](const rt::Buffer& b) { return b.sharded(); })))
    gathered = rt::gatherParameters(ex, comm);
  if (rank != 0) return 0;  // rank 0 reports communication, memory and the model's report
  fmt::print("{}", rt::communicationSummary(ex.program(), gpu ? gpu->collectiveCounters()
                                                               : cpu->executor().collectiveCounters(),
                                            std::max<int64_t>(1, stepsRun(train_)), world));
  if (run_.profile) fmt::print(stderr, "{}\n", rt::startupSummary());
  if (run_.profile && cpu) printProfile(*cpu, "train_step", std::max<int64_t>(1, stepsRun(train_)));
  fmt::print("memory: arena planned {:.2f} MiB, high-water {:.2f} MiB\n",
             static_cast<double>(ex.arenaBytes()) / (1 << 20), static_cast<double>(ex.highWaterBytes()) / (1 << 20));
  if (const rt::AllocationCounter* counter = ex.allocationCounter())
    fmt::print("memory: allocated per rank: predicted {} bytes, measured peak {} bytes in {} blocks\n",
               rt::memoryBreakdown(ex.program()).total(), counter->peak(), counter->allocations());
  if (recipe.report) recipe.report(Trained{ex, program, native, world, gathered ? &*gathered : nullptr});
  return 0;
}

}  // namespace tessel::trainer
