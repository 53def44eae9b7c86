// `tessel launch [--max-restarts K] [--min-ranks M] [--hostfile FILE] [--log FILE] -- COMMAND...`:
// runs a training job (typically `mpirun -np N tessel-gpt ... --checkpoint-dir D`) and, when it
// fails, reruns it from its latest durable checkpoint, up to K times.
//
// Each attempt is one child process (posix_spawnp, the launcher's environment, in the
// launcher's process group, so a terminal's Ctrl-C reaches both and mpirun keeps reading its
// stdin); SIGINT and SIGTERM another process sends to the launcher are forwarded to it, and an
// attempt stopped by either is not restarted. An attempt
// that exits 0 ends the launch. One that exits non-zero or dies by a signal is a failure: its
// cause (exit status or signal name) and how long it ran are logged, and while restarts remain
// the command is rerun:
//   - from D/latest when it exists: `--resume D` is added (or replaces the command's own
//     --resume value), and the trainer follows `latest` (runtime/ckpt/Checkpoint.h: only a
//     committed checkpoint is ever named there, so a save the failure interrupted is skipped);
//   - otherwise from scratch (or from the command's own --resume), which the log says.
//   - with --hostfile, the hostfile is read again first (a node may have been lost). When it
//     has fewer slots than the command's rank count, --min-ranks M allows a restart on the
//     largest R >= M ranks that the plan can take by shrinking its data-parallel axes (dp
//     first, then fsdp; LaunchArgs.h restartShape): -np and --plan are rewritten and the
//     trainer reshards the checkpoint on load. Without --min-ranks, or with no such R, the
//     launch stops with an error naming the hostfile, its slots and the plan.
// The command must save checkpoints (--checkpoint-dir): a restart without them would start the
// whole run over, so its absence is an error before anything runs.
// Every attempt, failure, restart and the end go to stderr as lines and, with --log FILE, to
// FILE as JSON lines (appended, one object per event, flushed at once): {"event": "start" |
// "exit" | "restart" | "done" | "gave_up", "attempt", "time" (Unix seconds), ...}.
// The launcher exits with the last attempt's status (0 on success; 128 + N for death by
// signal N, as shells report it).
#include "runtime/io/RegularFile.h"
#include "runtime/tools/tessel/LaunchArgs.h"
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/train/FlagChecks.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tessel::cli {
namespace {

struct LaunchFlags {
  int64_t maxRestarts = 3;
  int64_t minRanks = 0;  // 0: not given (never restart on fewer ranks)
  std::string hostfile, log;
  Words command;
};

// The running attempt's pid, and the first SIGINT/SIGTERM the launcher received: set by the
// signal handler, which forwards the signal to the child (kill is async-signal-safe).
volatile sig_atomic_t gChild = 0;
volatile sig_atomic_t gStopSignal = 0;

// A signal the terminal sent (Ctrl-C: si_code SI_KERNEL) reached the child already, as it shares
// the launcher's foreground process group; only one another process sent to the launcher alone
// (kill: SI_USER, SI_QUEUE, SI_TKILL, all <= 0) is forwarded, so that mpirun never gets a
// second SIGINT, which it takes as "terminate forcibly".
extern "C" void forwardSignal(int sig, siginfo_t* info, void*) {
  if (gStopSignal == 0) gStopSignal = sig;
  if (gChild > 0 && (info == nullptr || info->si_code <= 0)) kill(static_cast<pid_t>(gChild), sig);
}

/// Installs forwardSignal for SIGINT and SIGTERM for its lifetime, restoring the previous
/// handlers after.
class SignalForwarding {
 public:
  SignalForwarding() {
    struct sigaction sa {};
    sa.sa_sigaction = forwardSignal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt_);
    sigaction(SIGTERM, &sa, &oldTerm_);
  }
  ~SignalForwarding() {
    sigaction(SIGINT, &oldInt_, nullptr);
    sigaction(SIGTERM, &oldTerm_, nullptr);
  }

 private:
  struct sigaction oldInt_ {}, oldTerm_ {};
};

/// How an attempt ended.
struct Outcome {
  int exitStatus = 0;  // the exit status when it exited
  int signal = 0;      // the signal that ended it (0: it exited)
  double seconds = 0;  // how long it ran
  /// The launcher's exit status for it: the exit status, or 128 + the signal.
  int status() const { return signal ? 128 + signal : exitStatus; }
  /// The cause in words: "killed by signal 9 (SIGKILL)", "exit status 137 (128 + 9: ...)".
  std::string cause() const {
    if (signal) {
      const char* abbrev = sigabbrev_np(signal);
      return fmt::format("killed by signal {} (SIG{})", signal, abbrev ? abbrev : "?");
    }
    // mpirun and shells report a child's death by signal N as status 128 + N.
    if (exitStatus > 128 && exitStatus < 128 + 65) {
      const char* abbrev = sigabbrev_np(exitStatus - 128);
      if (abbrev) return fmt::format("exit status {} (128 + {}: a process died by SIG{})", exitStatus, exitStatus - 128,
                                     abbrev);
    }
    return fmt::format("exit status {}", exitStatus);
  }
};

/// Runs `command` as a child process and waits for it. Throws std::runtime_error when it cannot
/// be started.
Outcome runAttempt(const Words& command) {
  std::vector<char*> argv;
  for (const std::string& w : command) argv.push_back(const_cast<char*>(w.c_str()));
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (int err = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ))
    throw std::runtime_error(fmt::format("cannot start '{}': {}", command[0], std::strerror(err)));
  gChild = pid;
  if (gStopSignal) kill(pid, gStopSignal);  // a signal that arrived before gChild was set
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(fmt::format("waiting for '{}': {}", command[0], std::strerror(errno)));
  }
  gChild = 0;
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (WIFSIGNALED(wstatus)) o.signal = WTERMSIG(wstatus);
  else o.exitStatus = WEXITSTATUS(wstatus);
  return o;
}

