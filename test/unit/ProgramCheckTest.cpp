// validateProgram against hostile edits of a real lowered program: a GPT training program
// with data-parallel buckets (dp = 2, small buckets, so there are several) is mutated one
// field at a time in every way that could make the executor read or write outside a buffer
// or run the wrong thing: each temp pushed past the arena or onto another live temp, each
// operand id out of range or swapped for a buffer of the wrong size, kind or type, each GEMM
// dimension and stride enlarged, each kernel given one argument too few or too many, each
// collective given a bad bucket number, buffer or tensor list, each in-place bucket's views
// moved, retyped or no longer in place, each function's arena shrunk.
// Every mutation must be refused with a message naming the field (and, inside a function,
// the function); the unmutated program must pass.
#include "examples/gpt/model.h"
#include "runtime/exec/Program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace tessel::rt;

/// The program every mutation starts from: 1-layer GPT, train_step with dp = 2 buckets.
const Program& lowered() {
  static const Program p = [] {
    gpt::GPT model({.layers = 1, .channels = 32, .heads = 2, .seq = 16});
    gpt::build(model, 4);
    tessel::Plan plan = tessel::Plan(tessel::Mesh{{"dp", 2}}).shard_batch("dp").bucket_mb(0.01).overlap(true);
    return model.compile({.plan = plan}).lower();
  }();
  return p;
}

struct Mutation {
  std::string what;
  std::function<void(Program&)> apply;
  std::string function;  // the function the message must name ("" for a buffer-table error)
};

/// The ids a step names, by reference, with a label for the test's trace.
std::vector<std::pair<int*, std::string>> operands(Step& step) {
  std::vector<std::pair<int*, std::string>> out;
  if (auto* k = std::get_if<KernelStep>(&step)) {
    for (size_t i = 0; i < k->args.size(); ++i) out.emplace_back(&k->args[i], "args[" + std::to_string(i) + "]");
  } else if (auto* g = std::get_if<GemmStep>(&step)) {
    out = {{&g->a, "a"}, {&g->b, "b"}, {&g->c, "c"}};
  } else if (auto* c = std::get_if<CopyStep>(&step)) {
    out = {{&c->src, "src"}, {&c->dst, "dst"}};
  } else {
    auto& col = std::get<CollectiveStep>(step);
    out.emplace_back(&col.buffer, "buffer");
    for (size_t i = 0; i < col.tensors.size(); ++i)
      out.emplace_back(&col.tensors[i], "tensors[" + std::to_string(i) + "]");
  }
  return out;
}

/// The smallest f32 buffer with fewer elements than `than`, or -1.
int smallerBuffer(const Program& p, int64_t than) {
  int best = -1;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].dtype == DType::F32 && p.buffers[i].numel() < than &&
        (best < 0 || p.buffers[i].numel() < p.buffers[static_cast<size_t>(best)].numel()))
      best = static_cast<int>(i);
  return best;
}

