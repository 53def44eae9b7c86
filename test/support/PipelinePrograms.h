// The hand-written two-stage pipeline programs of the multi-rank tests (test/mpi
// PipelineMpiTest.cpp on the CPU executor, test/standin/nccl PipelineCudaTest.cpp on the GPU
// executor over the stand-in NCCL): the same buffers and steps, so both test one exchange.
#pragma once

#include "runtime/exec/Program.h"
#include "test/support/ShardedPrograms.h"

#include <string>
#include <vector>

namespace tessel::test::pipeline {

/// Buffer ids of stageProgram: 0 embed.weight [4, 3] (tied: on both stages), 1 the stage's own parameter
/// ("s0.w" rows of [4, 3] split over dp where there is a dp axis; "s1.b" [5]), 2 its state,
/// then the temps.
enum Id { Embed, Own, OwnState, Out, OutI, In, InI, Keep, Res, G, GBucket };

/// Stage `stage` of a pp=2 pipeline (pp=2,dp=2 with `dp`): @train_step is a copy ("sF0"), ONE
/// send_recv step ("sSEND_F0") sending %out (f32 [big], `big` a multiple of 16) and %outi (i32
/// [3]) to the other stage and receiving %in and %ini from it, then a copy of %in to %res
/// ("sB0"); outputs %res and %ini. With `dp`, %g [4] is all-reduced (sum, synchronous) over
/// dp: at the end on stage 0, at the start on stage 1, so the stages' collectives name pp and
/// dp in opposite orders (the groups must still be formed in one order); then %g is output 2.
inline rt::Program stageProgram(int stage, bool dp, int64_t big) {
  rt::Program p;
  p.mesh = dp ? std::vector<rt::MeshAxis>{{"pp", 2}, {"dp", 2}} : std::vector<rt::MeshAxis>{{"pp", 2}};
  p.pipeline = rt::PipelineInfo{"pp", 2, stage, 1, 1, "gpipe"};
  rt::Buffer own = stage == 0 ? buffer("s0.w", {dp ? 2 : 4, 3}, rt::BufferKind::Parameter, 0, 1.0)
                              : buffer("s1.b", {5}, rt::BufferKind::Parameter, 0, 1.0);
  if (stage == 0 && dp) {
    own.globalShape = {4, 3};
    own.sharding = {rt::ShardDim{{"dp"}, 1}, rt::ShardDim{}};
  }
  rt::Buffer state = buffer(own.name + ":exp_avg", own.shape, rt::BufferKind::State);
  state.globalShape = own.globalShape;
  state.sharding = own.sharding;
  const int64_t bytes = big * 4;  // a multiple of 64 when big is a multiple of 16
  p.buffers = {buffer("embed.weight", {4, 3}, rt::BufferKind::Parameter, 0, 1.0),
               own,
               state,
               buffer("%out", {big}, rt::BufferKind::Temp, 0),
               buffer("%outi", {3}, rt::BufferKind::Temp, bytes),
               buffer("%in", {big}, rt::BufferKind::Temp, bytes + 64),
               buffer("%ini", {3}, rt::BufferKind::Temp, 2 * bytes + 64),
               buffer("%keep", {3}, rt::BufferKind::Temp, 2 * bytes + 128),
               buffer("%res", {big}, rt::BufferKind::Temp, 2 * bytes + 192),
               buffer("%g", {4}, rt::BufferKind::Temp, 3 * bytes + 192),
               buffer("%gbucket", {4}, rt::BufferKind::Temp, 3 * bytes + 256)};
  p.buffers[OutI].dtype = p.buffers[InI].dtype = p.buffers[Keep].dtype = rt::DType::I32;
  rt::CollectiveStep sr;
  sr.kind = rt::CollectiveStep::Kind::SendRecv;
  sr.tensors = {Out, OutI, In, InI};
  sr.peers = std::vector<int64_t>(4, 1 - stage);
  sr.sends = 2;
  sr.names = {"SEND big", "SEND small", "RECV big", "RECV small"};
  sr.axes = {"pp"};
  sr.group = 2;
  rt::Function f;
  f.name = "train_step";
  f.outputs = {Res, InI};
  f.outputNames = {"res", "ini"};
  f.steps = {rt::CopyStep{OutI, Keep}, sr, rt::CopyStep{In, Res}};
  f.arenaBytes = 3 * bytes + 320;
  const std::string s = std::to_string(stage);
  f.actions = {{s + "F0", 0, 1}, {s + "SEND_F0", 1, 2}, {s + "B0", 2, 3}};
  if (dp) {
    using K = rt::CollectiveStep::Kind;
    const std::vector<rt::Step> reduce = {synchronousAllReduce(K::AllReduceStart, 0, GBucket, G, "sum", {"dp"}, 2),
                                          synchronousAllReduce(K::AllReduceWait, 0, GBucket, G, "sum", {"dp"}, 2)};
    f.steps.insert(stage == 0 ? f.steps.end() : f.steps.begin(), reduce.begin(), reduce.end());
    if (stage == 1)
      for (rt::ActionSpan& a : f.actions) a.firstStep += 2, a.endStep += 2;
    f.outputs.push_back(G);
    f.outputNames.push_back("g");
  }
  p.functions = {f};
  return p;
}

}  // namespace tessel::test::pipeline
