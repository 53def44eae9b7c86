// `tessel report LOG.jsonl --out DIR`: the run report page (runtime/train/Report.h) built
// afterwards from a --log-json file, the same page `--report DIR` writes during training.
// One process, no world: it only reads the log.
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/train/FlagChecks.h"
#include "runtime/train/Report.h"

#include <fmt/format.h>

#include <memory>

namespace tessel::cli {

Action setupReport(CLI::App& sub) {
  struct ReportFlags {
    std::string log, out;
  };
  auto f = std::make_shared<ReportFlags>();
  sub.add_option("LOG", f->log, "the --log-json file of a training run (one JSON object per step)")
      ->required()->check(trainer::nonEmpty("file name"));
  sub.add_option("--out", f->out,
                 "the folder to write index.html into (created if missing): a static page, no network, with the "
                 "loss, validation and throughput curves as SVG, memory per rank, communication per step, "
                 "configuration and plan")
      ->type_name("DIR")->required()->check(trainer::nonEmpty("folder"));
  return [f](Context&) {
    const std::vector<nlohmann::json> records = trainer::readLogJson(f->log);
    fmt::print("report: {} records of '{}' written to '{}'\n", records.size(), f->log,
               trainer::writeReport(records, f->out));
    return 0;
  };
}

}  // namespace tessel::cli
