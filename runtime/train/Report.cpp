// The run report page; see Report.h.
#include "runtime/train/Report.h"

#include "runtime/train/LogPath.h"  // reportPagePath

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tessel::trainer {

namespace {

/// One curve of a plot: (step, value) points in step order.
struct Series {
  std::string name;   // data-series attribute (Report.h)
  std::string label;  // legend text
  std::string color;
  std::vector<std::pair<double, double>> points;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

/// The shortest decimal that reads back as `v` (fmt's default for double), so a plotted point
/// equals the logged value exactly.
std::string exact(double v) { return fmt::format("{}", v); }

std::string mib(double bytes) { return fmt::format("{:.2f} MiB", bytes / (1 << 20)); }

/// A line plot of `series` against the step as inline SVG. The polylines hold the data values
/// and an affine transform (matrix) places them in the plot box, so their points stay the
/// logged numbers; strokes do not scale (vector-effect). Points also get a circle each when
/// a series has fewer than 30, so a curve of one point (a validation at the end) shows.
std::string plot(const std::string& id, const std::string& title, const std::string& yLabel,
                 const std::vector<Series>& series) {
  constexpr double width = 720, height = 260, left = 80, right = 700, top = 34, bottom = 222;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const Series& s : series)
    for (auto [x, y] : s.points) {
      xmin = std::min(xmin, x), xmax = std::max(xmax, x);
      ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    }
  if (!(xmin <= xmax)) return "";  // no points
  if (xmax == xmin) xmin -= 0.5, xmax += 0.5;
  // 5% headroom above and below, so that the extremes do not lie on the frame.
  const double pad = ymax > ymin ? 0.05 * (ymax - ymin) : std::max(0.05 * std::fabs(ymax), 1e-6);
  // Values that are all non-negative (throughput, times) keep the axis at or above 0.
  ymin = ymin >= 0 ? std::max(0.0, ymin - pad) : ymin - pad, ymax += pad;
  const double sx = (right - left) / (xmax - xmin), sy = (bottom - top) / (ymax - ymin);
  auto px = [&](double x) { return left + (x - xmin) * sx; };
  auto py = [&](double y) { return bottom - (y - ymin) * sy; };
  std::string svg = fmt::format(
      "<svg id=\"{}\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n"
      "<text x=\"{}\" y=\"20\" class=\"title\">{}</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n",
      id, width, height, width, height, escape(title), left, escape(title), left, top, right - left,
      bottom - top);
  for (int i = 0; i <= 4; ++i) {  // value ticks
    const double y = ymin + (ymax - ymin) * i / 4.0;
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#eee\"/>"
                       "<text x=\"{}\" y=\"{:.2f}\" class=\"tick\" text-anchor=\"end\">{:.4g}</text>\n",
                       left, right, py(y), py(y), left - 6, py(y) + 4, y);
  }
  for (int i = 0; i <= 4; ++i) {  // step ticks: whole steps where there are enough of them
    double x = xmin + (xmax - xmin) * i / 4.0;
    if (xmax - xmin >= 8) x = std::round(x);
    svg += fmt::format("<text x=\"{:.2f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{:.6g}</text>\n", px(x),
                       bottom + 16, x);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">step</text>"
                     "<text x=\"14\" y=\"{}\" class=\"tick\" transform=\"rotate(-90 14 {})\" "
                     "text-anchor=\"middle\">{}</text>\n",
                     (left + right) / 2, height - 6, (top + bottom) / 2, (top + bottom) / 2, escape(yLabel));
  double legendX = right;
  for (auto it = series.rbegin(); it != series.rend(); ++it) {  // legend, right-aligned
    if (it->points.empty()) continue;
    // Dark text after a short swatch of the curve's colour: the colour stays (nearly) the
    // curve's own in a rendering, which the rendering test counts.
    svg += fmt::format("<text x=\"{}\" y=\"20\" text-anchor=\"end\" class=\"legend\">{}</text>"
                       "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"16\" y2=\"16\" stroke=\"{}\" stroke-width=\"3\"/>\n",
                       legendX, escape(it->label), legendX - 6.5 * static_cast<double>(it->label.size()) - 20,
                       legendX - 6.5 * static_cast<double>(it->label.size()) - 6, it->color);
    legendX -= 36.0 + 6.5 * static_cast<double>(it->label.size());
  }
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::string points;
    for (auto [x, y] : s.points) points += (points.empty() ? "" : " ") + exact(x) + "," + exact(y);
    svg += fmt::format("<polyline class=\"series\" data-series=\"{}\" transform=\"matrix({} 0 0 {} {} {})\" "
                       "points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"3\" "
                       "vector-effect=\"non-scaling-stroke\"/>\n",
                       s.name, exact(sx), exact(-sy), exact(left - xmin * sx), exact(bottom + ymin * sy), points,
                       s.color);
    if (s.points.size() < 30)
      for (auto [x, y] : s.points)
        svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\"/>\n", px(x), py(y), s.color);
  }
  return svg + "</svg>\n";
}

