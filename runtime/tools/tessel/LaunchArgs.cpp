// The command-line rewriting of `tessel launch`; see LaunchArgs.h.
#include "runtime/tools/tessel/LaunchArgs.h"
#include "runtime/io/RegularFile.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tessel::cli {
namespace {

/// Where an occurrence of `names` is in `command`: the word's index and whether its value is in
/// the same word (`--x=V`).
struct FlagAt {
  size_t index = 0;
  bool joined = false;
  std::string name;
};

/// The last occurrence counts: the trainers take a repeated flag's last value
/// (runtime/train/LastValueWins.h), so that is the one to read and to replace.
std::optional<FlagAt> findFlag(const Words& command, const std::vector<std::string>& names) {
  for (size_t i = command.size(); i-- > 0;)
    for (const std::string& n : names) {
      if (command[i] == n) return FlagAt{i, false, n};
      if (command[i].size() > n.size() && command[i].compare(0, n.size(), n) == 0 && command[i][n.size()] == '=')
        return FlagAt{i, true, n};
    }
  return std::nullopt;
}

/// A whole number in [1, 2^40] (decimal digits only), or nullopt.
std::optional<int64_t> positiveWhole(const std::string& text) {
  if (text.empty() || text.size() > 13 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int64_t v = std::stoll(text);
  if (v < 1 || v > (int64_t{1} << 40)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::string> flagValue(const Words& command, const std::vector<std::string>& names) {
  std::optional<FlagAt> at = findFlag(command, names);
  if (!at) return std::nullopt;
  if (at->joined) return command[at->index].substr(at->name.size() + 1);
  if (at->index + 1 >= command.size())
    throw std::runtime_error(fmt::format("the command's {} is its last word: it has no value", at->name));
  return command[at->index + 1];
}

Words withFlagValue(const Words& command, const std::vector<std::string>& names, const std::string& value) {
  Words out = command;
  std::optional<FlagAt> at = findFlag(command, names);
  if (!at) {
    out.push_back(names.at(0));
    out.push_back(value);
  } else if (at->joined) {
    out[at->index] = at->name + "=" + value;
  } else if (at->index + 1 < out.size()) {
    out[at->index + 1] = value;
  } else {
    out.push_back(value);  // a dangling flag gets its value
  }
  return out;
}

const std::vector<std::string>& rankCountFlags() {
  static const std::vector<std::string> flags = {"-np", "-n", "--np"};
  return flags;
}

std::optional<int64_t> commandRanks(const Words& command) {
  std::optional<std::string> text = flagValue(command, rankCountFlags());
  if (!text) return std::nullopt;
  std::optional<int64_t> n = positiveWhole(*text);
  if (!n) throw std::runtime_error(fmt::format("the command's rank count '{}' is not a whole number >= 1", *text));
  return n;
}

std::vector<PlanAxis> parsePlanAxes(const std::string& plan) {
  std::vector<PlanAxis> axes;
  std::stringstream items(plan);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('=');
    std::optional<int64_t> size = eq == std::string::npos ? std::nullopt : positiveWhole(item.substr(eq + 1));
    if (eq == 0 || !size)
      throw std::runtime_error(fmt::format("the command's --plan '{}': '{}' is not axis=size (e.g. dp=4)", plan, item));
    axes.push_back({item.substr(0, eq), *size});
  }
  if (axes.empty() || plan.back() == ',')
    throw std::runtime_error(fmt::format("the command's --plan '{}' is not a list of axis=size items", plan));
  return axes;
}

std::string planText(const std::vector<PlanAxis>& axes) {
  std::string s;
  for (const PlanAxis& a : axes) s += fmt::format("{}{}={}", s.empty() ? "" : ",", a.name, a.size);
  return s;
}

int64_t planRanks(const std::vector<PlanAxis>& axes) {
  int64_t n = 1;
  for (const PlanAxis& a : axes) n *= a.size;  // sizes <= 2^40 each, checked products below
  return n;
}

std::optional<std::vector<PlanAxis>> shrinkPlanTo(const std::vector<PlanAxis>& axes, int64_t ranks,
                                                  int64_t globalBatch, int64_t microsteps) {
  int64_t dp = 1, fsdp = 1, other = 1;
  for (const PlanAxis& a : axes) {
    if (a.name == "dp") dp = a.size;
    else if (a.name == "fsdp") fsdp = a.size;
    else other *= a.size;
  }
  if (ranks < 1 || ranks % other != 0) return std::nullopt;
  const int64_t degree = ranks / other;  // dp' x fsdp'
  // fsdp' from its old size down: the largest fsdp' leaves the most sharding (memory per rank
  // grows least) and takes ranks from dp first.
  for (int64_t f = std::min(fsdp, degree); f >= 1; --f) {
    if (degree % f != 0 || degree / f > dp) continue;
    const int64_t d = degree / f;
    if (globalBatch > 0 && globalBatch % (d * f * microsteps) != 0) continue;
    std::vector<PlanAxis> out = axes;
    for (PlanAxis& a : out) {
      if (a.name == "dp") a.size = d;
      else if (a.name == "fsdp") a.size = f;
    }
    return out;
  }
  return std::nullopt;
}

std::optional<RestartShape> restartShape(const std::vector<PlanAxis>& axes, int64_t available, int64_t minRanks,
                                         int64_t globalBatch, int64_t microsteps) {
  for (int64_t r = std::min(available, planRanks(axes)); r >= std::max<int64_t>(minRanks, 1); --r)
    if (std::optional<std::vector<PlanAxis>> plan = shrinkPlanTo(axes, r, globalBatch, microsteps))
      return RestartShape{r, *plan};
  return std::nullopt;
}

int64_t hostfileSlots(const std::string& path) {
  std::string text, problem;
  // A FIFO, folder or device is refused without blocking; a hostfile is small.
  if (!readRegularFile(path, size_t{1} << 20, text, problem))
    throw std::runtime_error(fmt::format("hostfile '{}': {}", path, problem));
  std::istringstream in(text);
  int64_t total = 0;
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::stringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;  // blank or comment
    std::optional<int64_t> slots;
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0) continue;  // max_slots=, other keys: not what mpirun fills
      slots = positiveWhole(word.substr(6));
      if (!slots)
        throw std::runtime_error(fmt::format("hostfile '{}' line {}: '{}' is not slots=N with a whole N >= 1", path,
                                             lineNo, word));
    }
    if (!slots)
      throw std::runtime_error(fmt::format("hostfile '{}' line {}: host '{}' has no slots=N (the count of ranks it "
                                           "takes must be stated)", path, lineNo, host));
    total += *slots;
  }
  if (total == 0) throw std::runtime_error(fmt::format("hostfile '{}' lists no host", path));
  return total;
}

}  // namespace tessel::cli
