// Checkpoints and resuming for the training loop; see Checkpointing.h.
#include "runtime/train/Checkpointing.h"

#include "runtime/ckpt/Index.h"
#include "runtime/comm/GatherBytes.h"
#include "runtime/train/FlagChecks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <stdexcept>

namespace tessel::trainer {

void addCheckpointFlags(CLI::App& app, CheckpointFlags& f) {
  app.add_option("--checkpoint-dir", f.dir,
                 "save checkpoints under DIR (a folder per step, DIR/latest naming the newest committed one; every "
                 "rank writes its own shards; docs/checkpoints.md): every --checkpoint-every steps and after the last")
      ->type_name("DIR")->check(nonEmpty("folder"));
  app.add_option("--checkpoint-every", f.every, "save a checkpoint every N steps (needs --checkpoint-dir)")
      ->check(integerIn(1, int64_t{1} << 40));
  app.add_flag("--async-checkpoint", f.async,
               "copy the state to host memory, then write and commit it on a background thread while training "
               "continues");
  app.add_option("--keep-checkpoints", f.keep, "keep only the newest K committed checkpoints (0: all)")
      ->check(integerIn(0, int64_t{1} << 20));
  app.add_option("--stop-after", f.stopAfter,
                 "end the run after step N as if it were interrupted: the learning-rate schedule still spans "
                 "--steps, and a checkpoint is written only if N is a multiple of --checkpoint-every (or N is --steps)")
      ->check(integerIn(0, int64_t{1} << 40));
  app.add_option("--resume", f.resume,
                 "continue from a checkpoint: its folder, or a checkpoint root (follows DIR/latest); at its step + 1, "
                 "with the same data order, on any plan and number of ranks")
      ->type_name("DIR")->check(nonEmpty("folder"));
  app.add_flag("--allow-partial", f.allowPartial,
               "with --resume: load the tensors both the checkpoint and the model have, name the others, and keep "
               "the initialised values of the rest");
}

void checkCheckpointFlags(const CheckpointFlags& f, int64_t steps, int64_t resumedStep) {
  if (f.dir.empty()) {
    const char* without = f.every > 0 ? "--checkpoint-every" : f.async ? "--async-checkpoint"
                          : f.keep > 0 ? "--keep-checkpoints" : nullptr;
    if (without)
      throw std::runtime_error(fmt::format("{} needs --checkpoint-dir DIR: where the checkpoints go", without));
  }
  if (f.allowPartial && f.resume.empty())
    throw std::runtime_error("--allow-partial needs --resume DIR: it says how a checkpoint is loaded");
  if (steps <= 0) return;  // not known yet (e.g. --steps 0: one epoch)
  if (f.stopAfter > steps)
    throw std::runtime_error(fmt::format("--stop-after {} is beyond the run's last step (--steps {})", f.stopAfter,
                                         steps));
  if (resumedStep > steps)
    throw std::runtime_error(fmt::format("--resume '{}': the checkpoint holds step {}, beyond the run's last step "
                                         "(--steps {})",
                                         f.resume, resumedStep, steps));
  if (f.stopAfter >= 0 && f.stopAfter < resumedStep)
    throw std::runtime_error(fmt::format("--stop-after {} is before the step --resume '{}' continues from ({})",
                                         f.stopAfter, f.resume, resumedStep));
}

ResumePoint findResumePoint(const CheckpointFlags& f, const RunIdentity& run) {
  ResumePoint r;
  if (f.resume.empty()) return r;
  try {
    r.dir = ckpt::resolveCheckpoint(f.resume, &r.notes);
    const ckpt::Index index = ckpt::readIndex(r.dir);
    r.step = index.step;
    r.trainer = index.trainer;
    r.weightsOnly = isWeightsOnly(index);
  } catch (const ckpt::CheckpointError& e) {
    throw std::runtime_error(fmt::format("--resume '{}': {}", f.resume, e.what()));
  }
  checkTrainerState(r.trainer, r.step, r.weightsOnly, run, r.dir, f.allowPartial, &r.notes);
  return r;
}

namespace {

/// The plan a trainer state was saved under, for the resume line: its mesh axes ("dp=2,tp=2"),
/// else its plan text (one rank), else "unknown" (a weights-only import).
std::string savedPlan(const nlohmann::json& t) {
  if (!t.is_object()) return "unknown";
  std::string text;
  if (t.contains("mesh") && t["mesh"].is_array())
    for (const nlohmann::json& axis : t["mesh"])
      if (axis.is_array() && axis.size() == 2 && axis[0].is_string())
        text += fmt::format("{}{}={}", text.empty() ? "" : ",", axis[0].get<std::string>(), axis[1].dump());
  if (text.empty() && t.contains("plan") && t["plan"].is_string()) text = t["plan"].get<std::string>();
  return text.empty() ? "unknown" : text;
}

/// " on N ranks" of the resume line, or "" when the state does not say.
std::string savedRanks(const nlohmann::json& t) {
  if (!t.is_object() || !t.contains("world_size")) return "";
  return fmt::format(" on {} rank{}", t["world_size"].dump(), t["world_size"] == 1 ? "" : "s");
}

}  // namespace

CheckpointSession::CheckpointSession(rt::ProgramExecutor& ex, rt::Communicator* world, const CheckpointFlags& flags,
                                     RunIdentity run, ResumePoint resume, const TrainOptions& options)
    : ex_(ex), world_(world), flags_(flags), run_(std::move(run)), resume_(std::move(resume)), options_(&options),
      rank0_(!world || world->rank() == 0) {
  if (!resume_.dir.empty()) {
    const ckpt::LoadResult loaded = ckpt::loadCheckpoint(ex_, world_, resume_.dir, {.allowPartial = flags_.allowPartial});
    // Every rank's bytes read, summed for the line.
    int64_t bytes = loaded.stats.bytesRead;
    if (world_ && world_->worldSize() > 1) {
      bytes = 0;
      for (const std::string& b : rt::allGatherBytes(*world_, std::to_string(loaded.stats.bytesRead), "bytes read"))
        bytes += std::stoll(b);
    }
    if (rank0_) {
      const nlohmann::json& t = loaded.index.trainer;
      fmt::print("resumed from '{}' (step {}, saved under plan {}{}): {} bytes read\n", loaded.dir,
                 loaded.index.step, savedPlan(t), savedRanks(t), bytes);
      for (const std::string& note : resume_.notes) fmt::print("{}\n", note);
      for (const std::string& note : loaded.notes) fmt::print("{}\n", note);
    }
  }
  if (!flags_.dir.empty())
    checkpointer_ = std::make_unique<ckpt::Checkpointer>(
        ex_, world_, ckpt::SaveOptions{.root = flags_.dir, .async = flags_.async, .keep = flags_.keep,
                                      .timeoutSeconds = flags_.commitTimeoutSeconds});
}

CheckpointSession::~CheckpointSession() = default;

void CheckpointSession::attach(TrainOptions& o) {
  options_ = &o;
  o.firstStep = resume_.step + 1;
  o.lastStep = flags_.stopAfter >= 0 ? flags_.stopAfter : o.steps;
  o.afterStep = [this](int64_t step) { return afterStep(step); };
  if (o.lastStep == resume_.step && rank0_)
    fmt::print("{}: no step to run\n",
               o.lastStep == o.steps
                   ? fmt::format("the checkpoint holds step {}, the run's last (--steps {})", resume_.step, o.steps)
                   : fmt::format("--stop-after {} is the step the checkpoint holds", resume_.step));
  if (o.lastStep == resume_.step) {
    // Nothing to run: save what was loaded, where the policy wants a checkpoint, unless that
    // is the very folder it came from.
    const bool wanted = (flags_.every > 0 && resume_.step % flags_.every == 0) || resume_.step == o.steps;
    if (checkpointer_ && wanted) {
      std::error_code ec;
      const auto target = std::filesystem::path(flags_.dir) / ckpt::stepFolderName(resume_.step);
      if (resume_.dir.empty() || !std::filesystem::equivalent(target, resume_.dir, ec))
        for (const std::string& line : save(resume_.step)) fmt::print("{}\n", line);
    }
  }
}

std::vector<std::string> CheckpointSession::save(int64_t step) {
  checkpointer_->save(step, trainerState(run_, *options_, step));
  lastSaved_ = step;
  return checkpointer_->poll();  // rank 0's lines only (Checkpoint.h)
}

std::vector<std::string> CheckpointSession::afterStep(int64_t step) {
  if (!checkpointer_) return {};
  const bool onCadence = flags_.every > 0 && step % flags_.every == 0;
  return onCadence || step == options_->steps ? save(step) : checkpointer_->poll();
}

void CheckpointSession::finish() {
  if (checkpointer_) {
    checkpointer_->wait();
    for (const std::string& line : checkpointer_->poll())
      if (rank0_) fmt::print("{}\n", line);
  }
  const int64_t last = options_->lastStep;
  if (!rank0_ || last < 0 || last >= options_->steps || last == resume_.step) return;
  // Ended early on purpose: say so, and where the run continues from.
  std::string from;
  if (lastSaved_ >= 0)
    from = fmt::format("resume from step {} with --resume '{}'", lastSaved_, flags_.dir);
  else if (!resume_.dir.empty())
    from = fmt::format("no checkpoint was saved after step {} (--checkpoint-every); resume again from '{}'",
                       resume_.step, resume_.dir);
  else
    from = flags_.dir.empty() ? "no --checkpoint-dir: there is no checkpoint to resume from"
                              : "no checkpoint fell on --checkpoint-every before it: there is none to resume from";
  fmt::print("stopped after step {} of {} (--stop-after): {}\n", last, options_->steps, from);
}

}  // namespace tessel::trainer
