// The checks of numeric command-line flags; see FlagChecks.h.
#include "runtime/train/FlagChecks.h"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

namespace tessel::trainer {
namespace {

/// The value of `s` if all of it is a finite number (strtod syntax), else nullopt.
std::optional<double> finiteValue(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// "2^k" for powers of two from 2^20 up (also negated), else the decimal number.
std::string bound(int64_t v) {
  uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (magnitude >= (uint64_t{1} << 20) && std::has_single_bit(magnitude))
    return fmt::format("{}2^{}", v < 0 ? "-" : "", std::countr_zero(magnitude));
  return std::to_string(v);
}

}  // namespace

const CLI::Validator& positiveNumber() {
  static const CLI::Validator check(
      [](std::string& s) {
        std::optional<double> v = finiteValue(s);
        return v && *v > 0 ? std::string() : s + " is not a positive number";
      },
      "POSITIVE");
  return check;
}

const CLI::Validator& nonNegativeNumber() {
  static const CLI::Validator check(
      [](std::string& s) {
        std::optional<double> v = finiteValue(s);
        return v && *v >= 0 ? std::string() : s + " is not a number >= 0";
      },
      "NONNEGATIVE");
  return check;
}

CLI::Validator integerIn(int64_t min, int64_t max) {
  std::string range = fmt::format("[{}, {}]", bound(min), bound(max));
  return CLI::Validator(
      [min, max, range](std::string& s) {
        const char* first = s.c_str() + (!s.empty() && s[0] == '+');
        const char* last = s.c_str() + s.size();
        int64_t v = 0;
        auto [end, ec] = std::from_chars(first, last, v);
        bool ok = ec == std::errc() && end == last && first != last && v >= min && v <= max;
        return ok ? std::string() : fmt::format("{} is not an integer in {}", s, range);
      },
      "in " + range);
}

CLI::Validator numberIn(double min, double max) {
  std::string range = fmt::format("[{:g}, {:g}]", min, max);
  return CLI::Validator(
      [min, max, range](std::string& s) {
        std::optional<double> v = finiteValue(s);
        return v && *v >= min && *v <= max ? std::string() : fmt::format("{} is not a number in {}", s, range);
      },
      "in " + range);
}

CLI::Validator positiveUpTo(double max) {
  std::string range = fmt::format("(0, {:g}]", max);
  return CLI::Validator(
      [max, range](std::string& s) {
        std::optional<double> v = finiteValue(s);
        return v && *v > 0 && *v <= max ? std::string() : fmt::format("{} is not a number in {}", s, range);
      },
      "in " + range);
}

CLI::Validator nonEmpty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) { return s.empty() ? "an empty value is not a " + what : std::string(); },
      "");
}

CLI::Validator writableFile() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return "an empty value is not a file name";
        namespace fs = std::filesystem;
        std::error_code ec;
        if (fs::is_directory(s, ec)) return "'" + s + "' is a folder, not a file";
        fs::path folder = fs::path(s).parent_path();
        if (folder.empty()) folder = ".";
        if (!fs::is_directory(folder, ec)) return "'" + s + "': the folder '" + folder.string() + "' does not exist";
        if (::access(folder.c_str(), W_OK) != 0)
          return "'" + s + "': the folder '" + folder.string() + "' is not writable";
        return "";
      },
      "");
}

int64_t parseMemorySize(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("'{}' is not a memory size such as 80GiB ({})", text, why));
  };
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (end == begin || text.empty() || std::isspace(static_cast<unsigned char>(text[0])))
    throw bad("a number, then a unit B, KB, KiB, MB, MiB, GB, GiB, TB or TiB");
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  struct Unit {
    const char* name;
    double bytes;
  };
  static const Unit units[] = {{"B", 1},     {"KB", 1e3},         {"KiB", 0x1p10}, {"MB", 1e6},
                               {"MiB", 0x1p20}, {"GB", 1e9},      {"GiB", 0x1p30}, {"TB", 1e12},
                               {"TiB", 0x1p40}};
  const Unit* found = nullptr;
  for (const Unit& u : units)
    if (unit == u.name) found = &u;
  if (!found) throw bad(unit.empty() ? "the unit is missing: B, KB, KiB, MB, MiB, GB, GiB, TB or TiB"
                                     : "unknown unit '" + unit + "': use B, KB, KiB, MB, MiB, GB, GiB, TB or TiB");
  const double bytes = value * found->bytes;
  if (!(bytes >= 1) || !(bytes <= 0x1p60)) throw bad("the size must be at least 1 byte and at most 2^60 bytes");
  return static_cast<int64_t>(bytes);
}

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

}  // namespace tessel::trainer
