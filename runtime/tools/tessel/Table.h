// Plain-text tables for the `tessel` subcommands' default output.
//
// Promise: every row has the header's number of cells (add() throws std::logic_error
// otherwise); columns are as wide as their widest cell, counted in UTF-8 code points; a cell
// that reads as a number is right-aligned, anything else left-aligned, so columns of figures
// line up on their last digit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cli {

class Table {
public:
  explicit Table(std::vector<std::string> header);
  /// Appends a row of exactly header().size() cells.
  void add(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }
  /// The header, a rule of dashes, then the rows; each line indented by `indent` spaces and
  /// ending in a newline.
  std::string render(int indent = 2) const;

private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// A byte count in the largest binary unit it reaches, to 6 significant digits: 8 -> "8 B",
/// 1024 -> "1 KiB", 1536 -> "1.5 KiB", 1 << 30 -> "1 GiB".
std::string humanBytes(int64_t bytes);

}  // namespace tessel::cli
