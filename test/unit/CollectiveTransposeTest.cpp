// Gradient check of the collectives' transpose table (compiler/VJP.cpp) on simulated groups.
//
// A collective is a linear map A over the tensors of a group's N ranks, so its VJP must be
// its transpose: <A x, y> = <x, A^T y> for every x and y. For each collective and
// N = 2, 3, 4 the test
//   1. writes the op in IR on a grid whose group has N ranks (a second grid axis outside
//      the group, or the group spanning two axes, so the group size is derived, not given),
//   2. calls buildVJP and takes the op(s) it creates: A^T as the compiler builds it,
//   3. runs A and A^T on random per-rank tensors with the small reference of each
//      collective's semantics below (written from the ops' descriptions, independent of
//      VJP.cpp, and itself checked against closed forms),
//   4. compares both sides of the identity.
// The inner products: a value held by every rank (replicated: all_reduce's result,
// replicate's input) is one tensor and counts once; any other value is one tensor per rank
// (split or partial) and its product sums over the ranks.
//
// Tolerance: both sides are sums of at most a few hundred products of N(0, 1) values in
// f64, equal in exact arithmetic, so they differ by rounding only: a relative error of
// ~1e-15 per term. kTol = 1e-12 (relative to the sum of |products|) is far above that and
// far below any real error (a missing or extra factor, or a wrong block, changes the result
// by O(1)). Measured: at most 4e-16 over 5 random seeds.
#include "test/unit/GradCheckUtil.h"

#include "compiler/Interpreter.h"
#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using gradcheck::Rng;
using gradcheck::Shape;
namespace ref = tessel::ref;

constexpr double kTol = 1e-12;  // see the file header

/// One tensor per rank of the group, in group order.
using Stack = std::vector<ref::Tensor>;

// ---- The reference semantics of the collectives (TesselGatherScatterOps.td) ----

ref::Tensor sumOver(const Stack& x) {
  ref::Tensor s = x[0];
  for (size_t r = 1; r < x.size(); ++r) s = ref::add(s, x[r]);
  return s;
}

/// Every rank receives the concatenation of all the ranks' tensors along `axis`.
Stack allGather(const Stack& x, int64_t axis) { return Stack(x.size(), ref::concat(x, axis)); }

/// Rank r keeps block r (along `axis`) of the sum (or average) over the ranks.
Stack reduceScatter(const Stack& x, int64_t axis, bool average) {
  ref::Tensor s = sumOver(x);
  if (average) s = ref::scale(s, 1.0 / static_cast<double>(x.size()));
  return ref::split(s, axis, static_cast<int64_t>(x.size()));
}

/// Rank r receives block r (along `split`) of every rank's tensor, concatenated along
/// `concat` in group order.
Stack allToAll(const Stack& x, int64_t split, int64_t concat) {
  int64_t n = static_cast<int64_t>(x.size());
  Stack y;
  for (int64_t r = 0; r < n; ++r) {
    Stack blocks;
    for (const ref::Tensor& t : x) blocks.push_back(ref::split(t, split, n)[r]);
    y.push_back(ref::concat(blocks, concat));
  }
  return y;
}

/// Every rank receives the sum (or average) over the ranks.
Stack allReduce(const Stack& x, bool average) {
  ref::Tensor s = sumOver(x);
  if (average) s = ref::scale(s, 1.0 / static_cast<double>(x.size()));
  return Stack(x.size(), s);
}