/// "key.sub" -> value rows of a JSON object, nested objects flattened.
void flatten(const nlohmann::json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& rows) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object())
      flatten(*it, key, rows);
    else
      rows.emplace_back(key, it->is_string() ? it->get<std::string>() : it->dump());
  }
}

/// The memory section: a table and a stacked bar per rank (pixel coordinates).
std::string memorySection(const nlohmann::json& memory) {
  if (!memory.is_array() || memory.empty())
    return "<p>The log records no memory breakdown (it was written by an older trainer).</p>\n";
  // Colours no curve uses (the rendering test counts the loss curves' colours).
  static const std::pair<const char*, const char*> kParts[] = {{"parameters", "#8c564b"},
                                                              {"optimizer_state", "#e377c2"},
                                                              {"inputs", "#bcbd22"},
                                                              {"activation_arena", "#17becf"}};
  std::string table = "<table><tr><th>rank</th><th>parameters</th><th>optimizer state</th><th>inputs</th>"
                      "<th>activation arena</th><th>total</th></tr>\n";
  double most = 1;
  for (const auto& r : memory) {
    double total = 0;
    for (auto [part, color] : kParts) total += r.value(part, 0.0);
    most = std::max(most, total);
  }
  const double barHeight = 18, width = 620;
  std::string bars = fmt::format("<svg id=\"memory-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" "
                                 "height=\"{}\">\n",
                                 30 + barHeight * 1.5 * static_cast<double>(memory.size()));
  double legendX = 60;
  for (auto [part, color] : kParts) {
    bars += fmt::format("<rect x=\"{}\" y=\"6\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"15\" "
                        "class=\"tick\">{}</text>\n",
                        legendX, color, legendX + 14, part);
    legendX += 150;
  }
  int row = 0;
  for (const auto& r : memory) {
    const int rank = r.value("rank", row);
    double x = 60, total = 0;
    const double y = 26 + barHeight * 1.5 * row++;
    table += fmt::format("<tr><td>{}</td>", rank);
    bars += fmt::format("<text x=\"50\" y=\"{}\" text-anchor=\"end\" class=\"tick\">rank {}</text>\n", y + 13, rank);
    for (auto [part, color] : kParts) {
      const double bytes = r.value(part, 0.0);
      total += bytes;
      table += fmt::format("<td>{}</td>", mib(bytes));
      const double w = bytes / most * width;
      bars += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"/>\n", x, y, w,
                          barHeight, color);
      x += w;
    }
    table += fmt::format("<td>{}</td></tr>\n", mib(total));
  }
  return table + "</table>\n" + bars + "</svg>\n";
}

/// The communication section: payload bytes per step by kind (mean over the logged steps)
/// and the exposed time (collective waits) when measured.
std::string communicationSection(const std::vector<const nlohmann::json*>& steps) {
  std::map<std::string, double> bytes;
  double exposed = 0;
  int measured = 0;
  for (const nlohmann::json* s : steps) {
    if (auto it = s->find("comm_bytes"); it != s->end() && it->is_object())
      for (auto k = it->begin(); k != it->end(); ++k) bytes[k.key()] += k->get<double>();
    if (auto it = s->find("comm_exposed_s"); it != s->end() && it->is_number()) exposed += it->get<double>(), ++measured;
  }
  if (bytes.empty() && measured == 0)
    return "<p>No collective ran (one rank), or the log records no communication.</p>\n";
  std::string html = "<table><tr><th>kind</th><th>payload per step (this rank)</th></tr>\n";
  for (const auto& [kind, total] : bytes)
    html += fmt::format("<tr><td>{}</td><td>{:.0f} bytes</td></tr>\n", escape(kind),
                        total / static_cast<double>(steps.size()));
  html += "</table>\n";
  if (measured > 0)
    html += fmt::format("<p>Exposed communication (time blocked in collective waits, the part the compute did "
                        "not hide): {:.3f} ms per step on rank 0, mean of {} steps.</p>\n",
                        1e3 * exposed / measured, measured);
  return html;
}

}  // namespace

std::vector<nlohmann::json> readLogJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read the log '{}'", path));
  std::vector<nlohmann::json> records;
  std::string line;
  bool anyStep = false;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
      throw std::runtime_error(fmt::format("{}:{}: not a JSON object; a --log-json file has one per line", path, n));
    anyStep = anyStep || j.contains("step");
    records.push_back(std::move(j));
  }
  if (!anyStep) throw std::runtime_error(fmt::format("'{}' has no step records: is it a --log-json file?", path));
  return records;
}

