// checkTrainingProgram against edits of a real lowered GPT training program: the loop reads
// output 0 of @train_step, @forward and @accumulate_step as the loss and output 1 of
// @train_step as the gradient norm, so each of these outputs is pointed in turn at every
// buffer that is not a scalar f32 the function computes (every parameter, optimizer state,
// input and non-scalar temporary), removed, or merged with the other; and @forward and
// @accumulate_step are removed. Every edit must be refused with a message naming the
// function and the output; the unedited program must pass. (An edited program.json that
// pointed the loss at a weight printed the weight's first element as the loss.)
#include "examples/gpt/model.h"
#include "runtime/train/Loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace tessel::rt;
using tessel::trainer::checkTrainingProgram;

/// A 1-layer GPT with 2 microsteps, so that it has @accumulate_step too.
const Program& lowered() {
  static const Program p = [] {
    gpt::GPT model({.layers = 1, .channels = 32, .heads = 2, .seq = 16});
    gpt::build(model, 4);
    return model.compile({.plan = tessel::Plan().grad_accumulation(2)}).lower();
  }();
  return p;
}

Function& function(Program& p, const std::string& name) {
  auto it = std::find_if(p.functions.begin(), p.functions.end(), [&](const Function& f) { return f.name == name; });
  if (it == p.functions.end()) throw std::logic_error("the test program has no @" + name);
  return *it;
}

/// The message checkTrainingProgram throws for `p`, or "" when it accepts it.
std::string refusal(const Program& p, int64_t microsteps = 2) {
  try {
    checkTrainingProgram(p, microsteps);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainingLoop, TheLoweredProgramPasses) {
  EXPECT_EQ(refusal(lowered()), "");
  EXPECT_EQ(refusal(lowered(), 1), "");
}

TEST(TrainingLoop, EveryLossOrNormOutputThatIsNotAComputedScalarIsRefused) {
  const Program& base = lowered();
  struct Read {
    std::string function;
    size_t index;
  };
  const std::vector<Read> reads = {{"train_step", 0}, {"train_step", 1}, {"forward", 0}, {"accumulate_step", 0}};
  int edits = 0;
  for (const Read& read : reads) {
    const std::string label = "@" + read.function + " output " + std::to_string(read.index);
    for (size_t b = 0; b < base.buffers.size(); ++b) {
      const Buffer& buf = base.buffers[b];
      if (buf.kind == BufferKind::Temp && buf.shape.empty() && buf.dtype == DType::F32) continue;
      Program p = base;
      function(p, read.function).outputs.at(read.index) = static_cast<int>(b);
      std::string message = refusal(p);
      EXPECT_NE(message.find(label), std::string::npos) << label << " -> " << buf.name << ": '" << message << "'";
      ++edits;
    }
    Program p = base;
    function(p, read.function).outputs.resize(read.index);
    function(p, read.function).outputNames.resize(read.index);
    EXPECT_NE(refusal(p).find(label), std::string::npos) << label << " removed: '" << refusal(p) << "'";
  }
  EXPECT_GT(edits, 100);  // every parameter, state and input, for each of the four outputs

  Program merged = base;
  function(merged, "train_step").outputs[1] = function(merged, "train_step").outputs[0];
  EXPECT_NE(refusal(merged).find("@train_step outputs 0 (the loss) and 1"), std::string::npos) << refusal(merged);
}

TEST(TrainingLoop, AMissingForwardOrAccumulateStepIsRefusedNamingIt) {
  for (const std::string name : {"forward", "accumulate_step", "train_step"}) {
    Program p = lowered();
    std::erase_if(p.functions, [&](const Function& f) { return f.name == name; });
    EXPECT_NE(refusal(p).find("no @" + name), std::string::npos) << name << ": '" << refusal(p) << "'";
  }
  // One microstep needs no @accumulate_step.
  Program p = lowered();
  std::erase_if(p.functions, [](const Function& f) { return f.name == "accumulate_step"; });
  EXPECT_EQ(refusal(p, 1), "");
}

}  // namespace
