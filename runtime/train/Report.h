// The run report: one static HTML page (index.html) built from the records of a --log-json
// file, so that `--report DIR` during training and `tessel report LOG.jsonl --out DIR`
// afterwards write the same page.
//
// Promise: the page needs no network (no script, font, stylesheet or image from elsewhere;
// every plot is inline SVG). It holds the training and validation loss against the step, the
// throughput against the step, the exposed communication time per step when it was measured,
// the memory per rank (parameters, optimizer state, inputs, activation arena), the collective
// payload per step by kind, and the run's configuration and plan.
//
// Plot format (what tests and readers may rely on): each curve is a
// <polyline class="series" data-series="NAME" points="x,y x,y ..."> whose points are the
// logged values themselves (x = the step, y = the value, each written as the shortest decimal
// that reads back as the same double); the plot's transform maps them onto the page. Series
// names: "loss", "val_loss", "throughput", "comm_exposed_ms".
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessel::trainer {

/// Reads a --log-json file: one JSON object per line (blank lines skipped). Throws
/// std::runtime_error naming the file and the 1-based line for a line that is not a JSON
/// object, and for a file that cannot be read or holds no step records ("... has no step
/// records: is it a --log-json file?").
std::vector<nlohmann::json> readLogJson(const std::string& path);

/// The report page of `records` (the --log-json objects of one run, in order: each has
/// "step" and "loss"; the first may carry "run", see Loop.h). Records without a "step"
/// are ignored. Throws std::runtime_error when no record has a "step" and a numeric "loss".
std::string reportHtml(const std::vector<nlohmann::json>& records);

/// Creates the folder `dir` (and its parents) for a report, before a run spends time on
/// training. Throws std::runtime_error ("--report 'DIR': cannot create the folder: ...")
/// when it cannot be made or a file has that name.
void prepareReportFolder(const std::string& dir);

/// Writes reportHtml(records) to DIR/index.html, creating DIR. Returns the page's path.
/// Throws std::runtime_error naming the folder when it cannot be made or written.
std::string writeReport(const std::vector<nlohmann::json>& records, const std::string& dir);

}  // namespace tessel::trainer
