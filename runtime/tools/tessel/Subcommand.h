// The subcommands of the `tessel` command: one table (tessel.cpp) of names, one-line
// summaries and setup functions, one source file per subcommand.
//
// Adding a subcommand: write Foo.cpp with `Action setupFoo(CLI::App& sub)`, which registers
// the subcommand's flags on `sub` (with the checks of runtime/train/FlagChecks.h, so the lit
// tests that try every flag from --help cover it) and returns what runs after parsing;
// declare it below and add a row to kSubcommands in tessel.cpp. `tessel --help` lists the
// table; `tessel NAME --help` prints the subcommand's own flags.
//
// The binary links runtime libraries only (no MLIR): a subcommand that needs the compiler
// belongs in a binary of its own outside runtime/.
#pragma once

#include "runtime/comm/World.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

namespace tessel::cli {

/// What a subcommand's run gets: the command line (for the ranks' agreement check) and a
/// place for the job's world, which must outlive the run so that a failed collective can end
/// the process without waiting for dead peers (trainer::runGuarded).
struct Context {
  int argc = 0;
  char** argv = nullptr;
  std::optional<rt::World> world;
};

/// A subcommand's work once its flags are parsed: returns the exit status; throws
/// std::runtime_error with a one-line message for anything a user can cause.
using Action = std::function<int(Context&)>;

/// One row of the subcommand table.
struct Subcommand {
  const char* name;     // as typed: "bench-comm"
  const char* summary;  // one line for `tessel --help`
  /// Registers the subcommand's flags on `sub` and returns its run (which reads the values
  /// the flags were parsed into, so it must capture them by value or own them).
  Action (*setup)(CLI::App& sub);
};

/// `tessel topology` (Topology.cpp).
Action setupTopology(CLI::App& sub);
/// `tessel bench-comm` (BenchComm.cpp).
Action setupBenchComm(CLI::App& sub);
/// `tessel bench-gemm` (BenchGemm.cpp).
Action setupBenchGemm(CLI::App& sub);
/// `tessel memory` (Memory.cpp).
Action setupMemory(CLI::App& sub);

/// `tessel report` (ReportCommand.cpp).
Action setupReport(CLI::App& sub);
/// `tessel pipeline` (Pipeline.cpp).
Action setupPipeline(CLI::App& sub);
/// `tessel ckpt info|verify|export|import` (Ckpt.cpp, CkptConvert.cpp).
Action setupCkpt(CLI::App& sub);
/// `tessel launch` (Launch.cpp).
Action setupLaunch(CLI::App& sub);

/// Adds `--json` ("print JSON instead of tables") to `sub`, the flag every subcommand has.
inline void addJsonFlag(CLI::App& sub, bool& json) {
  sub.add_flag("--json", json, "print one JSON object instead of tables (for programs)");
}

}  // namespace tessel::cli
