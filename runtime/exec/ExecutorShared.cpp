// The helpers the executors share (declared in Executor.h): the names collective steps are
// issued under, their counters, reduce ops and communicators, and OutputView's element access.
#include "runtime/exec/Executor.h"

#include "runtime/numeric/BFloat16.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace tessel::rt {

std::string collectiveName(const CollectiveStep& c, const std::string& function) {
  if (c.kind == CollectiveStep::Kind::SendRecv)
    return fmt::format("send_recv [{}] of @{} over {}", fmt::join(c.names, ", "), function, fmt::join(c.axes, ","));
  if (c.movesShards())
    return fmt::format("{} along dim {} of @{} over {}", collectiveKindName(collectiveKindIndex(c)), c.dim, function,
                       fmt::join(c.axes, ","));
  // A synchronous all-reduce is named by its op's path, not by its number: the stages of a
  // pipeline number theirs differently, and the ranks of one all-reduce over the pipeline
  // axis must issue it under one name.
  if (c.synchronous)
    return !c.names.empty() && !c.names[0].empty()
               ? fmt::format("all_reduce '{}' of @{} over {}", c.names[0], function, fmt::join(c.axes, ","))
               : fmt::format("all_reduce of @{} over {}", function, fmt::join(c.axes, ","));
  return fmt::format("bucket {} of @{}", c.bucket, function);
}

void countCollective(CollectiveCounters& counters, const CollectiveStep& c, int64_t payloadBytes) {
  const auto kind = static_cast<size_t>(collectiveKindIndex(c));
  ++counters.collectives;
  counters.payloadBytes += payloadBytes;
  ++counters.kindCollectives[kind];
  counters.kindPayloadBytes[kind] += payloadBytes;
}

ReduceOp reduceOpOf(const std::string& reduce) {
  if (reduce == "avg") return ReduceOp::Avg;
  if (reduce == "max") return ReduceOp::Max;
  return ReduceOp::Sum;
}

Communicator& communicatorOf(const CollectiveStep& c, const std::string& name, DeviceMesh* mesh,
                             Communicator* world) {
  Communicator* comm = world;
  const char* verb = c.kind == CollectiveStep::Kind::SendRecv ? "exchanges over"
                     : c.movesShards()                           ? "runs over"
                                                                 : "all-reduces over";
  if (mesh) {
    comm = &mesh->group(c.axes);
  } else if (!comm) {
    throw std::runtime_error(fmt::format("{} {} {} ranks ({}), but no communicator was set", name, verb,
                                         c.group, fmt::join(c.axes, ",")));
  }
  if (comm->worldSize() != c.group)
    throw std::runtime_error(fmt::format("{} {} {} ranks ({}) but the {} has {}", name, verb, c.group,
                                         fmt::join(c.axes, ","), mesh ? "mesh group" : "communicator",
                                         comm->worldSize()));
  return *comm;
}

float OutputView::value(int64_t i) const {
  if (dtype == DType::I32) throw std::runtime_error(fmt::format("output '{}' is not a float tensor", name));
  if (i < 0 || i >= numel)
    throw std::out_of_range(fmt::format("output '{}': element {} of {}", name, i, numel));
  if (dtype == DType::BF16) return numeric::floatFromBF16(static_cast<const uint16_t*>(data)[i]);
  return static_cast<const float*>(data)[i];
}

}  // namespace tessel::rt
