// Hand-written sharded programs shared by the unit and multi-rank tests of
// runtime/exec/Sharding.h: the same buffers and collective steps, so both test one layout.
#pragma once

#include "runtime/exec/Program.h"

#include <string>
#include <utility>
#include <vector>

namespace tessel::test {

/// A buffer of `kind`; a Parameter is initialised "normal" with `stddev`.
inline rt::Buffer buffer(const std::string& name, std::vector<int64_t> shape, rt::BufferKind kind,
                         int64_t offset = 0, double stddev = 0.02) {
  rt::Buffer b;
  b.name = name;
  b.shape = std::move(shape);
  b.kind = kind;
  b.offset = offset;
  if (kind == rt::BufferKind::Parameter) {
    b.init = "normal";
    b.stddev = stddev;
  }
  return b;
}

/// The persistent buffers of a dp=2,tp=2 program, ids 0 to 2: "w" [2, 3], rows 2 tp and 2 tp + 1
/// of a global [4, 3] (split over tp); "w:exp_avg", its optimizer state, laid out alike; "b"
/// [3], replicated over the whole mesh.
inline std::vector<rt::Buffer> meshParameters(double stddev) {
  rt::Buffer w = buffer("w", {2, 3}, rt::BufferKind::Parameter, 0, stddev);
  w.globalShape = {4, 3};
  w.sharding = {rt::ShardDim{{"tp"}, 1}, rt::ShardDim{}};
  rt::Buffer m = buffer("w:exp_avg", {2, 3}, rt::BufferKind::State);
  m.globalShape = w.globalShape;
  m.sharding = w.sharding;
  return {w, m, buffer("b", {3}, rt::BufferKind::Parameter, 0, stddev)};
}

/// One half of a synchronous all-reduce of `tensor` through the bucket buffer `bucket`.
inline rt::CollectiveStep synchronousAllReduce(rt::CollectiveStep::Kind kind, int number, int bucket, int tensor,
                                               const std::string& reduce, std::vector<std::string> axes,
                                               int64_t group) {
  rt::CollectiveStep c;
  c.kind = kind;
  c.bucket = number;
  c.buffer = bucket;
  c.tensors = {tensor};
  c.reduce = reduce;
  c.axes = std::move(axes);
  c.group = group;
  c.synchronous = true;
  return c;
}

/// A one-step all_gather / reduce_scatter / all_to_all (Program.h) of buffer `input` into
/// `output` through the staging temp `staging`, along `dim` (and `concatDim` for all_to_all).
inline rt::CollectiveStep shardMove(rt::CollectiveStep::Kind kind, int input, int output, int staging, int64_t dim,
                                    std::vector<std::string> axes, int64_t group, int64_t concatDim = 0,
                                    const std::string& reduce = "sum") {
  rt::CollectiveStep c;
  c.kind = kind;
  c.buffer = staging;
  c.tensors = {input, output};
  c.dim = dim;
  c.concatDim = concatDim;
  c.reduce = reduce;
  c.axes = std::move(axes);
  c.group = group;
  c.synchronous = true;
  return c;
}

}  // namespace tessel::test
