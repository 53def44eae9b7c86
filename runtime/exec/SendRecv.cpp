// Running send_recv steps and tracing action spans; see PipelineRuntime.h.
#include "runtime/exec/PipelineRuntime.h"

#include "runtime/exec/Executor.h"  // defines: collectiveName

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

namespace tessel::rt {

void checkPipelineStage(const Program& program, const MeshLayout& mesh, int worldRank) {
  if (!program.pipeline) return;
  const int at = mesh.coordinates(worldRank)[static_cast<size_t>(mesh.axisIndex(program.pipeline->axis))];
  if (at != program.pipeline->stage)
    throw std::runtime_error(fmt::format("world rank {} is at {} coordinate {} of the mesh {}, but its program was "
                                         "compiled for stage {}; every rank must run its own stage's program",
                                         worldRank, program.pipeline->axis, at, mesh.describe(),
                                         program.pipeline->stage));
}

void formPipelineGroups(const Program& program, DeviceMesh& mesh, Communicator* host) {
  const std::vector<MeshAxis>& axes = mesh.layout().axes();
  if (axes.size() > 16)
    throw std::runtime_error(fmt::format("the mesh {} has more than 16 axes", mesh.layout().describe()));
  // Bit b of the mask (b = sum of 2^i over the axes i in the set) marks a set of axes in use.
  const size_t subsets = size_t{1} << axes.size(), words = (subsets + 31) / 32;
  std::vector<int32_t> mine(words, 0);
  for (const Function& f : program.functions)
    for (const Step& step : f.steps)
      if (auto* c = std::get_if<CollectiveStep>(&step)) {
        size_t bits = 0;
        for (const std::string& a : c->axes) bits |= size_t{1} << mesh.layout().axisIndex(a);
        mine[bits / 32] |= static_cast<int32_t>(uint32_t{1} << (bits % 32));
      }
  const auto n = static_cast<size_t>(host ? host->worldSize() : 1);
  std::vector<int32_t> all = mine;
  if (host) {
    all.resize(words * n);
    host->allGather(mine.data(), all.data(), static_cast<int64_t>(all.size()), DType::I32, "pipeline groups")->wait();
  }
  for (size_t bits = 1; bits < subsets; ++bits) {
    bool used = false;
    for (size_t r = 0; r < n && !used; ++r)
      used = (static_cast<uint32_t>(all[r * words + bits / 32]) >> (bits % 32)) & 1u;
    if (!used) continue;
    std::vector<std::string> set;
    for (size_t i = 0; i < axes.size(); ++i)
      if (bits & (size_t{1} << i)) set.push_back(axes[i].name);
    mesh.group(set);
  }
}

std::string sendRecvTransferName(const CollectiveStep& c, size_t i, const std::string& function) {
  const bool send = static_cast<int64_t>(i) < c.sends;
  const std::string label = i < c.names.size() && !c.names[i].empty() ? c.names[i] : fmt::format("transfer {}", i);
  return fmt::format("{} ({} {} {}{}, send_recv of @{})", label, send ? "send to" : "receive from",
                     c.axes.empty() ? "?" : c.axes[0], c.peers.at(i), c.location.empty() ? "" : " at " + c.location,
                     function);
}

std::vector<P2pTransfer> sendRecvTransfers(const CollectiveStep& c, const Program& program,
                                           const std::vector<void*>& pointers, const std::string& function) {
  std::vector<P2pTransfer> transfers;
  transfers.reserve(c.tensors.size());
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const Buffer& b = program.buffers.at(static_cast<size_t>(c.tensors[i]));
    transfers.push_back(P2pTransfer{static_cast<int64_t>(i) < c.sends, pointers.at(i), b.numel(), b.dtype,
                                    static_cast<int>(c.peers.at(i)), sendRecvTransferName(c, i, function)});
  }
  return transfers;
}

int64_t runSendRecv(const CollectiveStep& c, const Program& program,
                    const std::vector<std::pair<void*, size_t>>& tensors, Communicator& group,
                    const std::string& function) {
  // Post every transfer first (Communicator::sendRecv): a rank that sends to its successor
  // and receives from it (1F1B's send_forward_recv_backward) would deadlock on
  // rendezvous-sized messages if it waited for its send before posting its receive, as would
  // its peer.
  std::vector<void*> pointers;
  int64_t sent = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    pointers.push_back(tensors[i].first);
    if (static_cast<int64_t>(i) < c.sends) sent += static_cast<int64_t>(tensors[i].second);
  }
  const std::vector<P2pTransfer> transfers = sendRecvTransfers(c, program, pointers, function);
  std::unique_ptr<Work> work = group.sendRecv(transfers, collectiveName(c, function));
  try {
    work->wait();
  } catch (const CommError& e) {
    // The communicator names what it issued (a transfer, or the group: NCCL); name the
    // step's labels if it did not.
    const std::string what = e.what(), step = collectiveName(c, function);
    if (what.find(step) != std::string::npos) throw;
    for (const P2pTransfer& t : transfers)
      if (what.find(t.name) != std::string::npos) throw;
    throw CommError(fmt::format("{}: {}", step, what));
  }
  return sent;
}

ActionTracer::ActionTracer(const std::vector<ActionSpan>& actions, TraceRecorder* trace)
    : actions_(actions), trace_(trace && trace->active() && !actions.empty() ? trace : nullptr) {}

void ActionTracer::beforeStep(size_t step) {
  if (!trace_ || next_ >= actions_.size()) return;
  if (static_cast<int64_t>(step) == actions_[next_].firstStep) start_ = std::chrono::steady_clock::now();
}

void ActionTracer::afterStep(size_t step) {
  if (!trace_ || next_ >= actions_.size()) return;
  const ActionSpan& a = actions_[next_];
  if (static_cast<int64_t>(step) + 1 != a.endStep) return;
  trace_->complete(a.name, "pipeline", start_, std::chrono::steady_clock::now(),
                   fmt::format("steps {} to {}", a.firstStep, a.endStep - 1));
  ++next_;
}

}  // namespace tessel::rt
