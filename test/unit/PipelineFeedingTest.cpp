// The training loop's data under a pipeline (runtime/train/Loop.h): a pipelined @train_step
// takes M_eff microbatches, microbatch m at inputs [m k, (m + 1) k) (k = @forward's inputs),
// then the hyper-parameters. A recording executor (no kernels) runs the loop with the text
// feeders for M_eff = 4 on rank 1 of 2 data-parallel ranks and checks, per step, which rows
// of the global batch reach which input (against microbatchRows and the sampler, which the
// promise of TextBatches.h defines them by), that @train_step runs once per step with the
// hyper-parameters at inputs M_eff k onwards, and that validation runs @forward once per
// microbatch. Also checkTrainingProgram's pipelined signature check.
// Also the loop resumed at a later step (Checkpointing.h): the same rows, learning rates and
// log as the uninterrupted run from there on.
#include "runtime/data/DistributedSampler.h"
#include "runtime/data/TextDataset.h"
#include "runtime/train/Loop.h"
#include "runtime/train/TextBatches.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <map>

namespace {

using namespace tessel::rt;
using tessel::trainer::TrainOptions;

constexpr int64_t kSeq = 4, kBatch = 16, kMicrobatches = 4;
constexpr int kRank = 1, kWorld = 2;
const std::vector<std::string> kHyper = {"lr", "step", "max_grad_norm"};

/// One setInput call: the bytes given, as i32 (tokens, targets) or one f32 (a hyper-parameter).
struct SetInput {
  std::string function;
  size_t index = 0;
  std::vector<int32_t> ints;
  float scalar = 0;
};

/// A program whose @forward takes tokens and targets [rows, T] (i32) and returns a scalar
/// loss, and whose @train_step takes `microbatches` copies of them, then kHyper, and returns
/// the loss and the gradient norm: the signature of a pipelined training program.
Program pipelinedProgram(int64_t microbatches, int64_t rows) {
  Program p;
  auto add = [&](std::string name, DType dtype, std::vector<int64_t> shape, BufferKind kind) {
    Buffer b;
    b.name = std::move(name);
    b.dtype = dtype;
    b.shape = std::move(shape);
    b.kind = kind;
    p.buffers.push_back(b);
    return static_cast<int>(p.buffers.size()) - 1;
  };
  Function forward{.name = "forward"};
  forward.inputs = {add("forward.tokens", DType::I32, {rows, kSeq}, BufferKind::Input),
                    add("forward.targets", DType::I32, {rows, kSeq}, BufferKind::Input)};
  forward.outputs = {add("%0", DType::F32, {}, BufferKind::Temp)};
  forward.outputNames = {"loss"};
  Function step{.name = "train_step"};
  for (int64_t m = 0; m < microbatches; ++m)
    for (const char* input : {"tokens", "targets"})
      step.inputs.push_back(add(fmt::format("train_step.{}.{}", input, m), DType::I32, {rows, kSeq}, BufferKind::Input));
  for (const std::string& h : kHyper) step.inputs.push_back(add("train_step." + h, DType::F32, {}, BufferKind::Input));
  step.outputs = {add("%1", DType::F32, {}, BufferKind::Temp), add("%2", DType::F32, {}, BufferKind::Temp)};
  step.outputNames = {"loss", "grad_norm"};
  p.functions = {forward, step};
  return p;
}

/// Records every setInput and run; its outputs are constants.
class RecordingExecutor : public ProgramExecutor {
 public:
  explicit RecordingExecutor(Program program) : program_(std::move(program)) {}
  const Program& program() const override { return program_; }
  void initParameters(uint64_t) override {}
  void setInput(const std::string& function, size_t index, const void* data, size_t bytes) override {
    const Function* f = program_.function(function);
    ASSERT_NE(f, nullptr) << function;
    ASSERT_LT(index, f->inputs.size()) << function;
    const Buffer& b = program_.buffers[static_cast<size_t>(f->inputs[index])];
    ASSERT_EQ(static_cast<int64_t>(bytes), b.bytes()) << function << " input " << index;
    SetInput call{function, index, {}, 0};
    if (b.dtype == DType::I32) {
      call.ints.resize(bytes / sizeof(int32_t));
      std::memcpy(call.ints.data(), data, bytes);
    } else {
      std::memcpy(&call.scalar, data, sizeof(float));
    }
    inputs.push_back(std::move(call));
  }
  void run(const std::string& function) override { runs.push_back(function); }
  std::vector<OutputView> outputs(const std::string& function) const override {
    const Function* f = program_.function(function);
    std::vector<OutputView> out;
    for (size_t i = 0; i < f->outputs.size(); ++i)
      out.push_back({f->outputNames[i], f->outputs[i], DType::F32, {}, i == 0 ? &loss_ : &norm_, 1});
    return out;
  }
  void readBuffer(int, void*) const override {}
  void writeBuffer(int, const void*) override {}
  int64_t arenaBytes() const override { return 0; }
  int64_t highWaterBytes() const override { return 0; }
  std::string deviceName() const override { return "recording"; }

