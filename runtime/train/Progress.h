// What a training run prints while it runs, on rank 0.
//
// Promise: on a terminal (stdout is a tty) one line that redraws in place ("\r", then the
// bar, then "erase to the end of the line"), never a newline per step: the bar, step/total,
// the loss, the last validation loss, the throughput and the ETA; the line is ended once, at
// the end of training. Otherwise (a log file, CI, mpirun with output to a file) plain lines,
// one every --log-every steps, at every step with a validation loss, and at the last step,
// in the format the tests and scripts read (ranks under mpirun always print these):
//   step    10/100 | loss 2.3456 | val 2.4000 | lr 1.00e-03 | norm 0.812 | 1234 tok/s | ETA 1m02s
#pragma once

#include <cstdint>
#include <string>

namespace tessel::trainer {

/// True when the process's standard output is a terminal (isatty) and the process was not
/// started by a launcher: OpenMPI's mpirun gives every rank a pseudo-terminal even when its own
/// output goes to a file or a pipe, so a rank cannot tell, and plain lines are the safe choice.
bool stdoutIsTerminal();

/// What one progress update shows.
struct ProgressLine {
  int64_t step = 0, steps = 0;
  double loss = 0, lr = 0, gradNorm = 0, throughput = 0;
  bool evaluated = false;   // this step ran a validation: valLoss is its loss
  double valLoss = 0;
  bool anyValidation = false;  // some step so far did: lastValLoss is the latest
  double lastValLoss = 0;
  double etaSeconds = 0;
};

/// Prints progress lines (see the file comment). Not thread-safe; one per run.
class ProgressPrinter {
 public:
  /// `terminal`: redraw one line; else a line every `every` (>= 1) steps. `unit`: what the
  /// throughput counts per second ("tok/s", "img/s").
  ProgressPrinter(bool terminal, int64_t every, std::string unit);
  /// Prints (or redraws) after a step; flushes stdout.
  void update(const ProgressLine& p);
  /// Ends the redrawn line with a newline (terminal only; nothing otherwise). Idempotent.
  void finish();
  ~ProgressPrinter() { finish(); }

  /// The plain line of `p` (no newline).
  std::string plainLine(const ProgressLine& p) const;
  /// The terminal line of `p`: "\r", a 24-cell bar, the numbers, then ESC[K.
  std::string barLine(const ProgressLine& p) const;

 private:
  bool terminal_;
  int64_t every_;
  std::string unit_;
  bool open_ = false;  // a redrawn line is on the screen without its newline
};

/// "42s", or "3m07s" from one minute on (seconds rounded).
std::string formatDuration(double seconds);

}  // namespace tessel::trainer
