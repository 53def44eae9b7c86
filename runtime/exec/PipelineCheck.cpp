// checkProgramPipeline: the pipeline parts of validateProgram; see PipelineRuntime.h.
//
// Checks, each failing with "<context>: <field>: <problem>" (and " (function '<name>')"
// inside a function):
//  1. the pipeline record: its axis is an axis of the mesh, `stages` is that axis' size,
//     `stage` in [0, stages), microbatches and virtual stages >= 1, a schedule name.
//  2. every send_recv step: exactly one axis (the pipeline's axis when the program has a
//     pipeline record), at least one tensor, one peer per tensor, each peer in [0, group)
//     and, in a pipelined program, not the program's own stage (a rank does not send to
//     itself: every rank compiles its own stage, so its coordinate is the stage); 0 <= sends
//     <= tensors; one name per tensor (or none); distinct tensors, and no received tensor
//     sharing arena bytes with another tensor of the step (a receive would overwrite it).
//  3. every function's action spans: non-empty names, first < end <= steps, in order and
//     non-overlapping (each span starts at or after the previous one's end).
// The peers cannot be matched against the other stages' programs here (each program is one
// stage's); runtime/pipeline's event-level verifier proves the ranks' programs together.
#include "runtime/exec/PipelineRuntime.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace tessel::rt {
namespace {

class PipelineChecker {
 public:
  PipelineChecker(const Program& p, const std::string& context) : p_(p), context_(context) {}

  void run() {
    if (p_.pipeline) checkRecord(*p_.pipeline);
    for (size_t f = 0; f < p_.functions.size(); ++f) {
      const Function& fn = p_.functions[f];
      function_ = fn.name;
      const std::string field = fmt::format("functions[{}]", f);
      for (size_t s = 0; s < fn.steps.size(); ++s)
        if (auto* c = std::get_if<CollectiveStep>(&fn.steps[s]); c && c->kind == CollectiveStep::Kind::SendRecv)
          checkSendRecv(*c, fmt::format("{}.steps[{}]", field, s));
      checkActions(fn, field);
      function_.clear();
    }
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw std::runtime_error(fmt::format("{}: {}: {}{}", context_, field, problem,
                                         function_.empty() ? "" : fmt::format(" (function '{}')", function_)));
  }

  void checkRecord(const PipelineInfo& pl) const {
    auto axis = std::find_if(p_.mesh.begin(), p_.mesh.end(), [&](const MeshAxis& a) { return a.name == pl.axis; });
    if (axis == p_.mesh.end())
      fail("pipeline.axis", fmt::format("'{}' is not an axis of the mesh [{}]", pl.axis,
                                        fmt::join(meshNames(), ", ")));
    if (pl.stages != axis->size)
      fail("pipeline.stages", fmt::format("{} stages, but the mesh axis '{}' has size {}", pl.stages, pl.axis,
                                          axis->size));
    if (pl.stage < 0 || pl.stage >= pl.stages)
      fail("pipeline.stage", fmt::format("stage {} is not in [0, {})", pl.stage, pl.stages));
    if (pl.microbatches < 1) fail("pipeline.microbatches", fmt::format("{} is not positive", pl.microbatches));
    if (pl.virtualStages < 1)
      fail("pipeline.virtual_stages", fmt::format("{} is not positive", pl.virtualStages));
    if (pl.schedule.empty()) fail("pipeline.schedule", "empty schedule name");
  }

  std::vector<std::string> meshNames() const {
    std::vector<std::string> names;
    for (const MeshAxis& a : p_.mesh) names.push_back(a.name);
    return names;
  }

