// Repeated flags: the last value wins, as in argparse and in the launchers users know
// (torchrun scripts, `scripts/demo.sh --steps 50` after the demo's own --steps). CLI11's
// default refuses a repeated single-value option ("At Most 1 required but received 2").
// MLIR-free, header-only: the trainers and tessel-run apply it before parsing.
#pragma once

#include <CLI/CLI.hpp>

namespace tessel::trainer {

/// Makes every single-value option of `app` (and of its subcommands) take the last value
/// given; options that take several values keep CLI11's policy. Call after every option is
/// registered and before app.parse().
inline void lastValueWins(CLI::App& app) {
  for (CLI::Option* o : app.get_options())
    if (o->get_items_expected_max() == 1) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (CLI::App* sub : app.get_subcommands({})) lastValueWins(*sub);
}

}  // namespace tessel::trainer
