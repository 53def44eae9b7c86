// The program format's pipeline parts (runtime/exec/Program.h: send_recv steps, action spans,
// the pipeline record; runtime/exec/PipelineRuntime.h): they survive save/load, older
// versions still load, every refusal of validateProgram names its field, a send_recv posts
// all of its transfers before waiting for any (the order a recording communicator sees), a
// transfer that fails names its label, and traces hold one "pipeline" event per action span
// enclosing its steps' events and one "p2p" event per send_recv.
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/PipelineRuntime.h"
#include "test/support/ShardedPrograms.h"
#include "test/unit/ProgramCheckTestUtil.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace {

using namespace tessel::rt;
namespace fs = std::filesystem;
using tessel::test::buffer;
using tessel::test::expectInvalid;
using K = CollectiveStep::Kind;

/// Buffer ids of stageProgram().
enum Id { Wt, Out, Keep, In, Res };

/// Stage `stage` of a pp=2 pipeline: a parameter, four temps [4] (64 bytes apart) and
/// @train_step = copy out -> keep ("0F0"), send_recv sending out and receiving in from the
/// other stage ("0SEND_F0"), copy in -> res ("0B0").
Program stageProgram(int64_t stage = 0) {
  Program p;
  p.mesh = {{"pp", 2}};
  p.pipeline = PipelineInfo{"pp", 2, stage, 4, 1, "1f1b"};
  p.buffers = {buffer("w", {2, 3}, BufferKind::Parameter), buffer("%out", {4}, BufferKind::Temp, 0),
               buffer("%keep", {4}, BufferKind::Temp, 64), buffer("%in", {4}, BufferKind::Temp, 128),
               buffer("%res", {4}, BufferKind::Temp, 192)};
  CollectiveStep sr;
  sr.kind = K::SendRecv;
  sr.buffer = -1;
  sr.tensors = {Out, In};
  sr.peers = {1 - stage, 1 - stage};
  sr.sends = 1;
  sr.names = {"SEND_F mb 0 chunk 0", "RECV_B mb 0 chunk 0"};
  sr.axes = {"pp"};
  sr.group = 2;
  sr.location = "model.h:3:1";
  Function f;
  f.name = "train_step";
  f.outputs = {Res};
  f.outputNames = {"res"};
  f.steps = {CopyStep{Out, Keep}, sr, CopyStep{In, Res}};
  f.arenaBytes = 256;
  f.actions = {{"0F0", 0, 1}, {"0SEND_F0", 1, 2}, {"0B0", 2, 3}};
  p.functions = {f};
  return p;
}

CollectiveStep& sendRecv(Program& p) { return std::get<CollectiveStep>(p.functions[0].steps[1]); }

TEST(PipelineProgram, SaveLoadRoundTripKeepsSendRecvActionsAndPipeline) {
  const std::string dir = (fs::path(testing::TempDir()) / "tessel_pipeline_roundtrip").string();
  fs::remove_all(dir);
  for (int64_t stage : {0, 1}) {
    const Program p = stageProgram(stage);
    saveProgram(p, dir);
    EXPECT_TRUE(loadProgram(dir) == p) << "stage " << stage;
  }
  // The documented keys and version (ProgramJson.cpp).
  nlohmann::json j = nlohmann::json::parse(std::ifstream(fs::path(dir) / "program.json"));
  EXPECT_EQ(j["version"], 7);
  EXPECT_EQ(j["pipeline"], (nlohmann::json{{"axis", "pp"}, {"stages", 2}, {"stage", 1}, {"microbatches", 4},
                                           {"virtual_stages", 1}, {"schedule", "1f1b"}}));
  EXPECT_EQ(j["functions"][0]["actions"], nlohmann::json::parse(R"([["0F0",0,1],["0SEND_F0",1,2],["0B0",2,3]])"));
  const nlohmann::json& step = j["functions"][0]["steps"][1];
  EXPECT_EQ(step["op"], "send_recv");
  EXPECT_EQ(step["peers"], nlohmann::json::parse("[0, 0]"));
  EXPECT_EQ(step["sends"], 1);
  EXPECT_FALSE(step.contains("buffer"));
}

