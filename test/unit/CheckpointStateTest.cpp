// The trainer state of a checkpoint (runtime/train/Checkpointing.h): a state is weights only or
// complete. Every field trainerState writes, removed, and every field given a wrong type or
// range, is an error naming that field and the folder (also under --allow-partial); a state of
// the same run passes; differences of the run and of the data are errors, or notes with
// --allow-partial.
#include "runtime/train/Checkpointing.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessel::trainer {
namespace {

using nlohmann::json;

constexpr int64_t kStep = 4;

RunIdentity run() {
  RunIdentity r{.model = "gpt", .config = {{"layers", 1}, {"channels", 32}}, .globalBatch = 8, .seed = 7,
                .optimizer = "adamw", .precision = "f32", .plan = "dp=2 bucket_mb=25 overlap=on",
                .mesh = {{"dp", 2}}, .worldSize = 2};
  const std::string bytes = "the training data";
  r.data.add(bytes.data(), bytes.size());
  r.dataWhere = "'a.txt'";
  return r;
}

json state() {
  TrainOptions o;
  o.steps = 10;
  return trainerState(run(), o, kStep);
}

/// Every path of `j` down to its leaves ("sampler", "sampler.global_batch", ...), objects first.
void paths(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& [key, value] : j.items()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    out.push_back(path);
    if (value.is_object() && key != "config") paths(value, path, out);
  }
}

json& at(json& j, const std::string& path) {
  json* p = &j;
  for (size_t from = 0;;) {
    const size_t dot = path.find('.', from);
    p = &(*p)[path.substr(from, dot == std::string::npos ? std::string::npos : dot - from)];
    if (dot == std::string::npos) return *p;
    from = dot + 1;
  }
}

void erase(json& j, const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) j.erase(path);
  else at(j, path.substr(0, dot)).erase(path.substr(dot + 1));
}