std::vector<Mutation> mutations(const Program& base) {
  std::vector<Mutation> out;
  const int64_t arena = base.arenaBytes();
  const int count = static_cast<int>(base.buffers.size());
  // Buffers: every temp past the arena (wholly, and by its last 64 bytes).
  for (size_t b = 0; b < base.buffers.size(); ++b) {
    if (base.buffers[b].kind != BufferKind::Temp) continue;
    out.push_back({"temp " + base.buffers[b].name + " at the arena's end",
                   [b, arena](Program& p) { p.buffers[b].offset = arena; }, ""});
    int64_t partly = (arena - base.buffers[b].bytes() + 64 + 63) / 64 * 64;
    out.push_back({"temp " + base.buffers[b].name + " partly past the arena",
                   [b, partly](Program& p) { p.buffers[b].offset = partly; }, ""});
  }
  // Duplicate names.
  for (size_t b = 1; b < base.buffers.size(); b += 7)
    out.push_back({"buffer " + std::to_string(b) + " renamed to its predecessor",
                   [b](Program& p) { p.buffers[b].name = p.buffers[b - 1].name; }, ""});
  for (size_t f = 0; f < base.functions.size(); ++f) {
    const Function& fn = base.functions[f];
    const std::string name = fn.name;
    if (fn.arenaBytes > 0)
      out.push_back({name + " arena shrunk", [f](Program& p) { p.functions[f].arenaBytes /= 2; }, name});
    out.push_back({name + " negative batch shards", [f](Program& p) { p.functions[f].batchShards = -1; }, name});
    for (size_t i = 0; i < fn.inputs.size(); ++i)
      out.push_back({name + " input out of range", [f, i, count](Program& p) { p.functions[f].inputs[i] = count; }, name});
    for (size_t i = 0; i < fn.outputs.size(); ++i)
      out.push_back({name + " output out of range", [f, i](Program& p) { p.functions[f].outputs[i] = -1; }, name});
    for (size_t s = 0; s < fn.steps.size(); ++s) {
      const std::string at = name + " step " + std::to_string(s) + " ";
      Step copy = fn.steps[s];
      // Every operand out of range (both ends), and swapped for a smaller buffer.
      auto ops = operands(copy);
      for (size_t o = 0; o < ops.size(); ++o) {
        out.push_back({at + ops[o].second + " = count", [f, s, o, count](Program& p) {
                         *operands(p.functions[f].steps[s])[o].first = count;
                       }, name});
        out.push_back({at + ops[o].second + " = -1", [f, s, o](Program& p) {
                         *operands(p.functions[f].steps[s])[o].first = -1;
                       }, name});
        int64_t numel = base.buffers[static_cast<size_t>(*ops[o].first)].numel();
        if (int smaller = smallerBuffer(base, numel); smaller >= 0)
          out.push_back({at + ops[o].second + " -> a smaller buffer", [f, s, o, smaller](Program& p) {
                           *operands(p.functions[f].steps[s])[o].first = smaller;
                         }, name});
      }
      // Two distinct temps of one step placed on the same bytes: both are live at the step.
      std::vector<int> temps;
      for (auto& [id, label] : ops)
        if (base.buffers[static_cast<size_t>(*id)].kind == BufferKind::Temp &&
            std::find(temps.begin(), temps.end(), *id) == temps.end())
          temps.push_back(*id);
      // (An in-place bucket's first view already shares its offset: take the next temp.)
      for (size_t t = 1; t < temps.size(); ++t) {
        size_t x = static_cast<size_t>(temps[0]), y = static_cast<size_t>(temps[t]);
        if (base.buffers[x].offset == base.buffers[y].offset) continue;
        out.push_back({at + "two live temps on the same bytes",
                       [x, y](Program& p) { p.buffers[x].offset = p.buffers[y].offset; }, name});
        break;
      }
      if (auto* g = std::get_if<GemmStep>(&copy)) {
        for (auto field : {&GemmStep::m, &GemmStep::n, &GemmStep::k, &GemmStep::batch}) {
          out.push_back({at + "gemm dim + 1", [f, s, field](Program& p) {
                           std::get<GemmStep>(p.functions[f].steps[s]).*field += 1;
                         }, name});
          out.push_back({at + "gemm dim x 1000", [f, s, field](Program& p) {
                           std::get<GemmStep>(p.functions[f].steps[s]).*field *= 1000;
                         }, name});
        }
        if (g->batch > 1)
          for (auto field : {&GemmStep::strideA, &GemmStep::strideB, &GemmStep::strideC})
            if (g->*field > 0)
              out.push_back({at + "gemm stride x 2", [f, s, field](Program& p) {
                               std::get<GemmStep>(p.functions[f].steps[s]).*field *= 2;
                             }, name});
      } else if (std::holds_alternative<KernelStep>(copy)) {
        out.push_back({at + "one argument too few", [f, s](Program& p) {
                         std::get<KernelStep>(p.functions[f].steps[s]).args.pop_back();
                       }, name});
        out.push_back({at + "one argument too many", [f, s](Program& p) {
                         auto& k = std::get<KernelStep>(p.functions[f].steps[s]);
                         k.args.push_back(k.args.back());
                       }, name});
      } else if (auto* c = std::get_if<CopyStep>(&copy)) {
        // A copy's length is its buffers' size: a longer source is a longer copy.
        int64_t numel = base.buffers[static_cast<size_t>(c->src)].numel();
        for (size_t b = 0; b < base.buffers.size(); ++b)
          if (base.buffers[b].numel() > numel && base.buffers[b].kind == BufferKind::Parameter) {
            out.push_back({at + "copy from a longer buffer", [f, s, b](Program& p) {
                             std::get<CopyStep>(p.functions[f].steps[s]).src = static_cast<int>(b);
                           }, name});
            break;
          }
      } else if (auto* col = std::get_if<CollectiveStep>(&copy)) {
        out.push_back({at + "bucket number -1", [f, s](Program& p) {
                         std::get<CollectiveStep>(p.functions[f].steps[s]).bucket = -1;
                       }, name});
        out.push_back({at + "bucket number past the count", [f, s](Program& p) {
                         auto& c = std::get<CollectiveStep>(p.functions[f].steps[s]);
                         c.bucket = 1 << 30;
                       }, name});
        if (col->tensors.size() > 1)
          out.push_back({at + "one tensor fewer", [f, s](Program& p) {
                           std::get<CollectiveStep>(p.functions[f].steps[s]).tensors.pop_back();
                         }, name});
        if (col->inPlace) {
          // Views: one moved off its place (by one alignment step), one of the wrong dtype,
          // the flag dropped (the views then overlap the bucket), the bucket moved off them.
          const auto last = static_cast<size_t>(col->tensors.back());
          out.push_back({at + "in-place view moved", [last](Program& p) { p.buffers[last].offset += 64; }, name});
          out.push_back({at + "in-place view bf16", [last](Program& p) { p.buffers[last].dtype = DType::BF16; }, name});
          out.push_back({at + "in-place flag dropped", [f, s](Program& p) {
                           std::get<CollectiveStep>(p.functions[f].steps[s]).inPlace = false;
                         }, name});
          const auto bucket = static_cast<size_t>(col->buffer);
          out.push_back({at + "in-place bucket moved", [bucket](Program& p) { p.buffers[bucket].offset += 64; }, name});
        }
        out.push_back({at + "step removed", [f, s](Program& p) {
                         p.functions[f].steps.erase(p.functions[f].steps.begin() + static_cast<long>(s));
                       }, name});
      }
    }
  }
  return out;
}

