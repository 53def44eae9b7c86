// tessel: the command-line suite of measurements that need no compiler (runtime libraries
// only, no MLIR): `tessel topology` audits what this machine and job have, `tessel
// bench-comm` measures the collectives the trainer uses, `tessel memory` gives the memory per
// GPU by the ZeRO formula or, through the model's own binary, a compiled plan's exact bytes,
// `tessel report` renders a training log as a page, `tessel pipeline` checks and charts a
// pipeline schedule, `tessel ckpt` inspects and converts checkpoints. Every one of those has
// complete --help, prints tables by default and one JSON object with --json. `tessel launch`
// runs a training job and restarts it from its checkpoints when it fails (its log is JSON
// lines: --log).
//
// The subcommand table below is the one place that lists them (see Subcommand.h for how to
// add one).
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/train/LastValueWins.h"
#include "runtime/train/Ranks.h"  // runGuarded

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

namespace {

using tessel::cli::Subcommand;

/// Every subcommand, in the order `tessel --help` lists them.
const Subcommand kSubcommands[] = {
    {"topology", "what this machine and job have: GPUs, peer/NVLink matrix, NICs, InfiniBand, CPU sockets, "
                 "cores, NUMA, SIMD, MPI and NCCL versions, and the ranks' layout under mpirun",
     tessel::cli::setupTopology},
    {"bench-comm", "measure all_reduce, all_gather, reduce_scatter, all_to_all, broadcast and send/recv "
                   "through the trainer's communicators (MPI on CPU); time, algbw and busbw per size, every "
                   "result verified (run under mpirun)",
     tessel::cli::setupBenchComm},
    {"bench-gemm", "time a GEMM (f32 or bf16, M x N x K) through the executor's GEMM path, once per CPU backend "
                   "(OpenBLAS, ...): best and median ms and GFLOP/s, the machine's GEMM ceiling",
     tessel::cli::setupBenchGemm},
    {"memory", "memory per GPU before launch: the ZeRO paper's formula for model states at stages 0-3 "
               "(--params-billions, --gpus), or a compiled plan's exact bytes per rank (--model gpt ... --plan), "
               "and whether it fits --device-memory",
     tessel::cli::setupMemory},
    {"report", "build the run report page (loss, validation and throughput curves, memory per rank, "
               "communication, configuration) from a --log-json file: tessel report LOG.jsonl --out DIR",
     tessel::cli::setupReport},
    {"pipeline", "a pipeline schedule before launch: gpipe, 1f1b, interleaved, zero-bubble or a CSV, proved "
                 "deadlock-free, its timeline per rank, bubble fraction beside the closed form, peak activations",
     tessel::cli::setupPipeline},
    {"ckpt", "inspect and convert distributed checkpoints: info (step, plan, tensors, shards, sizes), verify (every "
             "checksum and the index's consistency), export (one safetensors file), import (a safetensors file as a "
             "step-0 checkpoint)",
     tessel::cli::setupCkpt},
    {"launch", "run a training job and restart it from its latest checkpoint when it fails: tessel launch "
               "--max-restarts K [--min-ranks M --hostfile FILE] -- mpirun -np N tessel-gpt ... --checkpoint-dir DIR",
     tessel::cli::setupLaunch},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel: measure and audit what a training job runs on (topology, collective bandwidth, memory). "
               "Run `tessel SUBCOMMAND --help` for a subcommand's flags.",
               "tessel"};
  app.require_subcommand(1, 1);
  std::map<std::string, tessel::cli::Action> actions;
  for (const Subcommand& s : kSubcommands) {
    CLI::App* sub = app.add_subcommand(s.name, s.summary);
    actions[s.name] = s.setup(*sub);
  }
  // An unknown first word is named, with the subcommands there are (CLI11 would only say that
  // a subcommand is required).
  if (argc > 1 && argv[1][0] != '-' && !actions.count(argv[1])) {
    std::string names;
    for (const Subcommand& s : kSubcommands) names += std::string(names.empty() ? "" : ", ") + s.name;
    fmt::print(stderr, "tessel: '{}' is not a subcommand; use one of: {} (tessel --help)\n", argv[1], names);
    return 1;
  }
  // The same one level down, for a subcommand with its own (tessel ckpt info|verify|...): an
  // unknown or missing second word is named with the choices.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> inner;
    for (CLI::App* s : app.get_subcommand(argv[1])->get_subcommands([](CLI::App*) { return true; }))
      inner.push_back(s->get_name());
    const bool missing = argc == 2, unknown = argc > 2 && argv[2][0] != '-' &&
                                              std::find(inner.begin(), inner.end(), argv[2]) == inner.end();
    if (!inner.empty() && (missing || unknown)) {
      fmt::print(stderr, "tessel {}: {}; use one of: {} (tessel {} --help)\n", argv[1],
                 missing ? "a subcommand is required" : fmt::format("'{}' is not a subcommand", argv[2]),
                 fmt::join(inner, ", "), argv[1]);
      return 1;
    }
  }
  try {
    tessel::trainer::lastValueWins(app);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  CLI::App* chosen = app.get_subcommands().front();
  const std::string name = chosen->get_name();
  // The context (and so the job's world) outlives the guarded run: a failed collective ends
  // the process there (rt::abortJob) without the world's orderly shutdown.
  tessel::cli::Context context{argc, argv, std::nullopt};
  return tessel::trainer::runGuarded("tessel " + name, [&] { return actions.at(name)(context); });
}