  void checkSendRecv(const CollectiveStep& c, const std::string& field) const {
    if (c.axes.size() != 1)
      fail(field + ".axes", fmt::format("a send_recv runs along exactly one axis, got [{}]", fmt::join(c.axes, ", ")));
    if (p_.pipeline && c.axes[0] != p_.pipeline->axis)
      fail(field + ".axes", fmt::format("a send_recv along '{}', but the pipeline axis is '{}'", c.axes[0],
                                        p_.pipeline->axis));
    if (c.tensors.empty()) fail(field + ".tensors", "a send_recv with no transfer");
    if (c.peers.size() != c.tensors.size())
      fail(field + ".peers", fmt::format("{} peers for {} tensors", c.peers.size(), c.tensors.size()));
    if (c.sends < 0 || c.sends > static_cast<int64_t>(c.tensors.size()))
      fail(field + ".sends", fmt::format("{} sends is not in [0, {}] (the tensors)", c.sends, c.tensors.size()));
    if (!c.names.empty() && c.names.size() != c.tensors.size())
      fail(field + ".names", fmt::format("{} names for {} tensors", c.names.size(), c.tensors.size()));
    for (size_t i = 0; i < c.peers.size(); ++i) {
      const std::string f = fmt::format("{}.peers[{}]", field, i);
      if (c.peers[i] < 0 || c.peers[i] >= c.group)
        fail(f, fmt::format("peer {} is not in [0, {}) (the ranks along '{}')", c.peers[i], c.group, c.axes[0]));
      if (p_.pipeline && c.peers[i] == p_.pipeline->stage)
        fail(f, fmt::format("peer {} is this program's own stage: a {} to itself", c.peers[i],
                            static_cast<int64_t>(i) < c.sends ? "send" : "receive"));
    }
    std::set<int> seen;
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const std::string f = fmt::format("{}.tensors[{}]", field, i);
      const int id = c.tensors[i];
      if (id < 0 || static_cast<size_t>(id) >= p_.buffers.size())
        fail(f, fmt::format("buffer id {} out of range [0, {})", id, p_.buffers.size()));
      if (!seen.insert(id).second) fail(f, fmt::format("buffer {} '{}' is listed twice", id, name(id)));
    }
    for (size_t i = static_cast<size_t>(c.sends); i < c.tensors.size(); ++i)
      for (size_t k = 0; k < c.tensors.size(); ++k)
        if (k != i && sharesBytes(c.tensors[i], c.tensors[k]))
          fail(fmt::format("{}.tensors[{}]", field, i),
               fmt::format("the received buffer '{}' shares arena bytes with '{}' of the same step", name(c.tensors[i]),
                           name(c.tensors[k])));
  }

  void checkActions(const Function& fn, const std::string& field) const {
    int64_t end = 0;
    for (size_t i = 0; i < fn.actions.size(); ++i) {
      const ActionSpan& a = fn.actions[i];
      const std::string f = fmt::format("{}.actions[{}]", field, i);
      if (a.name.empty()) fail(f, "an action span without a name");
      if (a.firstStep >= a.endStep || a.endStep > static_cast<int64_t>(fn.steps.size()))
        fail(f, fmt::format("action '{}' spans steps [{}, {}), not a non-empty range inside the {} steps", a.name,
                            a.firstStep, a.endStep, fn.steps.size()));
      if (a.firstStep < end)
        fail(f, fmt::format("action '{}' starts at step {}, before the previous action's end {} (spans are in "
                            "order and do not overlap)", a.name, a.firstStep, end));
      end = a.endStep;
    }
  }

  const std::string& name(int id) const { return p_.buffers[static_cast<size_t>(id)].name; }

  bool sharesBytes(int a, int b) const {
    const Buffer& x = p_.buffers[static_cast<size_t>(a)];
    const Buffer& y = p_.buffers[static_cast<size_t>(b)];
    if (x.kind != BufferKind::Temp || y.kind != BufferKind::Temp) return false;
    return x.offset < y.offset + y.bytes() && y.offset < x.offset + x.bytes();
  }

  const Program& p_;
  const std::string& context_;
  std::string function_;
};

}  // namespace

void checkProgramPipeline(const Program& program, const std::string& context) {
  PipelineChecker(program, context).run();
}

}  // namespace tessel::rt