TEST(PipelineProgram, ProgramsWithoutPipelineKeepTheirJsonAndOlderVersionsLoad) {
  const std::string dir = (fs::path(testing::TempDir()) / "tessel_pipeline_older").string();
  fs::remove_all(dir);
  Program p = stageProgram();
  p.pipeline.reset();
  p.functions[0].actions.clear();
  p.functions[0].steps.erase(p.functions[0].steps.begin() + 1);
  saveProgram(p, dir);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(fs::path(dir) / "program.json"));
  EXPECT_FALSE(j.contains("pipeline"));
  EXPECT_FALSE(j["functions"][0].contains("actions"));
  // Version 5 (before pipelines) is the same document: it still loads.
  j["version"] = 5;
  std::ofstream(fs::path(dir) / "program.json") << j.dump();
  EXPECT_TRUE(loadProgram(dir) == p);
  // ... but cannot carry a pipeline record.
  j["pipeline"] = {{"axis", "pp"}, {"stages", 2}, {"stage", 0}, {"microbatches", 1}, {"virtual_stages", 1},
                   {"schedule", "gpipe"}};
  std::ofstream(fs::path(dir) / "program.json") << j.dump();
  try {
    loadProgram(dir);
    ADD_FAILURE() << "a version 5 pipeline accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("predates pipeline parallelism"), std::string::npos) << e.what();
  }
  j.erase("pipeline");
  j["version"] = 9;
  std::ofstream(fs::path(dir) / "program.json") << j.dump();
  EXPECT_THROW(loadProgram(dir), std::runtime_error);
}