std::string reportHtml(const std::vector<nlohmann::json>& records) {
  std::vector<const nlohmann::json*> steps;
  nlohmann::json run = nlohmann::json::object();
  for (const nlohmann::json& r : records) {
    if (!r.contains("step") || !r["step"].is_number()) continue;
    if (!r.contains("loss") || !r["loss"].is_number())
      throw std::runtime_error(fmt::format("the record of step {} has no numeric loss", r["step"].dump()));
    if (r.contains("run") && r["run"].is_object()) run = r["run"];
    steps.push_back(&r);
  }
  if (steps.empty()) throw std::runtime_error("the log has no step records with a loss");
  Series loss{"loss", "training loss", "#1f77b4", {}}, val{"val_loss", "validation loss", "#d62728", {}};
  Series throughput{"throughput", run.value("unit", std::string("items/s")), "#2ca02c", {}};
  Series exposed{"comm_exposed_ms", "exposed communication (ms)", "#9467bd", {}};
  for (const nlohmann::json* s : steps) {
    const double step = (*s)["step"].get<double>();
    loss.points.emplace_back(step, (*s)["loss"].get<double>());
    if (s->contains("val_loss") && (*s)["val_loss"].is_number())
      val.points.emplace_back(step, (*s)["val_loss"].get<double>());
    if (s->contains("tokens_per_s") && (*s)["tokens_per_s"].is_number())
      throughput.points.emplace_back(step, (*s)["tokens_per_s"].get<double>());
    if (s->contains("comm_exposed_s") && (*s)["comm_exposed_s"].is_number())
      exposed.points.emplace_back(step, 1e3 * (*s)["comm_exposed_s"].get<double>());
  }
  const nlohmann::json& last = *steps.back();
  std::string summary = fmt::format("{} steps logged; last training loss {:.4f}", steps.size(),
                                    last["loss"].get<double>());
  if (!val.points.empty()) summary += fmt::format(", last validation loss {:.4f}", val.points.back().second);
  if (!throughput.points.empty()) {
    std::vector<double> t;
    for (auto [x, y] : throughput.points) t.push_back(y);
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    summary += fmt::format(", median throughput {:.0f} {}", t[t.size() / 2], throughput.label);
  }
  std::vector<std::pair<std::string, std::string>> config;
  // The model and plan first, then every other plain field of the run record, then its objects
  // flattened; the memory has its own section.
  const std::vector<std::string> first = {"model", "describe", "plan", "device", "world_size", "steps", "unit"};
  auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  for (const std::string& key : first)
    if (run.contains(key)) config.emplace_back(key, text(run[key]));
  for (auto it = run.begin(); it != run.end(); ++it)
    if (!it->is_structured() && std::find(first.begin(), first.end(), it.key()) == first.end())
      config.emplace_back(it.key(), text(*it));
  for (const char* key : {"config", "training"})
    if (run.contains(key) && run[key].is_object()) flatten(run[key], key, config);
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>Tessel run report</title>\n"
          "<style>body{font-family:sans-serif;margin:24px;color:#222;background:#fff}"
          "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
          "svg .tick{font-size:11px;fill:#444}svg .title{font-size:13px;font-weight:bold}"
          "svg .legend{font-size:12px}</style>\n</head><body>\n<h1>Tessel run report</h1>\n"
       << "<p id=\"summary\">" << escape(summary) << "</p>\n<h2>Loss</h2>\n"
       << plot("loss-plot", "loss (nats) by step", "loss", {loss, val}) << "<h2>Throughput</h2>\n"
       << (throughput.points.empty() ? "<p>not logged</p>\n"
                                     : plot("throughput-plot", throughput.label + " by step", throughput.label,
                                            {throughput}))
       << "<h2>Memory per rank</h2>\n" << memorySection(run.value("memory", nlohmann::json()))
       << "<h2>Communication per step</h2>\n" << communicationSection(steps)
       << (exposed.points.empty() ? std::string()
                                  : plot("comm-plot", "exposed communication by step", "ms", {exposed}))
       << "<h2>Configuration and plan</h2>\n";
  if (config.empty()) {
    html << "<p>The log records no configuration (it was written by an older trainer).</p>\n";
  } else {
    html << "<table id=\"config\">\n";
    for (const auto& [k, v] : config) html << "<tr><th>" << escape(k) << "</th><td>" << escape(v) << "</td></tr>\n";
    html << "</table>\n";
  }
  html << "</body></html>\n";
  return html.str();
}

void prepareReportFolder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw std::runtime_error(fmt::format("--report '{}': cannot create the folder{}", dir,
                                         ec ? ": " + ec.message() : std::string(": a file has that name")));
}

std::string writeReport(const std::vector<nlohmann::json>& records, const std::string& dir) {
  const std::string page = reportHtml(records);
  prepareReportFolder(dir);
  const std::string path = reportPagePath(dir);
  std::ofstream out(path);
  out << page;
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("--report '{}': cannot write '{}'", dir, path));
  return path;
}

}  // namespace tessel::trainer
