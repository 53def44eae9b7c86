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
enum Id { Embed, Own, OwnState, Out, OutI, In, InI, Keep, Res };

/// Stage `stage` of a pp=2 pipeline (pp=2,dp=2 with `dp`): @train_step is a copy ("sF0"), ONE
/// send_recv step ("sSEND_F0") sending %out (f32 [big], `big` a multiple of 16) and %outi (i32
/// [3]) to the other stage and receiving %in and %ini from it, then a copy of %in to %res
/// ("sB0"); outputs %res and %ini.
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
               buffer("%res", {big}, rt::BufferKind::Temp, 2 * bytes + 192)};
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
  f.arenaBytes = 3 * bytes + 192;
  const std::string s = std::to_string(stage);
  f.actions = {{s + "F0", 0, 1}, {s + "SEND_F0", 1, 2}, {s + "B0", 2, 3}};
  p.functions = {f};
  return p;
}

}  // namespace tessel::test::pipeline