  std::vector<SetInput> inputs;
  std::vector<std::string> runs;

 private:
  Program program_;
  float loss_ = 2.5f, norm_ = 0.5f;
};

/// A text whose window w (bytes [w T, w T + T]) starts with byte 32 + w, so that each row
/// fed names its window: 220 windows of T bytes (bytes 32 to 251; the last 10% held out).
std::string windowText() {
  std::string text;
  for (int64_t i = 0; i < 220 * kSeq; ++i) text.push_back(static_cast<char>(32 + i / kSeq));
  return text;
}

TEST(PipelineFeeding, EachMicrobatchGoesToItsInputsAndTheHyperParametersFollow) {
  const std::string path = ::testing::TempDir() + "/tessel_pipeline_feeding.txt";
  std::ofstream(path) << windowText();
  tessel::TextDataset data(path);
  const tessel::trainer::TextBatchOptions options{&data, kBatch, kSeq, kRank, kWorld, kMicrobatches, 11};
  const int64_t rows = kBatch / (kWorld * kMicrobatches);
  RecordingExecutor ex(pipelinedProgram(kMicrobatches, rows));
  TrainOptions o;
  o.steps = 3;
  o.lr = 0.25;
  o.schedule = "constant";
  o.gradClip = 1.5;
  o.evalBatches = 1;
  o.pipelineMicrobatches = kMicrobatches;
  std::vector<tessel::trainer::StepStats> stats =
      tessel::trainer::train(ex, o, tessel::trainer::textTrainFeeder(options), tessel::trainer::textValFeeder(options));
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_FLOAT_EQ(stats[0].loss, 2.5f);  // @train_step's loss as is: no mean over microsteps

  // @train_step once per step, then validation's @forward once per microbatch at the end.
  std::vector<std::string> runs(3, "train_step");
  runs.insert(runs.end(), kMicrobatches, "forward");
  EXPECT_EQ(ex.runs, runs);

  // The rows each microbatch of each step must get: the sampler's global batch of that step
  // (over all training windows, seeded as the feeder's), rows microbatchRows of this rank.
  tessel::DistributedSampler sampler(tessel::textWindowCount(data.trainSize(), kSeq), kBatch, 0, 1, 11);
  size_t next = 0;
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<int64_t> ids = sampler.globalBatch(step);
    for (int64_t m = 0; m < kMicrobatches; ++m) {
      const auto [first, last] = tessel::trainer::microbatchRows(kBatch, kRank, kWorld, m, kMicrobatches);
      ASSERT_EQ(last - first, rows);
      for (size_t which = 0; which < 2; ++which) {  // tokens, then targets
        ASSERT_LT(next, ex.inputs.size());
        const SetInput& call = ex.inputs[next++];
        EXPECT_EQ(call.function, "train_step");
        EXPECT_EQ(call.index, static_cast<size_t>(2 * m) + which) << "step " << step << " microbatch " << m;
        for (int64_t r = 0; r < rows; ++r) {
          const int32_t window = static_cast<int32_t>(ids[static_cast<size_t>(first + r)]);
          // Row r's first byte names its window; a target row is its token row shifted by one.
          EXPECT_EQ(call.ints[static_cast<size_t>(r * kSeq)], 32 + window)
              << "step " << step << " microbatch " << m << " row " << r;
          EXPECT_EQ(call.ints[static_cast<size_t>(r * kSeq + kSeq - 1)], 32 + window + static_cast<int32_t>(which))
              << "step " << step << " microbatch " << m << " row " << r;
        }
      }
    }
    // Then the hyper-parameters, at inputs M_eff x 2 onwards, in @train_step's order.
    const std::vector<float> values = {0.25f, static_cast<float>(step + 1), 1.5f};
    for (size_t h = 0; h < kHyper.size(); ++h) {
      ASSERT_LT(next, ex.inputs.size());
      const SetInput& call = ex.inputs[next++];
      EXPECT_EQ(call.function, "train_step");
      EXPECT_EQ(call.index, static_cast<size_t>(2 * kMicrobatches) + h) << kHyper[h];
      EXPECT_FLOAT_EQ(call.scalar, values[h]) << kHyper[h] << " at step " << step + 1;
    }
  }
  // Validation: global batch 0 of the held-out windows, this rank's rows of each microbatch,
  // into @forward's inputs 0 and 1.
  for (int64_t m = 0; m < kMicrobatches; ++m) {
    const auto [first, last] = tessel::trainer::microbatchRows(kBatch, kRank, kWorld, m, kMicrobatches);
    for (size_t which = 0; which < 2; ++which) {
      ASSERT_LT(next, ex.inputs.size());
      const SetInput& call = ex.inputs[next++];
      EXPECT_EQ(call.function, "forward");
      EXPECT_EQ(call.index, which);
      ASSERT_EQ(static_cast<int64_t>(call.ints.size()), (last - first) * kSeq);
    }
  }
  EXPECT_EQ(next, ex.inputs.size());
}

