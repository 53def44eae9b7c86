// The trainer's pipeline cost model (dsl/trainer/ExplainPipeline.h): a stage's costs from its
// program's action spans against FLOPs and bytes counted by hand, --explain's section against
// the closed forms, and the predicted track --trace gets against its placement rules.
#include "dsl/trainer/ExplainPipeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tessel::trainer {
namespace {

/// Stage 0 of p = 2, M = 2: F0 = a GEMM [4x8]·[8x16] and a kernel over a and c; F1 = the GEMM
/// alone; B0 and B1 = the kernel; one send of c between.
rt::Program twoStageProgram() {
  rt::Program p;
  auto buffer = [&](const std::string& name, std::vector<int64_t> shape, rt::BufferKind kind) {
    rt::Buffer b;
    b.name = name;
    b.shape = std::move(shape);
    b.kind = kind;
    p.buffers.push_back(b);
    return static_cast<int>(p.buffers.size() - 1);
  };
  const int a = buffer("x", {4, 8}, rt::BufferKind::Input);
  const int w = buffer("blocks.3.mlp.weight", {8, 16}, rt::BufferKind::Parameter);
  const int c = buffer("y", {4, 16}, rt::BufferKind::Input);
  buffer("wte.weight", {2, 16}, rt::BufferKind::Parameter);
  rt::GemmStep g;
  g.a = a, g.b = w, g.c = c, g.m = 4, g.n = 16, g.k = 8;
  rt::KernelStep k;
  k.symbol = "k0", k.args = {c, a};
  rt::CollectiveStep send;
  send.kind = rt::CollectiveStep::Kind::SendRecv;
  send.tensors = {c}, send.peers = {1}, send.sends = 1, send.axes = {"pp"}, send.group = 2;
  rt::Function f;
  f.name = "train_step";
  f.steps = {g, k, send, g, send, k, k};
  f.actions = {{"0F0", 0, 2}, {"0SEND_F0", 2, 3}, {"0F1", 3, 4}, {"0SEND_F1", 4, 5}, {"0B0", 5, 6}, {"0B1", 6, 7}};
  p.functions.push_back(f);
  p.pipeline = rt::PipelineInfo{"pp", 2, 0, 2, 1, "1f1b"};
  return p;
}

TEST(PipelineCostModel, StageCostsAreTheSpansFlopsAndBytesAtTheGivenRates) {
  PipelineCostFlags flags{.gemmGflops = 2, .memGbps = 3, .p2pGbps = 5, .p2pLatencyUs = 7};
  const StageModel m = stageModel(twoStageProgram(), flags);
  const double gemm = 2.0 * 4 * 16 * 8 / 2e9;          // 1024 FLOPs at 2 GFLOP/s
  const double kernel = (4 * 16 + 4 * 8) * 4 / 3e9;    // y and x, f32, at 3 GB/s
  // Relative 1e-12: the same few double operations in another order.
  ASSERT_EQ(m.costs.forward.size(), 2u);
  EXPECT_NEAR(m.costs.forward[0], (gemm + kernel + gemm) / 2, 1e-12 * gemm);
  EXPECT_NEAR(m.costs.backward[0], kernel, 1e-12 * kernel);
  EXPECT_NEAR(m.costs.inputGrad[0] + m.costs.weightGrad[0], kernel, 1e-12 * kernel);
  EXPECT_EQ(m.costs.forward[1], 0);  // chunk 1 is the other stage's
  EXPECT_NEAR(m.costs.p2pSeconds, 7e-6 + 4 * 16 * 4 / 5e9, 1e-15);
  EXPECT_EQ(m.layerRuns, (std::vector<std::pair<int64_t, int64_t>>{{3, 3}}));
  EXPECT_EQ(m.otherModules, "wte");
  EXPECT_EQ(m.parameters, 8 * 16 + 2 * 16);
}

TEST(PipelineCostModel, ProgramWithoutActionsIsRefused) {
  rt::Program p = twoStageProgram();
  p.functions[0].actions.clear();
  EXPECT_THROW(stageModel(p, {}), std::invalid_argument);
}

/// Two stages with uniform F = 1 ms, B = 2 ms and no p2p time.
std::vector<StageModel> uniformStages(int64_t p) {
  std::vector<StageModel> stages(p);
  for (int64_t s = 0; s < p; ++s) {
    stages[s].costs = rt::pipeline::uniformCosts(p, 0, 0, 0);
    stages[s].costs.forward[s] = 1e-3;
    stages[s].costs.backward[s] = 2e-3;
    stages[s].costs.inputGrad[s] = stages[s].costs.weightGrad[s] = 1e-3;
  }
  return stages;
}

TEST(PipelineCostModel, ExplainShowsTheStandardOneFOneBBesideItsClosedForm) {
  const std::string text = explainPipeline({"pp", 4, 0, 8, 1, "1f1b"}, uniformStages(4), {});
  // (p-1)/(m+p-1) = 3/11, printed to 4 digits.
  EXPECT_NE(text.find("predicted 0.2727, closed form (p-1)/(m+p-1) = 0.2727"), std::string::npos) << text;
  // The standard warmup p - s - 1 and peak min(p - s, M), from the closed forms.
  for (int s = 0; s < 4; ++s)
    EXPECT_NE(text.find("rank  " + std::to_string(s) + ": warmup " + std::to_string(3 - s) + " F"), std::string::npos)
        << text;
  EXPECT_NE(text.find("activations per stage: [4, 3, 2, 1]"), std::string::npos) << text;
}

TEST(PipelineCostModel, PredictedTrackStartsAtEachRanksFirstTrainStep) {
  const std::string path = (std::filesystem::temp_directory_path() / "tessel_predicted_track.json").string();
  auto fn = [](int pid, double ts) {
    return nlohmann::json{{"name", "train_step"}, {"cat", "function"}, {"ph", "X"}, {"pid", pid}, {"tid", 0},
                          {"ts", ts}, {"dur", 50.0}};
  };
  {
    std::ofstream out(path);
    out << nlohmann::json{{"traceEvents", {fn(0, 300), fn(0, 100), fn(1, 150), fn(2, 90), fn(3, 70)}},
                          {"otherData", nlohmann::json::object()}}.dump();
  }
  // World ranks 0..3 on a pp=2 x dp=2 mesh: stages 0, 0, 1, 1.
  addPredictedTrack(path, {"pp", 2, 0, 2, 1, "1f1b"}, uniformStages(2), {0, 0, 1, 1}, {});
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::remove(path.c_str());
  const double starts[] = {100, 150, 90, 70};
  const int64_t peaks[] = {2, 2, 1, 1};  // min(p - s, M)
  int steps = 0;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e.value("name", "") != "predicted step") continue;
    const int pid = e["pid"].get<int>();
    ++steps;
    EXPECT_EQ(e["tid"], 1);
    EXPECT_DOUBLE_EQ(e["ts"].get<double>(), starts[pid]);
    EXPECT_EQ(e["args"]["peak_live_activations"], peaks[pid]);
    EXPECT_NEAR(e["args"]["closed_form_bubble"].get<double>(), 1.0 / 3, 1e-12);  // (p-1)/(m+p-1)
  }
  EXPECT_EQ(steps, 4);
  // With uniform costs and no p2p time the simulated bubble is the closed form (within 1%).
  EXPECT_NEAR(doc["otherData"]["predicted"]["bubble_fraction"].get<double>(), 1.0 / 3, 0.01 / 3);
}

}  // namespace
}  // namespace tessel::trainer