/// Writes each event to stderr as a line and, with --log, to the log file as a JSON line.
class LaunchLog {
 public:
  explicit LaunchLog(const std::string& path) {
    if (path.empty()) return;
    file_.open(path, std::ios::app);
    if (!file_) throw std::runtime_error(fmt::format("--log: '{}' cannot be opened for appending", path));
  }
  void event(const std::string& line, nlohmann::json record) {
    fmt::print(stderr, "tessel launch: {}\n", line);
    std::fflush(stderr);
    if (!file_.is_open()) return;
    record["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    record["message"] = line;
    file_ << record.dump() << '\n' << std::flush;
  }

 private:
  std::ofstream file_;
};

std::string joined(const Words& w) {
  std::string s;
  for (const std::string& x : w) s += (s.empty() ? "" : " ") + x;
  return s;
}

/// The optional whole-number flag `name` of the command (e.g. --batch), 0 when absent or not
/// a number (the trainer then refuses it itself).
int64_t commandNumber(const Words& command, const std::string& name) {
  std::optional<std::string> v = flagValue(command, {name});
  if (!v || v->empty() || v->size() > 12 || v->find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoll(*v);
}

/// The command for the next attempt on the hostfile's current slots (see the file comment);
/// throws std::runtime_error when it cannot be fitted.
Words fitToHostfile(const LaunchFlags& f, const Words& command, LaunchLog& log, int64_t attempt) {
  const int64_t slots = hostfileSlots(f.hostfile);
  const int64_t ranks = commandRanks(command).value_or(1);
  if (slots >= ranks) return command;
  const std::string have = fmt::format("hostfile '{}' has {} slot{} now, the command needs {} (-np {})", f.hostfile,
                                       slots, slots == 1 ? "" : "s", ranks, ranks);
  if (f.minRanks == 0) throw std::runtime_error(have + "; give --min-ranks M to restart on fewer ranks");
  std::optional<std::string> plan = flagValue(command, {"--plan"});
  if (!plan) throw std::runtime_error(have + ", and the command has no --plan to shrink");
  std::vector<PlanAxis> axes = parsePlanAxes(*plan);
  if (planRanks(axes) != ranks)
    throw std::runtime_error(fmt::format("{}, and its --plan {} is for {} ranks, not {}", have, *plan,
                                         planRanks(axes), ranks));
  std::optional<RestartShape> shape = restartShape(axes, slots, f.minRanks, commandNumber(command, "--batch"),
                                                   std::max<int64_t>(1, commandNumber(command, "--grad-accumulation")));
  if (!shape)
    throw std::runtime_error(fmt::format("{}: no rank count R with --min-ranks {} <= R <= {} fits plan {} by "
                                         "shrinking its dp and fsdp axes (the other axes keep their sizes{})",
                                         have, f.minRanks, slots, *plan,
                                         commandNumber(command, "--batch") ? " and --batch must divide" : ""));
  const std::string newPlan = planText(shape->plan);
  log.event(fmt::format("{}: restarting on {} ranks with --plan {} (was {}); the trainer reshards the checkpoint",
                        have, shape->ranks, newPlan, *plan),
            {{"event", "shrink"}, {"attempt", attempt}, {"hostfile", f.hostfile}, {"slots", slots},
             {"ranks_before", ranks}, {"ranks", shape->ranks}, {"plan_before", *plan}, {"plan", newPlan}});
  Words out = withFlagValue(command, rankCountFlags(), std::to_string(shape->ranks));
  return withFlagValue(out, {"--plan"}, newPlan);
}

int runLaunch(const LaunchFlags& f) {
  Words command = f.command;
  // Everything a restart will need is checked before the first attempt.
  const std::optional<std::string> dir = flagValue(command, {"--checkpoint-dir"});
  if (!dir || dir->empty())
    throw std::runtime_error("the command has no --checkpoint-dir: a restart would start the run over; give the "
                             "trainer --checkpoint-dir DIR (and --checkpoint-every N)");
  const std::optional<int64_t> ranks = commandRanks(command);
  if (f.minRanks > 0) {
    if (f.hostfile.empty()) throw std::runtime_error("--min-ranks needs --hostfile (where the ranks available are read)");
    if (!ranks) throw std::runtime_error("--min-ranks needs the command's rank count (mpirun -np N)");
    if (f.minRanks > *ranks)
      throw std::runtime_error(fmt::format("--min-ranks {} is more than the command's -np {}", f.minRanks, *ranks));
  }
  if (!f.hostfile.empty()) hostfileSlots(f.hostfile);  // readable and well-formed now, not at the first failure
  LaunchLog log(f.log);
  SignalForwarding forwarding;
  gStopSignal = 0;
  std::string lastCause;
  for (int64_t attempt = 1;; ++attempt) {
    log.event(fmt::format("attempt {}: {}", attempt, joined(command)),
              {{"event", "start"}, {"attempt", attempt}, {"command", command}});
    const Outcome o = runAttempt(command);
    if (o.signal == 0 && o.exitStatus == 0) {
      log.event(fmt::format("attempt {} succeeded after {:.1f} s ({} restart{})", attempt, o.seconds, attempt - 1,
                            attempt == 2 ? "" : "s"),
                {{"event", "done"}, {"attempt", attempt}, {"seconds", o.seconds}, {"restarts", attempt - 1}});
      return 0;
    }
    lastCause = o.cause();
    log.event(fmt::format("attempt {} failed after {:.1f} s: {}", attempt, o.seconds, lastCause),
              {{"event", "exit"}, {"attempt", attempt}, {"seconds", o.seconds}, {"exit_status", o.exitStatus},
               {"signal", o.signal}, {"cause", lastCause}});
    if (gStopSignal) {
      log.event(fmt::format("stopped by SIG{}: not restarting", sigabbrev_np(gStopSignal)),
                {{"event", "gave_up"}, {"attempt", attempt}, {"reason", "stopped by a signal"}, {"cause", lastCause}});
      return o.status();
    }
    if (attempt > f.maxRestarts) {
      log.event(fmt::format("giving up: {} restart{} used (--max-restarts {}); the last attempt failed: {}",
                            f.maxRestarts, f.maxRestarts == 1 ? "" : "s", f.maxRestarts, lastCause),
                {{"event", "gave_up"}, {"attempt", attempt}, {"reason", "restarts exhausted"}, {"cause", lastCause}});
      return o.status();
    }
    try {
      if (!f.hostfile.empty()) command = fitToHostfile(f, command, log, attempt + 1);
    } catch (const std::exception& e) {
      log.event(fmt::format("error: cannot restart: {} (the last attempt failed: {})", e.what(), lastCause),
                {{"event", "gave_up"}, {"attempt", attempt}, {"reason", e.what()}, {"cause", lastCause}});
      return o.status();
    }
    const std::filesystem::path latest = std::filesystem::path(*dir) / "latest";
    std::string from, latestText, latestProblem;
    struct stat latestStat {};
    // A `latest` that is a FIFO, folder or device is refused without blocking the launcher.
    const bool hasLatest = ::lstat(latest.c_str(), &latestStat) == 0;
    if (hasLatest && !readRegularFile(latest.string(), 256, latestText, latestProblem)) {
      const std::string reason = fmt::format("checkpoint root file '{}': {}", latest.string(), latestProblem);
      log.event(fmt::format("error: cannot restart: {} (the last attempt failed: {})", reason, lastCause),
                {{"event", "gave_up"}, {"attempt", attempt}, {"reason", reason}, {"cause", lastCause}});
      return o.status();
    }
    if (std::istringstream in(latestText); hasLatest && std::getline(in, from)) {
      command = withFlagValue(command, {"--resume"}, *dir);
      from = fmt::format("from the latest checkpoint '{}' (--resume {})", (std::filesystem::path(*dir) / from).string(),
                         *dir);
    } else if (std::optional<std::string> own = flagValue(command, {"--resume"})) {
      from = fmt::format("from the command's own --resume {}: no checkpoint in '{}' yet", *own, *dir);
    } else {
      from = fmt::format("from scratch: no checkpoint in '{}' yet", *dir);
    }
    log.event(fmt::format("restart {} of {} {}", attempt, f.maxRestarts, from),
              {{"event", "restart"}, {"attempt", attempt + 1}, {"restart", attempt}, {"cause", lastCause},
               {"from", from}, {"command", command}});
  }
}

}  // namespace

Action setupLaunch(CLI::App& sub) {
  auto f = std::make_shared<LaunchFlags>();
  sub.footer("\nExample: tessel launch --max-restarts 3 -- mpirun -np 4 tessel-gpt --data D --plan dp=4 "
             "--checkpoint-dir ckpt --checkpoint-every 100\n"
             "The command must save checkpoints (--checkpoint-dir). A restart adds --resume DIR when DIR/latest "
             "exists (replacing the command's own --resume), else reruns from scratch and says so. "
             "--log records one JSON object per event (start, exit, shrink, restart, done, gave_up).");
  sub.add_option("--max-restarts", f->maxRestarts, "restarts after failures (non-zero exit or death by a signal) "
                                                   "before giving up")
      ->capture_default_str()->check(trainer::integerIn(0, int64_t{1} << 20));
  sub.add_option("--min-ranks", f->minRanks,
                 "allow a restart on fewer ranks, down to this many, when --hostfile has fewer slots than the "
                 "command's -np: -np and --plan shrink (dp first, then fsdp) and the trainer reshards on load")
      ->check(trainer::integerIn(1, int64_t{1} << 20));
  sub.add_option("--hostfile", f->hostfile, "an OpenMPI hostfile ('host slots=N' lines) read again before each "
                                            "restart: the sum of its slots is the ranks available")
      ->type_name("FILE")->check(trainer::nonEmpty("file name"));
  sub.add_option("--log", f->log, "append each attempt, failure with its cause, restart and the end to this file "
                                  "as JSON lines")
      ->type_name("FILE")->check(trainer::nonEmpty("file name"));
  sub.add_option("COMMAND", f->command, "the job, after --: e.g. mpirun -np 4 tessel-gpt ... --checkpoint-dir DIR")
      ->required()->check(trainer::nonEmpty("command word"));
  return [f](Context&) { return runLaunch(*f); };
}

}  // namespace tessel::cli