TEST(PipelineFeeding, HyperParameterNamesSkipEveryMicrobatchsInputs) {
  const Program p = pipelinedProgram(kMicrobatches, 2);
  EXPECT_EQ(tessel::trainer::hyperParameterNames(p, kMicrobatches), kHyper);
  // Read as one microbatch, the other microbatches' inputs would pass for hyper-parameters.
  EXPECT_EQ(tessel::trainer::hyperParameterNames(p).size(), kHyper.size() + 2 * (kMicrobatches - 1));
  EXPECT_THROW(tessel::trainer::hyperParameterNames(p, 8), std::runtime_error);  // 16 model inputs > 11
}

/// The message checkTrainingProgram throws, or "" when it accepts.
std::string refusal(const Program& p, int64_t microsteps, int64_t microbatches) {
  try {
    tessel::trainer::checkTrainingProgram(p, microsteps, microbatches);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineFeeding, ThePipelinedSignatureIsChecked) {
  const Program good = pipelinedProgram(kMicrobatches, 2);
  EXPECT_EQ(refusal(good, 1, kMicrobatches), "");
  EXPECT_EQ(refusal(good, 1, 2), "");  // 2 microbatches fit; inputs 4.. then fail as hyper-parameter names
  EXPECT_NE(refusal(good, 1, 6).find("@train_step has 11 inputs, but a pipeline of 6 microbatches needs 6 x"),
            std::string::npos)
      << refusal(good, 1, 6);
  EXPECT_NE(refusal(good, 2, kMicrobatches).find("2 microsteps (@accumulate_step) cannot be combined"),
            std::string::npos);
  // A microbatch input of another shape or dtype than @forward's.
  for (bool dtype : {false, true}) {
    Program bad = good;
    Buffer& b = bad.buffers[static_cast<size_t>(bad.function("train_step")->inputs[5])];
    if (dtype)
      b.dtype = DType::F32;
    else
      b.shape = {4, kSeq};
    EXPECT_NE(refusal(bad, 1, kMicrobatches).find("@train_step input 5 ('train_step.targets.2'"), std::string::npos)
        << refusal(bad, 1, kMicrobatches);
    EXPECT_NE(refusal(bad, 1, kMicrobatches).find("microbatch 2's copy of @forward input 1"), std::string::npos);
  }
}

TEST(PipelineFeeding, ValidationMustFeedTheSameMicrobatches) {
  const std::string path = ::testing::TempDir() + "/tessel_pipeline_feeding_val.txt";
  std::ofstream(path) << windowText();
  tessel::TextDataset data(path);
  RecordingExecutor ex(pipelinedProgram(kMicrobatches, kBatch / kMicrobatches));
  const tessel::trainer::TextBatchOptions train{&data, kBatch, kSeq, 0, 1, kMicrobatches, 11};
  tessel::trainer::TextBatchOptions val = train;
  val.microsteps = 1;
  TrainOptions o;
  o.steps = 1;
  o.pipelineMicrobatches = kMicrobatches;
  EXPECT_THROW(tessel::trainer::train(ex, o, tessel::trainer::textTrainFeeder(train),
                                      tessel::trainer::textValFeeder(val)),
               std::logic_error);
}


// Resuming (runtime/train/Checkpointing.h): the loop started at a later step with feeders
// started at that step must feed exactly what the uninterrupted loop fed from there on, rows
// (the sampler position is the step), learning rate (the schedule spans --steps whatever the
// first step) and the optimizer's step alike; --stop-after ends it early without validation.

/// The setInput calls of a pipelined loop on this file's program: steps firstStep..lastStep of
/// a run of `steps` (warmup 1, cosine, so that every step has its own learning rate), feeders
/// started at firstStep - 1, and the steps the after-step hook saw.
std::pair<std::vector<SetInput>, std::vector<int64_t>> resumedRun(const tessel::TextDataset& data, int64_t firstStep,
                                                                  int64_t lastStep, const std::string& log = "") {
  tessel::trainer::TextBatchOptions options{&data, kBatch, kSeq, kRank, kWorld, kMicrobatches, 11};
  options.firstStep = firstStep - 1;
  RecordingExecutor ex(pipelinedProgram(kMicrobatches, kBatch / (kWorld * kMicrobatches)));
  TrainOptions o;
  o.steps = 6;
  o.warmup = 1;
  o.evalBatches = 1;
  o.pipelineMicrobatches = kMicrobatches;
  o.firstStep = firstStep;
  o.lastStep = lastStep;
  o.logJson = log;
  std::vector<int64_t> hooked;
  o.afterStep = [&](int64_t step) { hooked.push_back(step); };
  tessel::trainer::train(ex, o, tessel::trainer::textTrainFeeder(options), tessel::trainer::textValFeeder(options));
  return {ex.inputs, hooked};
}

bool sameCall(const SetInput& a, const SetInput& b) {
  return a.function == b.function && a.index == b.index && a.ints == b.ints &&
         std::memcmp(&a.scalar, &b.scalar, sizeof(float)) == 0;
}

TEST(ResumedLoop, FeedsWhatTheUninterruptedLoopFedAfterItsStep) {
  const std::string path = ::testing::TempDir() + "/tessel_resumed_loop.txt";
  std::ofstream(path) << windowText();
  tessel::TextDataset data(path);
  const auto [full, fullSteps] = resumedRun(data, 1, -1);
  EXPECT_EQ(fullSteps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  const size_t perStep = 2 * kMicrobatches + kHyper.size();  // data, then the hyper-parameters
  const size_t validation = 2 * kMicrobatches;                // at the last step
  ASSERT_EQ(full.size(), 6 * perStep + validation);
  for (int64_t resumed : {1, 3, 5}) {
    const auto [tail, steps] = resumedRun(data, resumed + 1, -1);
    ASSERT_EQ(tail.size(), full.size() - static_cast<size_t>(resumed) * perStep) << "resumed at " << resumed;
    for (size_t i = 0; i < tail.size(); ++i)
      EXPECT_TRUE(sameCall(tail[i], full[static_cast<size_t>(resumed) * perStep + i]))
          << "resumed at step " << resumed << ": call " << i << " (" << tail[i].function << " input "
          << tail[i].index << ") differs from the uninterrupted run's";
    EXPECT_EQ(steps.front(), resumed + 1);
    EXPECT_EQ(steps.back(), 6);
  }
  // --stop-after 4 of a run resumed at 2: steps 3 and 4 as the uninterrupted run fed them, and
  // no validation (an interruption is not the end).
  const auto [stopped, stoppedSteps] = resumedRun(data, 3, 4);
  EXPECT_EQ(stoppedSteps, (std::vector<int64_t>{3, 4}));
  ASSERT_EQ(stopped.size(), 2 * perStep);
  for (size_t i = 0; i < stopped.size(); ++i) EXPECT_TRUE(sameCall(stopped[i], full[2 * perStep + i])) << i;
  // --stop-after equal to the resumed step: nothing runs.
  const auto [none, noSteps] = resumedRun(data, 5, 4);
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(noSteps.empty());
}

TEST(ResumedLoop, ALogIsContinuedNotReplaced) {
  const std::string text = ::testing::TempDir() + "/tessel_resumed_log.txt";
  std::ofstream(text) << windowText();
  tessel::TextDataset data(text);
  const std::string log = ::testing::TempDir() + "/tessel_resumed_log.jsonl";
  std::filesystem::remove(log);
  resumedRun(data, 1, 3, log);  // interrupted after step 3
  resumedRun(data, 4, -1, log);  // resumed
  std::ifstream in(log);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 6u);
  for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i]["step"], i + 1);
  // Each run's first record says what the run was; the resumed one after which step.
  EXPECT_TRUE(records[0].contains("run"));
  EXPECT_FALSE(records[0]["run"].contains("resumed_after_step"));
  EXPECT_EQ(records[3]["run"]["resumed_after_step"], 3);
  EXPECT_FALSE(records[1].contains("run"));
  EXPECT_TRUE(records[5].contains("val_loss"));  // the last step of --steps validates
  EXPECT_FALSE(records[2].contains("val_loss"));  // the interruption did not
}

}  // namespace
