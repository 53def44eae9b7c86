// Progress lines; see Progress.h.
#include "runtime/train/Progress.h"

#include "runtime/comm/World.h"  // detectWorld

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>
#include <utility>

namespace tessel::trainer {

bool stdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1 && !rt::detectWorld().launched(); }

std::string formatDuration(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02d}s", s / 60, s % 60) : fmt::format("{}s", s);
}

ProgressPrinter::ProgressPrinter(bool terminal, int64_t every, std::string unit)
    : terminal_(terminal), every_(std::max<int64_t>(1, every)), unit_(std::move(unit)) {}

std::string ProgressPrinter::plainLine(const ProgressLine& p) const {
  return fmt::format("step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | norm {:.3f} | {:.0f} {} | ETA {}", p.step, p.steps,
                     p.loss, p.evaluated ? fmt::format(" | val {:.4f}", p.valLoss) : std::string(), p.lr,
                     p.gradNorm, p.throughput, unit_, formatDuration(p.etaSeconds));
}

std::string ProgressPrinter::barLine(const ProgressLine& p) const {
  constexpr int64_t cells = 24;
  const int64_t done = p.steps > 0 ? std::min(cells, p.step * cells / p.steps) : cells;
  return fmt::format("\r[{}{}] {}/{} | loss {:.4f} | val {} | {:.0f} {} | ETA {}\033[K", std::string(done, '#'),
                     std::string(cells - done, '.'), p.step, p.steps, p.loss,
                     p.anyValidation ? fmt::format("{:.4f}", p.lastValLoss) : std::string("-"), p.throughput,
                     unit_, formatDuration(p.etaSeconds));
}

void ProgressPrinter::update(const ProgressLine& p) {
  if (terminal_) {
    fmt::print("{}", barLine(p));
    open_ = true;
  } else if (p.step % every_ == 0 || p.step == p.steps || p.evaluated) {
    fmt::print("{}\n", plainLine(p));
  }
  std::fflush(stdout);
}

void ProgressPrinter::finish() {
  if (!open_) return;
  fmt::print("\n");
  std::fflush(stdout);
  open_ = false;
}

}  // namespace tessel::trainer
