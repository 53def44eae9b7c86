// `tessel memory`: memory per GPU before launch. Formula mode (today): the ZeRO paper's table
// of model-state bytes per GPU (ZeroMemory.h) for --params-billions and --gpus, the row of
// --zero-stage marked, and with --device-memory whether that row fits and by what margin.
// It is labelled as the formula: activations, temporary and communication buffers are not in
// it. The model mode (a compiled plan's exact bytes) needs the compiler and is not here
// (docs/tessel.md).
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/tools/tessel/Table.h"
#include "runtime/tools/tessel/ZeroMemory.h"
#include "runtime/train/FlagChecks.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
};

std::string gb(double bytes) { return fmt::format("{:.2f}", bytes / 1e9); }
std::string gib(double bytes) { return fmt::format("{:.2f}", bytes / 0x1p30); }

int run(const MemoryFlags& f) {
  if (f.paramsBillions == 0)
    throw std::runtime_error("give --params-billions (the formula mode; the model mode, which "
                             "compiles a plan, is not available yet)");
  const double params = f.paramsBillions * 1e9;
  const std::vector<ZeroStageMemory> rows = zeroMemoryTable(params, f.gpus);
  const double chosen = rows[static_cast<size_t>(f.zeroStage)].bytes;
  const int64_t device = f.deviceMemory.empty() ? 0 : parseMemorySize(f.deviceMemory);
  const double margin = static_cast<double>(device) - chosen;  // > 0: spare bytes per GPU
  if (f.json) {
    nlohmann::json j;
    j["format"] = "tessel-memory";
    j["mode"] = "formula";
    j["formula"] = "ZeRO (Rajbhandari et al. 2020, Figure 1): model states per GPU, mixed precision with AdamW";
    j["params"] = params;
    j["gpus"] = f.gpus;
    j["zero_stage"] = f.zeroStage;
    j["bytes_per_param"] = {{"parameters", kParamBytes}, {"gradients", kGradBytes}, {"optimizer_state", kOptimizerBytes}};
    for (const ZeroStageMemory& r : rows)
      j["stages"].push_back({{"stage", r.stage}, {"name", r.name}, {"formula", r.formula}, {"bytes", r.bytes},
                             {"gb", r.bytes / 1e9}, {"gib", r.bytes / 0x1p30}, {"chosen", r.stage == f.zeroStage}});
    if (device > 0) {
      j["device_memory_bytes"] = device;
      j["fits"] = margin >= 0;
      j["margin_bytes"] = margin;
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("ZeRO formula (Rajbhandari et al. 2020, Figure 1): model-state bytes per GPU\n"
             "  Ψ = {:g} billion parameters, N = {} GPU(s)\n"
             "  bf16/fp16 parameters (2Ψ) and gradients (2Ψ), fp32 AdamW state K = 12 bytes per parameter (master "
             "weights, momentum, variance)\n",
             f.paramsBillions, f.gpus);
  Table table({"stage", "formula", "GB per GPU", "GiB per GPU", "chosen"});
  for (const ZeroStageMemory& r : rows)
    table.add({r.name, r.formula, gb(r.bytes), gib(r.bytes),
               r.stage == f.zeroStage ? fmt::format("<- --zero-stage {}", f.zeroStage) : ""});
  fmt::print("{}", table.render());
  fmt::print("  GB = 10^9 bytes, GiB = 2^30 bytes. Not included: activations, temporary and communication buffers, "
             "allocator fragmentation.\n");
  if (device > 0) {
    const std::string stage = f.zeroStage == 0 ? "the baseline" : fmt::format("stage {}", f.zeroStage);
    if (margin >= 0)
      fmt::print("fits: {} needs {} GB ({} GiB) of the {} GB ({} GiB) device memory, {} GB ({} GiB, {:.1f}%) to spare\n",
                 stage, gb(chosen), gib(chosen), gb(device), gib(device), gb(margin), gib(margin),
                 100.0 * margin / static_cast<double>(device));
    else
      fmt::print("does not fit: {} needs {} GB ({} GiB) but the device has {} GB ({} GiB), {} GB ({} GiB) short\n",
                 stage, gb(chosen), gib(chosen), gb(device), gib(device), gb(-margin), gib(-margin));
  }
  return 0;
}

/// --device-memory's check: parseMemorySize's message, or nothing.
CLI::Validator memorySize() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parseMemorySize(text);
          return "";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "SIZE");
}

}  // namespace

Action setupMemory(CLI::App& sub) {
  auto f = std::make_shared<MemoryFlags>();
  sub.footer(
      "\nFormula mode: the ZeRO paper's model-state memory per GPU (Rajbhandari et al. 2020, Figure 1) with Ψ "
      "parameters over N data-parallel GPUs, bf16/fp16 parameters and gradients (2 bytes each) and fp32 AdamW state "
      "(K = 12 bytes): baseline 16Ψ, stage 1 4Ψ + 12Ψ/N, stage 2 2Ψ + 14Ψ/N, stage 3 16Ψ/N, in GB (10^9 bytes) "
      "and GiB (2^30 bytes). Activations and buffers are not included. Example: tessel memory --params-billions 70 "
      "--gpus 8 --zero-stage 3 --device-memory 80GiB. Exits 0 whether or not it fits (the answer is printed; "
      "with --json in \"fits\").\n");
  sub.add_option("--params-billions", f->paramsBillions, "model parameters Ψ, in billions (10^9)")
      ->check(trainer::positiveUpTo(1e5));
  sub.add_option("--gpus", f->gpus, "data-parallel GPUs N that shard the model states")
      ->capture_default_str()->check(trainer::integerIn(1, int64_t{1} << 20));
  sub.add_option("--zero-stage", f->zeroStage, "the stage to mark and to check against --device-memory: 0 (baseline, "
                                               "plain data parallelism), 1, 2 or 3")
      ->capture_default_str()->check(trainer::integerIn(0, 3));
  sub.add_option("--device-memory", f->deviceMemory, "memory of one GPU, e.g. 80GiB or 141GB (units B, KB, KiB, MB, "
                                                     "MiB, GB, GiB, TB, TiB): say whether the chosen stage fits")
      ->check(memorySize());
  addJsonFlag(sub, f->json);
  return [f](Context&) { return run(*f); };
}

}  // namespace tessel::cli