/// Runs `op` on every rank: the collectives above, and the per-rank ops a VJP may build.
Stack simulate(mlir::Operation* op, const std::vector<const Stack*>& in) {
  using namespace tessel;
  auto perRank = [&](auto f) {
    Stack y;
    for (size_t r = 0; r < in[0]->size(); ++r) y.push_back(f(r));
    return y;
  };
  return llvm::TypeSwitch<mlir::Operation*, Stack>(op)
      .Case([&](AllGatherOp o) { return allGather(*in[0], o.getGatherAxis()); })
      .Case([&](ReduceScatterOp o) {
        return reduceScatter(*in[0], o.getScatterAxis(), o.getReduce() == ReduceKind::avg);
      })
      .Case([&](AllToAllOp o) { return allToAll(*in[0], o.getSplitAxis(), o.getConcatAxis()); })
      .Case([&](AllReduceOp o) {
        EXPECT_NE(o.getReduce(), ReduceKind::max);
        return allReduce(*in[0], o.getReduce() == ReduceKind::avg);
      })
      .Case([&](ReplicateOp) { return *in[0]; })
      .Case([&](ScaleOp o) {
        return perRank([&](size_t r) {
          return ref::scale((*in[0])[r], o.getFactor().convertToDouble());
        });
      })
      .Case([&](MatmulOp o) {
        return perRank([&](size_t r) {
          return ref::matmul((*in[0])[r], (*in[1])[r], o.getTransposeLhs(),
                             o.getTransposeRhs());
        });
      })
      .Default([](mlir::Operation* other) -> Stack {
        ADD_FAILURE() << "no simulation of " << other->getName().getStringRef().str();
        return {};
      });
}

/// Runs every op of `func`'s body but the return, on the stacks bound to its arguments.
llvm::DenseMap<mlir::Value, Stack> run(mlir::func::FuncOp func, const std::vector<Stack>& args) {
  llvm::DenseMap<mlir::Value, Stack> values;
  for (auto [arg, stack] : llvm::zip(func.getArguments(), args)) values[arg] = stack;
  for (mlir::Operation& op : func.getBody().front().without_terminator()) {
    std::vector<const Stack*> in;
    for (mlir::Value v : op.getOperands()) in.push_back(&values.at(v));
    values[op.getResult(0)] = simulate(&op, in);
  }
  return values;
}

// ---- Inner products ----

/// How a value lives on the group (see the file header).
enum class Space { kPerRank, kReplicated };

/// <a, b> and the sum of |products| (the scale of its rounding error).
struct Dot {
  double value = 0, magnitude = 0;
};

Dot dot(const Stack& a, const Stack& b, Space space) {
  EXPECT_EQ(a.size(), b.size());
  Dot d;
  size_t ranks = space == Space::kReplicated ? 1 : a.size();
  for (size_t r = 0; r < ranks && r < b.size(); ++r) {
    EXPECT_EQ(a[r].shape, b[r].shape) << "rank " << r;
    for (size_t i = 0; i < a[r].data.size() && i < b[r].data.size(); ++i) {
      d.value += a[r].data[i] * b[r].data[i];
      d.magnitude += std::abs(a[r].data[i] * b[r].data[i]);
    }
  }
  return d;
}

Stack randomStack(Rng& rng, const Shape& shape, int64_t n, Space space) {
  if (space == Space::kReplicated) return Stack(n, rng.tensor(shape));
  Stack s;
  for (int64_t r = 0; r < n; ++r) s.push_back(rng.tensor(shape));
  return s;
}

std::string tensorType(const Shape& s) {
  std::string t = "tensor<";
  for (int64_t d : s) t += std::to_string(d) + "x";
  return t + "f32>";
}

std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  auto context = std::make_unique<mlir::MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

/// A grid on which `grid_axes = <axes>` spans a group of n ranks: "[1]" on 3 x n (the
/// first axis outside the group), or for n = 4 also "[1, 0]" on 2 x 2.
struct Grid {
  std::string shape, axes;
};

std::vector<std::pair<int64_t, Grid>> groups() {
  return {{2, {"3x2", "[1]"}}, {3, {"3x3", "[1]"}}, {4, {"3x4", "[1]"}}, {4, {"2x2", "[1, 0]"}}};
}