/// The message checkTrainerState throws for `saved` (with or without --allow-partial), or "".
std::string refusal(const json& saved, bool allowPartial, std::vector<std::string>* notes = nullptr) {
  try {
    checkTrainerState(saved, kStep, /*weightsOnly=*/false, run(), "ck/step_00000004", allowPartial, notes);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointState, TheRunsOwnStateIsComplete) {
  EXPECT_EQ(trainerStateProblem(state(), kStep), "");
  EXPECT_EQ(refusal(state(), false), "");
}

TEST(CheckpointState, EachMissingFieldIsNamed) {
  std::vector<std::string> all;
  paths(state(), "", all);
  ASSERT_GE(all.size(), 25u);  // the top-level fields and those of sampler, lr_schedule, rng, data
  for (const std::string& path : all) {
    json saved = state();
    erase(saved, path);
    const std::string want = "lacks \"" + path + "\"";
    EXPECT_NE(trainerStateProblem(saved, kStep).find(want), std::string::npos) << path;
    for (bool allowPartial : {false, true}) {
      const std::string e = refusal(saved, allowPartial);
      EXPECT_EQ(e.rfind("--resume 'ck/step_00000004': the checkpoint's trainer state " + want, 0), 0u) << e;
    }
  }
}

TEST(CheckpointState, EachIllTypedFieldIsNamed) {
  // {field, a value of the wrong type or range}: the problem names the field.
  const std::vector<std::pair<std::string, json>> bad = {
      {"step", -1}, {"step", "4"}, {"step", 5}, {"steps", -5}, {"steps", 0}, {"steps", 3}, {"steps", "x"},
      {"seed", -1}, {"seed", "7"}, {"seed", 1.5}, {"sampler", 4}, {"sampler.global_batches_consumed", 3},
      {"sampler.global_batches_consumed", "4"}, {"sampler.global_batch", 0}, {"sampler.global_batch", "8"},
      {"lr_schedule", "x"}, {"lr_schedule.lr", "x"}, {"lr_schedule.lr", -1.0}, {"lr_schedule.warmup", -1},
      {"lr_schedule.warmup", 0.5}, {"lr_schedule.schedule", "linear"}, {"lr_schedule.schedule", 1},
      {"lr_schedule.min_lr_ratio", "a"}, {"lr_schedule.steps", 7}, {"lr_schedule.steps", true}, {"rng", 5},
      {"rng.kind", "mt19937"}, {"rng.parameter_init_seed", 8}, {"rng.sampler_seed", -7}, {"plan", 3},
      {"plan", "dp=zz"}, {"plan", "dp=4"}, {"mesh", "dp=2"}, {"mesh", json::parse(R"([["dp", 0]])")},
      {"mesh", json::parse(R"([["dp"]])")}, {"mesh", json::parse(R"([[1, 2]])")},
      {"mesh", json::parse(R"([["dp", -2]])")}, {"mesh", json::array()},
      {"mesh", json::parse(R"([["a", 1048576], ["b", 1048576], ["c", 1048576], ["d", 1048576]])")}, {"world_size", 0}, {"world_size", 3}, {"world_size", "2"},
      {"world_size", -1}, {"model", ""}, {"model", 5}, {"config", "x"}, {"config", json::array()},
      {"optimizer", 3}, {"optimizer", ""}, {"precision", "f8"}, {"precision", json()}, {"data", 1},
      {"data.where", 3}, {"data.fingerprint", "xyz"}, {"data.fingerprint", 12}, {"data.bytes", -1},
      {"data.bytes", "17"}};
  for (const auto& [path, value] : bad) {
    json saved = state();
    at(saved, path) = value;
    const std::string problem = trainerStateProblem(saved, kStep);
    // A value that breaks a relation is named by the field that holds it or, for the mesh,
    // by the dependent field checked with it (world_size, plan).
    const bool named = problem.find("has \"" + path + "\"") != std::string::npos ||
                       (path == "mesh" && problem.find("has \"world_size\"") != std::string::npos);
    EXPECT_TRUE(named) << path << " = " << value.dump() << ": " << problem;
    for (bool allowPartial : {false, true})
      EXPECT_NE(refusal(saved, allowPartial).find("the checkpoint's trainer state has \""), std::string::npos)
          << path << " = " << value.dump();
  }
}

TEST(CheckpointState, OnlyAStepIsNotAState) {
  // A trainer of just {"step": 4} in a checkpoint with optimizer state skips no check.
  ckpt::Index index;
  index.step = kStep;
  index.trainer = {{"step", kStep}};
  EXPECT_FALSE(isWeightsOnly(index));
  EXPECT_NE(refusal(index.trainer, false).find("lacks \"steps\""), std::string::npos);
  // An import: weights only, no optimizer state, nothing recorded to compare.
  index.optimizerState = false;
  index.step = 0;
  index.trainer = {{"step", 0}, {"imported_from", "model.safetensors"}};
  EXPECT_TRUE(isWeightsOnly(index));
  EXPECT_NO_THROW(checkTrainerState(index.trainer, 0, true, run(), "ck", false));
  // Weights only with more fields: then it must be complete.
  index.trainer["seed"] = 7;
  EXPECT_FALSE(isWeightsOnly(index));
}

TEST(CheckpointState, ADifferentRunIsRefusedOrANoteWithAllowPartial) {
  json saved = state();
  saved["seed"] = 8;
  saved["rng"]["parameter_init_seed"] = 8;
  saved["rng"]["sampler_seed"] = 8;
  saved["sampler"]["global_batch"] = 16;
  EXPECT_NE(refusal(saved, false).find("saved with --seed 8, this run has 7; global batch (--batch) 16, this run "
                                       "has 8"),
            std::string::npos);
  std::vector<std::string> notes;
  EXPECT_EQ(refusal(saved, true, &notes), "");
  EXPECT_EQ(notes, (std::vector<std::string>{"--allow-partial: the checkpoint was saved with --seed 8, this run has 7",
                                             "--allow-partial: the checkpoint was saved with global batch (--batch) "
                                             "16, this run has 8"}));
}

TEST(CheckpointState, OtherDataIsRefusedOrANoteWithAllowPartial) {
  ResumePoint resume{.dir = "ck/step_00000004", .step = kStep, .trainer = state()};
  RunIdentity same = run();
  same.dataWhere = "'copy-of-a.txt'";  // the same bytes elsewhere: the same data
  EXPECT_NO_THROW(checkResumeData(resume, same, false));
  RunIdentity other = run();
  const std::string more = "!";
  other.data.add(more.data(), more.size());  // one more byte
  other.dataWhere = "'b.txt'";
  try {
    checkResumeData(resume, other, false);
    ADD_FAILURE() << "other data accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--resume 'ck/step_00000004': the checkpoint was saved with data 'a.txt' "
                                          "(17 bytes, fingerprint ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("this run has 'b.txt' (18 bytes, fingerprint "), std::string::npos);
  }
  checkResumeData(resume, other, true);
  ASSERT_EQ(resume.notes.size(), 1u);
  EXPECT_EQ(resume.notes[0].rfind("--allow-partial: the checkpoint was saved with data 'a.txt'", 0), 0u);
  ResumePoint weights{.dir = "ck", .step = 0, .trainer = {{"step", 0}}, .weightsOnly = true};
  EXPECT_NO_THROW(checkResumeData(weights, other, false));
}

}  // namespace
}  // namespace tessel::trainer
