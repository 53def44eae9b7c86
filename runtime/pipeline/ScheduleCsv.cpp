// The CSV form of a schedule (Schedule.h): PyTorch's pipelining `_dump_csv` / `_load_csv`
// layout (one row per rank, its actions comma-separated), plus `#` comments and blank lines.
#include "runtime/pipeline/Schedule.h"
#include "runtime/pipeline/Verify.h"

#include <fmt/format.h>

#include <sstream>

namespace tessel::rt::pipeline {

Schedule parseScheduleCsv(const std::string& text, const std::string& source) {
  Schedule schedule;
  std::istringstream in(text);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const int64_t rank = static_cast<int64_t>(schedule.size());
    std::vector<Action>& row = schedule.emplace_back();
    std::istringstream cells(line);
    std::string cell;
    for (int64_t column = 0; std::getline(cells, cell, ','); ++column) {
      if (cell.find_first_not_of(" \t\r") == std::string::npos) continue;  // PyTorch's None
      try {
        row.push_back(parseAction(cell));
      } catch (const std::invalid_argument& e) {
        throw ScheduleError(rank, static_cast<int64_t>(row.size()),
                            fmt::format("{}:{}: rank {}, cell {}: {}", source, number, rank, column + 1, e.what()));
      }
    }
  }
  if (schedule.empty())
    throw ScheduleError(-1, -1, fmt::format("{}: no rows; a schedule has one row of actions per rank", source));
  return schedule;
}

std::string scheduleCsv(const Schedule& schedule) {
  std::string out;
  for (const std::vector<Action>& row : schedule) {
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + row[i].text();
    out += '\n';
  }
  return out;
}

}  // namespace tessel::rt::pipeline