/// One collective to check: its IR (with %x, and `AXES` for the grid axes), its operand and
/// result shapes over a group of n ranks, and the spaces of its operand and result.
struct Case {
  std::string name;
  std::function<std::string(int64_t n)> op;
  std::function<Shape(int64_t n)> in, out;
  Space inSpace = Space::kPerRank, outSpace = Space::kPerRank;
};

std::vector<Case> cases() {
  auto fixed = [](Shape s) { return [s](int64_t) { return s; }; };
  auto with = [](std::string text) { return [text](int64_t) { return text; }; };
  return {
      {"all_gather dim 0", with("tessel.all_gather %x on @mesh grid_axes = AXES gather_axis = 0"),
       fixed({2, 3}), [](int64_t n) { return Shape{2 * n, 3}; }},
      {"all_gather dim 1", with("tessel.all_gather %x on @mesh grid_axes = AXES gather_axis = 1"),
       fixed({2, 3}), [](int64_t n) { return Shape{2, 3 * n}; }},
      {"reduce_scatter sum dim 0",
       with("tessel.reduce_scatter %x reduce sum on @mesh grid_axes = AXES scatter_axis = 0"),
       [](int64_t n) { return Shape{2 * n, 3}; }, fixed({2, 3})},
      {"reduce_scatter avg dim 1",
       with("tessel.reduce_scatter %x reduce avg on @mesh grid_axes = AXES scatter_axis = 1"),
       [](int64_t n) { return Shape{2, 3 * n}; }, fixed({2, 3})},
      {"all_to_all split 1 concat 0",
       with("tessel.all_to_all %x on @mesh grid_axes = AXES split_axis = 1 concat_axis = 0"),
       [](int64_t n) { return Shape{2, 3 * n}; }, [](int64_t n) { return Shape{2 * n, 3}; }},
      {"all_to_all split 0 concat 2",
       with("tessel.all_to_all %x on @mesh grid_axes = AXES split_axis = 0 concat_axis = 2"),
       [](int64_t n) { return Shape{n, 2, 3}; }, [](int64_t n) { return Shape{1, 2, 3 * n}; }},
      {"all_to_all split 1 concat 1",
       with("tessel.all_to_all %x on @mesh grid_axes = AXES split_axis = 1 concat_axis = 1"),
       [](int64_t n) { return Shape{2, 2 * n}; }, [](int64_t n) { return Shape{2, 2 * n}; }},
      {"all_reduce sum", with("tessel.all_reduce %x reduce sum on @mesh grid_axes = AXES"),
       fixed({2, 3}), fixed({2, 3}), Space::kPerRank, Space::kReplicated},
      {"all_reduce avg", with("tessel.all_reduce %x reduce avg on @mesh grid_axes = AXES"),
       fixed({2, 3}), fixed({2, 3}), Space::kPerRank, Space::kReplicated},
      {"replicate", with("tessel.replicate %x on @mesh grid_axes = AXES"), fixed({2, 3}),
       fixed({2, 3}), Space::kReplicated, Space::kPerRank},
  };
}

/// `@f(%x, %dy)` holding the case's op (its result type spelled after the op's own syntax:
/// `: T -> U` for the ops that change the shape, `: T` for those that keep it).
std::string caseIr(const Case& c, int64_t n, const Grid& grid) {
  std::string op = c.op(n);
  op.replace(op.find("AXES"), 4, grid.axes);
  std::string in = tensorType(c.in(n)), out = tensorType(c.out(n));
  bool keepsType = op.find("all_reduce") != std::string::npos ||
                   op.find("replicate") != std::string::npos;
  return "shard.grid @mesh(shape = " + grid.shape + ") {tessel.axis_names = [\"a\", \"b\"]}\n"
         "func.func @f(%x: " + in + ", %dy: " + out + ") {\n"
         "  %y = " + op + " : " + in + (keepsType ? "" : " -> " + out) + "\n"
         "  return\n}\n";
}

