// `tessel memory`: memory per GPU before launch, in two modes.
//   Formula mode (--params-billions, --gpus): the ZeRO paper's table of model-state bytes per
//   GPU (ZeroMemory.h), the row of --zero-stage marked, and with --device-memory whether that
//   row fits and by what margin. It is labelled as the formula: activations, temporary and
//   communication buffers are not in it.
//   Model mode (--model gpt with its shape and --plan): the compiled per-rank program's exact
//   bytes by role (runtime/exec/MemoryBreakdown.h), obtained from the model's compiler-side
//   binary (CompiledMemory.h; this binary has no compiler), with the formula's table for the
//   compiled model's parameter count beside it, and the fit and margin of the compiled bytes.
#include "runtime/exec/MemoryBreakdown.h"  // the roles' names
#include "runtime/tools/tessel/CompiledMemory.h"
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/tools/tessel/Table.h"
#include "runtime/tools/tessel/ZeroMemory.h"
#include "runtime/train/FlagChecks.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace tessel::cli {
namespace {

struct MemoryFlags {
  double paramsBillions = 0;  // 0: not given
  int64_t gpus = 1;
  int zeroStage = 3;
  std::string deviceMemory;  // empty: not given
  bool json = false;
  // Model mode: the compiled plan.
  std::string model;  // empty: formula mode
  int64_t layers = 0, channels = 0, heads = 0, seq = 0, batch = 0, vocab = 0, world = 0;  // 0: not given
  std::string plan, precision, checkpointing;
  bool zeroStageGiven = false;
};

std::string gb(double bytes) { return fmt::format("{:.2f}", bytes / 1e9); }
std::string gib(double bytes) { return fmt::format("{:.2f}", bytes / 0x1p30); }

/// The formula's rows as JSON.
nlohmann::json formulaJson(const std::vector<ZeroStageMemory>& rows, double params, int64_t gpus, int stage) {
  nlohmann::json j;
  j["formula"] = "ZeRO (Rajbhandari et al. 2020, Figure 1): model states per GPU, mixed precision with AdamW";
  j["params"] = params;
  j["gpus"] = gpus;
  j["zero_stage"] = stage;
  j["bytes_per_param"] = {{"parameters", kParamBytes}, {"gradients", kGradBytes}, {"optimizer_state", kOptimizerBytes}};
  for (const ZeroStageMemory& r : rows)
    j["stages"].push_back({{"stage", r.stage}, {"name", r.name}, {"formula", r.formula}, {"bytes", r.bytes},
                           {"gb", r.bytes / 1e9}, {"gib", r.bytes / 0x1p30}, {"chosen", r.stage == stage}});
  return j;
}

/// The formula's header lines and table.
void printFormula(const std::vector<ZeroStageMemory>& rows, const std::string& psi, int64_t gpus, int stage) {
  fmt::print("ZeRO formula (Rajbhandari et al. 2020, Figure 1): model-state bytes per GPU\n"
             "  Ψ = {}, N = {} GPU(s)\n"
             "  bf16/fp16 parameters (2Ψ) and gradients (2Ψ), fp32 AdamW state K = 12 bytes per parameter (master "
             "weights, momentum, variance)\n",
             psi, gpus);
  Table table({"stage", "formula", "GB per GPU", "GiB per GPU", "chosen"});
  for (const ZeroStageMemory& r : rows)
    table.add({r.name, r.formula, gb(r.bytes), gib(r.bytes),
               r.stage == stage ? fmt::format("<- --zero-stage {}", stage) : ""});
  fmt::print("{}", table.render());
  fmt::print("  GB = 10^9 bytes, GiB = 2^30 bytes. Not included: activations, temporary and communication buffers, "
             "allocator fragmentation.\n");
}

/// "fits: <what> needs ..." or "does not fit: ..." for `need` bytes of `device`.
void printFit(const std::string& what, double need, int64_t device) {
  const double margin = static_cast<double>(device) - need;
  if (margin >= 0)
    fmt::print("fits: {} needs {} GB ({} GiB) of the {} GB ({} GiB) device memory, {} GB ({} GiB, {:.1f}%) to spare\n",
               what, gb(need), gib(need), gb(device), gib(device), gb(margin), gib(margin),
               100.0 * margin / static_cast<double>(device));
  else
    fmt::print("does not fit: {} needs {} GB ({} GiB) but the device has {} GB ({} GiB), {} GB ({} GiB) short\n",
               what, gb(need), gib(need), gb(device), gib(device), gb(-margin), gib(-margin));
}

int runFormula(const MemoryFlags& f) {
  if (f.paramsBillions == 0)
    throw std::runtime_error("give --params-billions (the formula mode) or --model (the compiled plan's exact bytes)");
  const double params = f.paramsBillions * 1e9;
  const std::vector<ZeroStageMemory> rows = zeroMemoryTable(params, f.gpus);
  const double chosen = rows[static_cast<size_t>(f.zeroStage)].bytes;
  const int64_t device = f.deviceMemory.empty() ? 0 : parseMemorySize(f.deviceMemory);
  const double margin = static_cast<double>(device) - chosen;  // > 0: spare bytes per GPU
  if (f.json) {
    nlohmann::json j = formulaJson(rows, params, f.gpus, f.zeroStage);
    j["format"] = "tessel-memory";
    j["mode"] = "formula";
    if (device > 0) {
      j["device_memory_bytes"] = device;
      j["fits"] = margin >= 0;
      j["margin_bytes"] = margin;
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  printFormula(rows, fmt::format("{:g} billion parameters", f.paramsBillions), f.gpus, f.zeroStage);
  if (device > 0) printFit(f.zeroStage == 0 ? "the baseline" : fmt::format("stage {}", f.zeroStage), chosen, device);
  return 0;
}

/// The ranks of a plan "a=2,b=4" (the product of its sizes), and the size of its fsdp axis
/// (0 without one); {0, 0} when a size is not a whole number (the model binary then names
/// the problem).
std::pair<int64_t, int64_t> planRanks(const std::string& plan) {
  int64_t ranks = 1, fsdp = 0;
  size_t at = 0;
  while (at <= plan.size()) {
    const size_t comma = std::min(plan.find(',', at), plan.size());
    const std::string axis = plan.substr(at, comma - at);
    const size_t eq = axis.find('=');
    const std::string size = eq == std::string::npos ? "" : axis.substr(eq + 1);
    if (size.empty() || size.size() > 9 || size.find_first_not_of("0123456789") != std::string::npos) return {0, 0};
    ranks *= std::stoll(size);
    if (axis.substr(0, eq) == "fsdp") fsdp = std::stoll(size);
    at = comma + 1;
  }
  return {ranks, fsdp};
}

int runModel(const MemoryFlags& f) {
  if (f.paramsBillions != 0) throw std::runtime_error("--model and --params-billions exclude each other: the model "
                                                      "mode counts the compiled plan's parameters");
  std::string plan = f.plan;
  if (plan.empty()) plan = f.world > 1 ? fmt::format("fsdp={}", f.world) : "dp=1";
  const auto [ranks, fsdp] = planRanks(plan);
  if (f.world > 0 && ranks > 0 && ranks != f.world)
    throw std::runtime_error(fmt::format("--world {} but --plan {} is for {} rank{}", f.world, plan, ranks,
                                         ranks == 1 ? "" : "s"));
  std::vector<std::string> args = {"--plan", plan};
  auto pass = [&](const char* flag, int64_t v) {
    if (v > 0) args.insert(args.end(), {flag, std::to_string(v)});
  };
  pass("--layers", f.layers);
  pass("--channels", f.channels);
  pass("--heads", f.heads);
  pass("--seq", f.seq);
  pass("--batch", f.batch);
  pass("--vocab", f.vocab);
  if (!f.precision.empty()) args.insert(args.end(), {"--precision", f.precision});
  if (!f.checkpointing.empty()) args.insert(args.end(), {"--activation-checkpointing", f.checkpointing});
  if (f.zeroStageGiven && fsdp > 0) pass("--zero-stage", f.zeroStage);
  const nlohmann::json compiled = compiledMemory(modelBinary(f.model), args);
  const nlohmann::json& rank = compiled.at("per_rank");
  const int64_t world = compiled.at("world").get<int64_t>();
  const int64_t need = rank.at("total").get<int64_t>();
  const double params = compiled.at("parameters").get<double>();
  // The formula's N: the ranks that shard the model states (the fsdp axis), else every rank
  // (plain data parallelism, where only the baseline row describes the plan).
  const int64_t n = fsdp > 0 ? fsdp : world;
  const int stage = fsdp > 0 || f.zeroStageGiven ? f.zeroStage : 0;
  const std::vector<ZeroStageMemory> rows = zeroMemoryTable(params, n);
  const int64_t device = f.deviceMemory.empty() ? 0 : parseMemorySize(f.deviceMemory);
  if (f.json) {
    nlohmann::json j;
    j["format"] = "tessel-memory";
    j["mode"] = "model";
    j["compiled"] = compiled;
    j["formula"] = formulaJson(rows, params, n, stage);
    if (device > 0) {
      j["device_memory_bytes"] = device;
      j["fits"] = need <= device;
      j["margin_bytes"] = device - need;  // exact: the compiled bytes are whole
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("compiled plan: {} ({} rank{}), {} parameters; every byte the executor allocates per rank (one "
             "program on every rank, compiled by tessel-{} --memory-json; nothing allocated to answer)\n",
             compiled.at("plan").get<std::string>(), world, world == 1 ? "" : "s", compiled.at("parameters").dump(),
             f.model);
  Table table({"part", "bytes", "GB", "GiB"});
  for (int r = 0; r < rt::kMemoryRoles; ++r) {
    const double bytes = rank.at(rt::memoryRoleName(static_cast<rt::MemoryRole>(r))).get<double>();
    table.add({rt::memoryRoleName(static_cast<rt::MemoryRole>(r)), fmt::format("{:.0f}", bytes), gb(bytes), gib(bytes)});
  }
  table.add({"total", std::to_string(need), gb(static_cast<double>(need)), gib(static_cast<double>(need))});
  fmt::print("{}", table.render());
  const nlohmann::json& peak = rank.at("arena_peak");
  fmt::print("  arena at its peak (@{} step {}): gathered parameters {}, communication buffers {}, gradients {}, "
             "activations and other temporaries {}, unused by the placement {} bytes\n",
             peak.at("function").get<std::string>(), peak.at("step").dump(), peak.at("gathered_parameters").dump(),
             peak.at("communication").dump(), peak.at("gradients").dump(), peak.at("activations").dump(),
             peak.at("fragmentation").dump());
  const nlohmann::json& padding = compiled.at("padding_by_rank");
  if (std::any_of(padding.begin(), padding.end(), [](const nlohmann::json& p) { return p.get<int64_t>() > 0; }))
    fmt::print("  padding of uneven shards (bytes holding no global element) by rank: {}\n", padding.dump());
  printFormula(rows, fmt::format("{} parameters (the compiled model's)", compiled.at("parameters").dump()), n, stage);
  if (device > 0) printFit("the compiled plan", static_cast<double>(need), device);
  return 0;
}

int run(const MemoryFlags& f) { return f.model.empty() ? runFormula(f) : runModel(f); }

}  // namespace

Action setupMemory(CLI::App& sub) {
  auto f = std::make_shared<MemoryFlags>();
  sub.footer(
      "\nFormula mode: the ZeRO paper's model-state memory per GPU (Rajbhandari et al. 2020, Figure 1) with Ψ "
      "parameters over N data-parallel GPUs, bf16/fp16 parameters and gradients (2 bytes each) and fp32 AdamW state "
      "(K = 12 bytes): baseline 16Ψ, stage 1 4Ψ + 12Ψ/N, stage 2 2Ψ + 14Ψ/N, stage 3 16Ψ/N, in GB (10^9 bytes) "
      "and GiB (2^30 bytes). Activations and buffers are not included. Example: tessel memory --params-billions 70 "
      "--gpus 8 --zero-stage 3 --device-memory 80GiB.\n\nModel mode: compiles the plan (without running it or "
      "allocating any parameter) with the model's binary next to tessel (tessel-gpt) and prints every byte the "
      "executor allocates per rank: parameters, gradients, optimizer state, inputs, GEMM scratch and the activation "
      "arena (with its gathered parameters, communication buffers and gradients at its peak), the formula beside it "
      "for the compiled parameter count, and whether the compiled bytes fit. Example: tessel memory --model gpt "
      "--layers 48 --channels 1600 --heads 25 --seq 1024 --batch 8 --plan fsdp=8 --device-memory 80GiB.\n\nExits 0 "
      "whether or not it fits (the answer is printed; with --json in \"fits\").\n");
  sub.add_option("--params-billions", f->paramsBillions, "model parameters Ψ, in billions (10^9)")
      ->check(trainer::positiveUpTo(1e5));
  sub.add_option("--gpus", f->gpus, "data-parallel GPUs N that shard the model states")
      ->capture_default_str()->check(trainer::integerIn(1, int64_t{1} << 20));
  sub.add_option("--zero-stage", f->zeroStage, "the stage to mark and to check against --device-memory: 0 (baseline, "
                                               "plain data parallelism), 1, 2 or 3")
      ->capture_default_str()->check(trainer::integerIn(0, 3));
  sub.add_option("--device-memory", f->deviceMemory, "memory of one GPU, e.g. 80GiB or 141GB (units B, KB, KiB, MB, "
                                                     "MiB, GB, GiB, TB, TiB): say whether the chosen stage fits")
      ->check(trainer::memorySize());
  sub.add_option("--model", f->model, "model mode: compile this model's plan (gpt) and give its exact bytes per rank")
      ->check(CLI::IsMember({"gpt"}));
  auto size = [&](const char* flag, int64_t& v, const char* help, int64_t max, int64_t min = 1) {
    sub.add_option(flag, v, help)->check(trainer::integerIn(min, max));
  };
  size("--layers", f->layers, "model mode: transformer blocks L (default: the model binary's)", 4096);
  size("--channels", f->channels, "model mode: channels C", int64_t{1} << 16);
  size("--heads", f->heads, "model mode: attention heads NH", 4096);
  size("--seq", f->seq, "model mode: sequence length T", int64_t{1} << 20);
  size("--batch", f->batch, "model mode: global batch B", int64_t{1} << 24);
  size("--vocab", f->vocab, "model mode: vocabulary rows V (256 bytes, padded up to V)", int64_t{1} << 24, 256);
  size("--world", f->world, "model mode: ranks; without --plan the plan is fsdp=WORLD, with it they must agree "
                            "(default: the plan's ranks)", int64_t{1} << 20);
  sub.add_option("--plan", f->plan, "model mode: the parallelism plan, as the trainers' --plan (e.g. fsdp=8, "
                                    "dp=2,fsdp=4)")->check(trainer::nonEmpty("plan"));
  sub.add_option("--precision", f->precision, "model mode: f32 or bf16, as the trainers' --precision")
      ->check(CLI::IsMember({"f32", "bf16"}));
  sub.add_option("--activation-checkpointing", f->checkpointing, "model mode: full or selective, as the trainers'")
      ->check(CLI::IsMember({"full", "selective"}));
  addJsonFlag(sub, f->json);
  return [f, &sub](Context&) {
    f->zeroStageGiven = sub.count("--zero-stage") > 0;
    return run(*f);
  };
}

}  // namespace tessel::cli