TEST(PipelineProgram, MalformedActionSpanInJsonIsNamed) {
  const std::string dir = (fs::path(testing::TempDir()) / "tessel_pipeline_badjson").string();
  fs::remove_all(dir);
  saveProgram(stageProgram(), dir);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(fs::path(dir) / "program.json"));
  j["functions"][0]["actions"][1] = nlohmann::json::parse(R"(["0SEND_F0", 1])");
  std::ofstream(fs::path(dir) / "program.json") << j.dump();
  try {
    loadProgram(dir);
    ADD_FAILURE() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("functions[0].actions[1]: expected [name, first step, end step]"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineProgram, ValidProgramsPass) {
  EXPECT_NO_THROW(validateProgram(stageProgram(0), "test"));
  EXPECT_NO_THROW(validateProgram(stageProgram(1), "test"));
}

TEST(PipelineProgramCheck, PeerOutsideTheAxisIsRefused) {
  Program p = stageProgram();
  sendRecv(p).peers[1] = 2;
  expectInvalid(p, "steps[1].peers[1]: peer 2 is not in [0, 2)");
  sendRecv(p).peers[1] = -1;
  expectInvalid(p, "steps[1].peers[1]: peer -1 is not in [0, 2)");
}

TEST(PipelineProgramCheck, PeerThatIsTheOwnStageIsRefused) {
  Program p = stageProgram(1);
  sendRecv(p).peers[0] = 1;
  expectInvalid(p, "steps[1].peers[0]: peer 1 is this program's own stage: a send to itself (function 'train_step')");
}

TEST(PipelineProgramCheck, MoreSendsThanTensorsIsRefused) {
  Program p = stageProgram();
  sendRecv(p).sends = 3;
  expectInvalid(p, "steps[1].sends: 3 sends is not in [0, 2]");
  sendRecv(p).sends = -1;
  expectInvalid(p, "steps[1].sends: -1 sends is not in [0, 2]");
}

TEST(PipelineProgramCheck, OnePeerPerTensor) {
  Program p = stageProgram();
  sendRecv(p).peers.pop_back();
  expectInvalid(p, "steps[1].peers: 1 peers for 2 tensors");
}

TEST(PipelineProgramCheck, OneNamePerTensor) {
  Program p = stageProgram();
  sendRecv(p).names.pop_back();
  expectInvalid(p, "steps[1].names: 1 names for 2 tensors");
}

TEST(PipelineProgramCheck, EmptySendRecvIsRefused) {
  Program p = stageProgram();
  sendRecv(p).tensors.clear();
  sendRecv(p).peers.clear();
  sendRecv(p).names.clear();
  expectInvalid(p, "steps[1].tensors: a send_recv with no transfer");
}

TEST(PipelineProgramCheck, PipelineAxisMustBeAMeshAxis) {
  Program p = stageProgram();
  p.pipeline->axis = "stage";
  expectInvalid(p, "pipeline.axis: 'stage' is not an axis of the mesh [pp]");
}

TEST(PipelineProgramCheck, SendRecvAxisMustBeInTheMesh) {
  Program p = stageProgram();
  p.pipeline.reset();
  sendRecv(p).axes = {"pq"};
  expectInvalid(p, "pq");
}

TEST(PipelineProgramCheck, SendRecvRunsAlongThePipelineAxisOnly) {
  Program p = stageProgram();
  p.mesh = {{"pp", 2}, {"dp", 2}};
  sendRecv(p).axes = {"dp"};
  expectInvalid(p, "steps[1].axes: a send_recv along 'dp', but the pipeline axis is 'pp'");
  sendRecv(p).axes = {"pp", "dp"};
  sendRecv(p).group = 4;
  expectInvalid(p, "steps[1].axes: a send_recv runs along exactly one axis, got [pp, dp]");
}

TEST(PipelineProgramCheck, StagesMustBeTheAxisSize) {
  Program p = stageProgram();
  p.pipeline->stages = 4;
  expectInvalid(p, "pipeline.stages: 4 stages, but the mesh axis 'pp' has size 2");
}

TEST(PipelineProgramCheck, StageMustLieOnTheAxis) {
  Program p = stageProgram();
  p.pipeline->stage = 2;
  expectInvalid(p, "pipeline.stage: stage 2 is not in [0, 2)");
}

TEST(PipelineProgramCheck, MicrobatchesAndVirtualStagesArePositive) {
  Program p = stageProgram();
  p.pipeline->microbatches = 0;
  expectInvalid(p, "pipeline.microbatches: 0 is not positive");
  p = stageProgram();
  p.pipeline->virtualStages = 0;
  expectInvalid(p, "pipeline.virtual_stages: 0 is not positive");
}

TEST(PipelineProgramCheck, ActionSpansOutOfOrderOrOverlappingAreRefused) {
  Program p = stageProgram();
  std::swap(p.functions[0].actions[0], p.functions[0].actions[1]);
  expectInvalid(p, "actions[1]: action '0F0' starts at step 0, before the previous action's end 2");
  p = stageProgram();
  p.functions[0].actions[1].firstStep = 0;
  expectInvalid(p, "actions[1]: action '0SEND_F0' starts at step 0, before the previous action's end 1");
}

TEST(PipelineProgramCheck, ActionSpansOutsideTheStepsAreRefused) {
  Program p = stageProgram();
  p.functions[0].actions[2].endStep = 4;
  expectInvalid(p, "actions[2]: action '0B0' spans steps [2, 4), not a non-empty range inside the 3 steps");
  p = stageProgram();
  p.functions[0].actions[2].endStep = 2;
  expectInvalid(p, "action '0B0' spans steps [2, 2)");
}

TEST(PipelineProgramCheck, TensorListedTwiceIsRefused) {
  Program p = stageProgram();
  sendRecv(p).tensors[1] = Out;
  expectInvalid(p, "steps[1].tensors[1]: buffer 1 '%out' is listed twice");
}

TEST(PipelineProgramCheck, ReceivedBufferSharingArenaBytesIsRefused) {
  Program p = stageProgram();
  p.buffers[In].offset = 0;  // %in over %out: the receive would overwrite what is sent
  expectInvalid(p, "steps[1].tensors[1]: the received buffer '%in' shares arena bytes with '%out'");
}

/// A two-rank communicator that records the order of posts and waits; transfers complete at
/// once (or fail with CommError when `fail` is set).
class RecordingComm final : public Communicator {
 public:
  std::vector<std::string> log;
  bool fail = false;
  int rank() const override { return 0; }
  int worldSize() const override { return 2; }
  std::unique_ptr<Work> send(const void*, int64_t count, DType, int peer, const std::string& name) override {
    log.push_back(fmt::format("post send {} to {}", count, peer));
    return std::make_unique<Done>(this, name);
  }
  std::unique_ptr<Work> recv(void* data, int64_t count, DType, int peer, const std::string& name) override {
    log.push_back(fmt::format("post recv {} from {}", count, peer));
    std::fill_n(static_cast<float*>(data), count, 7.0f);
    return std::make_unique<Done>(this, name);
  }
  std::unique_ptr<Work> allReduce(void*, int64_t, DType, ReduceOp, const std::string&) override { return none(); }
  std::unique_ptr<Work> allGather(const void*, void*, int64_t, DType, const std::string&) override { return none(); }
  std::unique_ptr<Work> reduceScatter(const void*, void*, int64_t, DType, ReduceOp, const std::string&) override {
    return none();
  }
  std::unique_ptr<Work> allToAll(const void*, void*, int64_t, DType, const std::string&) override { return none(); }
  std::unique_ptr<Work> broadcast(void*, int64_t, DType, int, const std::string&) override { return none(); }
  void setTimeout(double) override {}
  void setStep(int64_t) override {}
  CommStats stats() const override { return {}; }

 private:
  struct Done final : Work {
    Done(RecordingComm* c, std::string n) : comm(c), name(std::move(n)) {}
    RecordingComm* comm;
    std::string name;
    void wait() override {
      comm->log.push_back("wait");
      if (comm->fail) throw CommError(fmt::format("timeout after 1 s: {}", name));
    }
    bool test() override { return true; }
  };
  static std::unique_ptr<Work> none() { throw std::logic_error("RecordingComm: only send and recv"); }
};

/// stageProgram(0) without the mesh and the pipeline record: its send_recv then runs on the
/// executor's communicator.
Program meshless() {
  Program p = stageProgram();
  p.mesh.clear();
  p.pipeline.reset();
  return p;
}

TEST(PipelineExecutor, SendRecvPostsEveryTransferBeforeWaiting) {
  Executor ex(meshless(), [](const std::string&) { return nullptr; });
  RecordingComm comm;
  ex.setCommunicator(&comm);
  ex.run("train_step");
  EXPECT_EQ(comm.log, (std::vector<std::string>{"post send 4 to 1", "post recv 4 from 1", "wait", "wait"}));
  EXPECT_EQ(ex.outputs("train_step")[0].value(3), 7.0f);  // the received values reached %res
  // Payload: the bytes sent (one [4] f32), counted as one send_recv.
  EXPECT_EQ(ex.collectiveCounters().kindCollectives[4], 1);
  EXPECT_EQ(ex.collectiveCounters().kindPayloadBytes[4], 16);
  EXPECT_STREQ(collectiveKindName(4), "send_recv");
  EXPECT_EQ(collectiveBytes(ex.program(), "train_step").kindPayloadBytes[4], 16);
}

TEST(PipelineExecutor, FailedTransferNamesItsLabel) {
  Executor ex(meshless(), [](const std::string&) { return nullptr; });
  RecordingComm comm;
  comm.fail = true;
  ex.setCommunicator(&comm);
  try {
    ex.run("train_step");
    ADD_FAILURE() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("SEND_F mb 0 chunk 0 (send to pp 1 at model.h:3:1, send_recv of "
                                         "@train_step)"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineExecutor, TraceHasOneEnclosingEventPerActionSpan) {
  Executor ex(meshless(), [](const std::string&) { return nullptr; });
  RecordingComm comm;
  ex.setCommunicator(&comm);
  TraceRecorder trace;
  trace.alignClocks(nullptr);
  trace.setActive(true);
  ex.setTrace(&trace);
  ex.run("train_step");
  std::vector<const TraceEvent*> spans, steps;
  for (const TraceEvent& e : trace.events()) (e.category == "pipeline" ? spans : steps).push_back(&e);
  ASSERT_EQ(spans.size(), 3u);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(spans[0]->name, "0F0");
  EXPECT_EQ(spans[1]->name, "0SEND_F0");
  EXPECT_EQ(spans[2]->name, "0B0");
  EXPECT_EQ(steps[1]->category, "p2p");
  EXPECT_NE(steps[1]->name.find("send_recv [SEND_F mb 0 chunk 0, RECV_B mb 0 chunk 0]"), std::string::npos);
  for (size_t i = 0; i < 3; ++i) {  // span i encloses step i
    EXPECT_LE(spans[i]->startUs, steps[i]->startUs);
    EXPECT_GE(spans[i]->startUs + spans[i]->durationUs, steps[i]->startUs + steps[i]->durationUs);
  }
}

TEST(PipelineExecutor, RankOnAnotherStageIsRefused) {
  // checkPipelineStage: world rank 1 of pp=2 is stage 1, not stage 0's program.
  const MeshLayout mesh({{"pp", 2}});
  EXPECT_NO_THROW(checkPipelineStage(stageProgram(1), mesh, 1));
  try {
    checkPipelineStage(stageProgram(0), mesh, 1);
    ADD_FAILURE() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("world rank 1 is at pp coordinate 1 of the mesh pp=2, but its program was "
                                         "compiled for stage 0"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineExecutor, ExplainListsEachSendRecvWithItsBytesSent) {
  const std::string report = explainCollectives(stageProgram(0), "train_step");
  EXPECT_NE(report.find("send_recv over pp (2 ranks): send to pp 1 [SEND_F mb 0 chunk 0], recv from pp 1 "
                        "[RECV_B mb 0 chunk 0]; 16 bytes sent, step 1/3"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("send_recv 16 bytes"), std::string::npos) << report;
}

TEST(PipelineExecutor, ScheduleHashCoversPeersAndSends) {
  Program a = stageProgram(0), b = stageProgram(0);
  sendRecv(b).sends = 2;
  EXPECT_NE(collectiveScheduleHash(a), collectiveScheduleHash(b));
  b = stageProgram(0);
  sendRecv(b).peers = {1, 0};
  EXPECT_NE(collectiveScheduleHash(a), collectiveScheduleHash(b));
}

}  // namespace