TEST(CollectiveTranspose, AdjointIdentityOfEveryRow) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto context = makeContext();
  for (const Case& c : cases())
    for (const auto& [n, grid] : groups()) {
      std::string text = caseIr(c, n, grid);
      SCOPED_TRACE(c.name + " over " + std::to_string(n) + " ranks:\n" + text);
      auto module = mlir::parseSourceString<mlir::ModuleOp>(text, context.get());
      ASSERT_TRUE(module);
      auto func = *module->getOps<mlir::func::FuncOp>().begin();
      mlir::Operation* forward = &func.getBody().front().front();
      // A^T as autodiff builds it, before the return.
      mlir::OpBuilder b(func.getBody().front().getTerminator());
      llvm::SmallVector<mlir::Value> grads;
      mlir::Value dy = func.getArgument(1);
      ASSERT_TRUE(mlir::succeeded(
          mlir::cast<tessel::VJPOpInterface>(forward).buildVJP(b, {dy}, grads)));
      ASSERT_EQ(grads.size(), 1u);
      ASSERT_TRUE(grads[0]);
      ASSERT_TRUE(mlir::succeeded(mlir::verify(*module))) << "the VJP built ill-formed IR";
      EXPECT_EQ(grads[0].getType(), forward->getOperand(0).getType());

      Stack x = randomStack(rng, c.in(n), n, c.inSpace);
      Stack y = randomStack(rng, c.out(n), n, c.outSpace);
      auto values = run(func, {x, y});
      Dot lhs = dot(values.at(forward->getResult(0)), y, c.outSpace);
      Dot rhs = dot(x, values.at(grads[0]), c.inSpace);
      EXPECT_NEAR(lhs.value, rhs.value, kTol * std::max(1.0, lhs.magnitude));
      // A replicated gradient must be the same tensor on every rank.
      if (c.inSpace == Space::kReplicated) {
        for (const ref::Tensor& t : values.at(grads[0]))
          EXPECT_EQ(t.data, values.at(grads[0])[0].data);
      }
    }
}

// The reference semantics against closed forms, with x_r[i] = 100 r + i (row-major i).
TEST(CollectiveTranspose, ReferenceSemanticsMatchClosedForms) {
  for (int64_t n : {2, 3, 4}) {
    auto numbered = [n](Shape shape) {
      Stack x;
      for (int64_t r = 0; r < n; ++r) {
        ref::Tensor t(shape);
        for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = 100.0 * r + i;
        x.push_back(t);
      }
      return x;
    };
    // all_gather of [2]: [0, 1, 100, 101, ...] on every rank.
    for (const ref::Tensor& t : allGather(numbered({2}), 0))
      for (int64_t i = 0; i < 2 * n; ++i) EXPECT_EQ(t.data[i], 100.0 * (i / 2) + i % 2);
    // reduce_scatter sum of [2n]: rank r's element j is sum_s (100 s + 2r + j).
    Stack s = reduceScatter(numbered({2 * n}), 0, false);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < 2; ++j)
        EXPECT_EQ(s[r].data[j], 100.0 * n * (n - 1) / 2 + n * (2.0 * r + j));
    // all_to_all of [n, 1], split 0, concat 1: rank r receives [1, n] = (100 s + r)_s.
    Stack a = allToAll(numbered({n, 1}), 0, 1);
    for (int64_t r = 0; r < n; ++r) {
      EXPECT_EQ(a[r].shape, (Shape{1, n}));
      for (int64_t src = 0; src < n; ++src) EXPECT_EQ(a[r].data[src], 100.0 * src + r);
    }
  }
}

