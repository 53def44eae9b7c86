// Plain-text tables; see Table.h.
#include "runtime/tools/tessel/Table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace tessel::cli {
namespace {

/// True when the whole cell parses as a number (so it is right-aligned).
bool numeric(const std::string& cell) {
  if (cell.empty()) return false;
  char* end = nullptr;
  std::strtod(cell.c_str(), &end);
  return end == cell.c_str() + cell.size();
}

/// The cell's width on a terminal: its UTF-8 code points (bytes that do not continue a
/// sequence), so "16Ψ" is 3 columns, not 4 bytes.
size_t displayWidth(const std::string& cell) {
  size_t n = 0;
  for (unsigned char c : cell) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::add(std::vector<std::string> row) {
  if (row.size() != header_.size())
    throw std::logic_error(fmt::format("table row of {} cells under a header of {}", row.size(), header_.size()));
  rows_.push_back(std::move(row));
}

std::string Table::render(int indent) const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) {
    width[c] = displayWidth(header_[c]);
    for (const auto& row : rows_) width[c] = std::max(width[c], displayWidth(row[c]));
  }
  const std::string pad(static_cast<size_t>(indent), ' ');
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out = pad;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) out += "  ";
      const std::string fill(width[c] - displayWidth(cells[c]), ' ');
      out += !header && numeric(cells[c]) ? fill + cells[c] : cells[c] + fill;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_, true);
  std::vector<std::string> rule;
  for (size_t w : width) rule.emplace_back(w, '-');
  out += line(rule, true);
  for (const auto& row : rows_) out += line(row, false);
  return out;
}

std::string humanBytes(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (u < 4 && v >= 1024) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:g} {}", v, units[u]);
}

}  // namespace tessel::cli