TEST(ProgramCheck, TheLoweredProgramPasses) {
  const Program& p = lowered();
  ASSERT_NE(p.function("train_step"), nullptr);
  int buckets = 0;
  for (const Step& s : p.function("train_step")->steps)
    if (auto* c = std::get_if<CollectiveStep>(&s); c && c->kind == CollectiveStep::Kind::AllReduceStart) ++buckets;
  EXPECT_GE(buckets, 2) << "the mutations should see several buckets";
  for (const Step& s : p.function("train_step")->steps)
    if (auto* c = std::get_if<CollectiveStep>(&s); c && !c->movesShards() && !c->synchronous) {
      EXPECT_TRUE(c->inPlace) << "bucket " << c->bucket << ": the mutations should see in-place buckets";
    }
  EXPECT_NO_THROW(validateProgram(p, "program.json"));
}

TEST(ProgramCheck, EveryMutationIsRefusedNamingTheFieldAndFunction) {
  const Program& base = lowered();
  std::vector<Mutation> all = mutations(base);
  ASSERT_GT(all.size(), 500u) << "too few mutations to cover the program";
  int refused = 0;
  for (const Mutation& m : all) {
    SCOPED_TRACE(m.what);
    Program p = base;
    m.apply(p);
    try {
      validateProgram(p, "edited/program.json");
      ADD_FAILURE() << "accepted: " << m.what;
    } catch (const std::runtime_error& e) {
      std::string what = e.what();
      ++refused;
      EXPECT_EQ(what.rfind("edited/program.json: ", 0), 0u) << what;
      EXPECT_TRUE(what.find(": buffers[") != std::string::npos || what.find(": functions[") != std::string::npos)
          << "no field named: " << what;
      if (!m.function.empty() && what.find(": buffers[") == std::string::npos) {
        EXPECT_NE(what.find("(function '" + m.function + "')"), std::string::npos) << what;
      }
      EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
    }
  }
  EXPECT_EQ(refused, static_cast<int>(all.size()));
}

}  // namespace