// Megatron's pair, composed: f (replicate) before a per-rank product with this rank's
// shard W_r, then g (all_reduce sum): y = sum_r x W_r^T. Differentiating the three ops in
// reverse with their own VJPs must give exactly one collective in the backward pass, f's
// all-reduce (g's VJP is the identity), and the closed forms dx = sum_r dy W_r (replicated)
// and dW_r = dy^T x (each rank its own shard, not summed). Exact algebra, no finite
// differences; kTol as above (sums of at most n * 5 products).
TEST(CollectiveTranspose, ReplicateThenAllReduceIsMegatronsPair) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto context = makeContext();
  for (const auto& [n, grid] : groups()) {
    std::string text =
        "shard.grid @mesh(shape = " + grid.shape + ") {tessel.axis_names = [\"a\", \"b\"]}\n"
        "func.func @f(%x: tensor<3x5xf32>, %w: tensor<4x5xf32>, %dy: tensor<3x4xf32>) {\n"
        "  %a = tessel.replicate %x on @mesh grid_axes = " + grid.axes + " : tensor<3x5xf32>\n"
        "  %p = tessel.matmul %a, %w transpose_rhs : (tensor<3x5xf32>, tensor<4x5xf32>) -> "
        "tensor<3x4xf32>\n"
        "  %y = tessel.all_reduce %p reduce sum on @mesh grid_axes = " + grid.axes +
        " : tensor<3x4xf32>\n"
        "  return\n}\n";
    SCOPED_TRACE(text);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, context.get());
    ASSERT_TRUE(module);
    auto func = *module->getOps<mlir::func::FuncOp>().begin();
    mlir::Block& body = func.getBody().front();
    std::vector<mlir::Operation*> forward;
    for (mlir::Operation& op : body.without_terminator()) forward.push_back(&op);
    ASSERT_EQ(forward.size(), 3u);
    // Reverse mode, as tessel-autodiff does it: g, then the product, then f.
    mlir::OpBuilder b(body.getTerminator());
    llvm::DenseMap<mlir::Value, mlir::Value> grad{{forward[2]->getResult(0), func.getArgument(2)}};
    mlir::Value dw;
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      llvm::SmallVector<mlir::Value> d;
      ASSERT_TRUE(mlir::succeeded(mlir::cast<tessel::VJPOpInterface>(*it).buildVJP(
          b, {grad.at((*it)->getResult(0))}, d)));
      grad[(*it)->getOperand(0)] = d[0];
      if (d.size() > 1) dw = d[1];
    }
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
    mlir::Value dx = grad.at(func.getArgument(0));

    // The backward pass: every op after the forward ones; its only collective is f's.
    int collectives = 0;
    for (mlir::Operation* op = forward[2]->getNextNode(); op != body.getTerminator();
         op = op->getNextNode())
      if (!mlir::isa<tessel::MatmulOp, tessel::TransposeOp, tessel::ReshapeOp>(op)) {
        auto ar = mlir::dyn_cast<tessel::AllReduceOp>(op);
        ASSERT_TRUE(ar) << "unexpected op in the backward pass: "
                        << op->getName().getStringRef().str();
        EXPECT_EQ(ar.getReduce(), tessel::ReduceKind::sum);
        EXPECT_EQ(ar.getGroupSize(), n);
        ++collectives;
      }
    EXPECT_EQ(collectives, 1);
    ASSERT_TRUE(dx.getDefiningOp<tessel::AllReduceOp>()) << "dx must be f's all-reduce";

    Stack x = randomStack(rng, {3, 5}, n, Space::kReplicated);
    Stack w = randomStack(rng, {4, 5}, n, Space::kPerRank);
    Stack dy = randomStack(rng, {3, 4}, n, Space::kReplicated);
    auto values = run(func, {x, w, dy});
    ref::Tensor dxWant(Shape{3, 5});
    for (int64_t r = 0; r < n; ++r)
      dxWant = ref::add(dxWant, ref::matmul(dy[r], w[r], false, false));
    ref::Tensor dwWant = ref::matmul(dy[0], x[0], true, false);
    for (int64_t r = 0; r < n; ++r) {
      const ref::Tensor& gotDx = values.at(dx)[r];
      const ref::Tensor& gotDw = values.at(dw)[r];
      ASSERT_EQ(gotDx.shape, dxWant.shape);
      ASSERT_EQ(gotDw.shape, dwWant.shape);
      for (size_t i = 0; i < dxWant.data.size(); ++i)
        EXPECT_NEAR(gotDx.data[i], dxWant.data[i], kTol * 10) << "dx, rank " << r;
      for (size_t i = 0; i < dwWant.data.size(); ++i)
        EXPECT_NEAR(gotDw.data[i], dwWant.data[i], kTol * 10) << "dW, rank " << r;
    }
    // And the adjoint identity of the whole block: <F x, dy> = <x, F^T dy>, once each.
    Dot lhs = dot(values.at(forward[2]->getResult(0)), dy, Space::kReplicated);
    Dot rhs = dot(x, values.at(dx), Space::kReplicated);
    EXPECT_NEAR(lhs.value, rhs.value, kTol * std::max(1.0, lhs.magnitude));
  }
}

// The reference interpreter runs one rank: over a group of one rank every new collective
// (and each start/wait pair) is the identity; over a larger group it refuses with the op
// and the group size, as for an all-reduce sum.
std::string oneOpIr(const std::string& kind, const std::string& attrs, const Shape& out,
                    int64_t n, bool async) {
  std::string in = tensorType({2, 4}), res = tensorType(out);
  std::string text = "shard.grid @mesh(shape = " + std::to_string(n) +
                     ") {tessel.axis_names = [\"tp\"]}\n"
                     "func.func @forward(%x: " + in + ") -> " + res + " {\n"
                     "  %y = tessel." + kind + (async ? "_start" : "") + " %x " + attrs +
                     " : " + in + " -> " + res + "\n";
  if (!async) return text + "  return %y : " + res + "\n}\n";
  return text + "  %z = tessel." + kind + "_wait %y : " + res + "\n  return %z : " + res +
         "\n}\n";
}

TEST(CollectiveTranspose, InterpreterRunsGroupsOfOneRankOnly) {
  auto context = makeContext();
  struct Op {
    std::string kind, attrs, verb;
    std::function<Shape(int64_t n)> out;  // the result shape of a 2x4 input over n ranks
  };
  const std::vector<Op> ops = {
      {"all_gather", "on @mesh grid_axes = [0] gather_axis = 0", "gather",
       [](int64_t n) { return Shape{2 * n, 4}; }},
      {"reduce_scatter", "reduce sum on @mesh grid_axes = [0] scatter_axis = 1",
       "reduce-scatter", [](int64_t n) { return Shape{2, 4 / n}; }},
      {"all_to_all", "on @mesh grid_axes = [0] split_axis = 1 concat_axis = 0",
       "exchange blocks", [](int64_t n) { return Shape{2 * n, 4 / n}; }},
  };
  Rng rng;
  SCOPED_TRACE(rng.trace());
  ref::Tensor x = rng.tensor({2, 4});
  for (const Op& op : ops)
    for (bool async : {false, true})
      for (int64_t n : {1, 2}) {
        std::string text = oneOpIr(op.kind, op.attrs, op.out(n), n, async);
        SCOPED_TRACE(text);
        auto module = mlir::parseSourceString<mlir::ModuleOp>(text, context.get());
        ASSERT_TRUE(module);
        auto func = *module->getOps<mlir::func::FuncOp>().begin();
        if (n == 1) {
          std::vector<ref::Tensor> out = tessel::interpret(func, {}, {x});
          ASSERT_EQ(out.size(), 1u);
          EXPECT_EQ(out[0].shape, x.shape);
          EXPECT_EQ(out[0].data, x.data);
          continue;
        }
        std::string want = "the interpreter runs one rank and cannot " + op.verb + " over 2 ranks";
        try {
          tessel::interpret(func, {}, {x});
          ADD_FAILURE() << "expected the interpreter to refuse a group of 2";
        } catch (const tessel::InterpreterError& e) {
          EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("tessel." + op.kind), std::string::npos)
              << e.what();
        }
      }
}

}  // namespace
