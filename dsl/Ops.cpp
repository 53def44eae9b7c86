// The DSL's free functions and operators: each computes its result shape with the shared
// rule (compiler/Shapes.h), reports a violation at the user's line, then creates and
// verifies one tessel op.
#include "dsl/Graph.h"

#include <fmt/format.h>

namespace tessel {
namespace {

/// Everything one op needs: its graph, the user's location and the operands as SSA values.
struct Call {
  Graph& g;
  mlir::Location loc;

  Call(const Tensor& first, const std::source_location& where)
      : g(Graph::of(first, where)), loc(g.location(where)) {
    g.checkOpen(loc);
  }

  mlir::Value operator()(const Tensor& t) { return g.unwrap(t, loc); }
  shapes::ShapeRef shape(const Tensor& t) { return t.shape(); }
  mlir::Type elem(const Tensor& t) {
    return mlir::cast<mlir::RankedTensorType>(g.unwrap(t, loc).getType()).getElementType();
  }
  mlir::RankedTensorType type(const Shape& shape, const Tensor& like) {
    return g.tensorType(shape, elem(like));
  }
  /// Creates OpTy with result type from `rule`, verifies it and wraps its result.
  template <typename OpTy, typename... Args>
  Tensor make(const shapes::Result& rule, const Tensor& like, Args&&... args) {
    Shape shape = g.check(rule, OpTy::getOperationName(), loc);
    auto op = OpTy::create(g.builder(), loc, type(shape, like), std::forward<Args>(args)...);
    g.verify(op);
    return g.wrap(op.getResult());
  }
  void requireFloat(const Tensor& t, llvm::StringRef opName, const char* what) {
    if (t.dtype() == DType::I32)
      g.fail(loc, fmt::format("'{}' op {} must be a float tensor (f32 or bf16), got i32 {}",
                              opName.str(), what, shapes::str(t.shape())));
  }
  void requireI32(const Tensor& t, llvm::StringRef opName, const char* what) {
    if (t.dtype() != DType::I32)
      g.fail(loc, fmt::format("'{}' op {} must be an i32 tensor, got a float {}", opName.str(),
                              what, shapes::str(t.shape())));
  }
};

template <typename OpTy>
Tensor binary(const At& lhs, const Tensor& rhs) {
  Call c(lhs.tensor, lhs.loc);
  c.requireFloat(lhs.tensor, OpTy::getOperationName(), "lhs");
  c.requireFloat(rhs, OpTy::getOperationName(), "rhs");
  return c.make<OpTy>(shapes::broadcast(lhs.tensor.shape(), rhs.shape()),
                      lhs.tensor.rank() >= rhs.rank() ? lhs.tensor : rhs, c(lhs.tensor), c(rhs));
}

template <typename OpTy>
Tensor unary(const Tensor& x, const std::source_location& loc) {
  Call c(x, loc);
  c.requireFloat(x, OpTy::getOperationName(), "input");
  return c.make<OpTy>(shapes::Result{x.shape(), ""}, x, c(x));
}

}  // namespace

Tensor operator+(At lhs, const Tensor& rhs) { return binary<AddOp>(lhs, rhs); }
Tensor operator-(At lhs, const Tensor& rhs) { return binary<SubOp>(lhs, rhs); }
Tensor operator*(At lhs, const Tensor& rhs) { return binary<MulOp>(lhs, rhs); }
Tensor operator*(At x, double factor) { return scale(x.tensor, factor, x.loc); }

Tensor scale(const Tensor& x, double factor, Loc loc) {
  Call c(x, loc);
  c.requireFloat(x, ScaleOp::getOperationName(), "input");
  return c.make<ScaleOp>(shapes::Result{x.shape(), ""}, x, c(x),
                         c.g.builder().getF64FloatAttr(factor));
}

Tensor gelu(const Tensor& x, Loc loc) { return unary<GeluOp>(x, loc); }
Tensor relu(const Tensor& x, Loc loc) { return unary<ReluOp>(x, loc); }
Tensor silu(const Tensor& x, Loc loc) { return unary<SiluOp>(x, loc); }

Tensor swiglu(const Tensor& gate, const Tensor& up, Loc loc) {
  // Checked as a whole first, so a mismatch names swiglu's operands rather than the mul's.
  Call c(gate, loc);
  c.requireFloat(gate, SiluOp::getOperationName(), "gate");
  c.requireFloat(up, MulOp::getOperationName(), "up");
  c.g.check(shapes::swiglu(gate.shape(), up.shape()), "swiglu", c.loc);
  // Two ops, silu then mul, so that fusion puts them in one kernel and autodiff needs no
  // rule of its own.
  return At(silu(gate, loc), loc) * up;
}

Tensor matmul(const Tensor& lhs, const Tensor& rhs, MatmulOptions o, Loc loc) {
  Call c(lhs, loc);
  c.requireFloat(lhs, MatmulOp::getOperationName(), "lhs");
  c.requireFloat(rhs, MatmulOp::getOperationName(), "rhs");
  return c.make<MatmulOp>(shapes::matmul(lhs.shape(), rhs.shape(), o.transpose_lhs, o.transpose_rhs),
                          lhs, c(lhs), c(rhs), o.transpose_lhs, o.transpose_rhs);
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, Loc loc) {
  Call c(x, loc);
  c.requireFloat(x, LayerNormOp::getOperationName(), "input");
  c.g.check(shapes::normEpsilonError(eps), LayerNormOp::getOperationName(), c.loc);
  return c.make<LayerNormOp>(shapes::layerNorm(x.shape(), gamma.shape(), beta.shape()), x, c(x),
                             c(gamma), c(beta), c.g.builder().getF64FloatAttr(eps));
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps, Loc loc) {
  Call c(x, loc);
  c.requireFloat(x, RmsNormOp::getOperationName(), "input");
  c.requireFloat(weight, RmsNormOp::getOperationName(), "weight");
  c.g.check(shapes::normEpsilonError(eps), RmsNormOp::getOperationName(), c.loc);
  return c.make<RmsNormOp>(shapes::rmsNorm(x.shape(), weight.shape()), x, c(x), c(weight),
                           c.g.builder().getF64FloatAttr(eps));
}

std::string norm_epsilon_error(double eps) { return shapes::normEpsilonError(eps); }

std::string rope_theta_error(double theta, int64_t head_size, int64_t positions) {
  return shapes::ropeThetaError(theta, head_size, positions);
}

Tensor softmax(const Tensor& x, bool causal, Loc loc) {
  Call c(x, loc);
  c.requireFloat(x, SoftmaxOp::getOperationName(), "input");
  return c.make<SoftmaxOp>(shapes::softmax(x.shape(), causal), x, c(x), causal);
}

Tensor causal_attention(const Tensor& qkv, int64_t heads, Loc loc) {
  Call c(qkv, loc);
  c.requireFloat(qkv, CausalAttentionOp::getOperationName(), "qkv");
  return c.make<CausalAttentionOp>(shapes::causalAttention(qkv.shape(), heads), qkv, c(qkv),
                                   c.g.builder().getI64IntegerAttr(heads));
}

Tensor rope(const Tensor& x, int64_t heads, double theta, Loc loc) {
  Call c(x, loc);
  c.requireFloat(x, RopeOp::getOperationName(), "input");
  return c.make<RopeOp>(shapes::rope(x.shape(), heads, theta), x, c(x),
                        c.g.builder().getI64IntegerAttr(heads),
                        c.g.builder().getF64FloatAttr(theta), mlir::UnitAttr());
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                        int64_t kv_heads, Loc loc) {
  Call c(q, loc);
  llvm::StringRef name = GroupedAttentionOp::getOperationName();
  c.requireFloat(q, name, "q");
  c.requireFloat(k, name, "k");
  c.requireFloat(v, name, "v");
  return c.make<GroupedAttentionOp>(
      shapes::groupedAttention(q.shape(), k.shape(), v.shape(), heads, kv_heads), q, c(q), c(k),
      c(v), c.g.builder().getI64IntegerAttr(heads), c.g.builder().getI64IntegerAttr(kv_heads));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Loc loc) {
  Call c(logits, loc);
  c.requireFloat(logits, CrossEntropyOp::getOperationName(), "logits");
  c.requireI32(targets, CrossEntropyOp::getOperationName(), "targets");
  Shape shape = c.g.check(shapes::crossEntropy(logits.shape(), targets.shape()),
                          CrossEntropyOp::getOperationName(), c.loc);
  auto op = CrossEntropyOp::create(c.g.builder(), c.loc,
                                   c.g.tensorType(shape, DType::F32), c(logits), c(targets));
  c.g.verify(op);
  return c.g.wrap(op.getResult());
}

Tensor embedding(const Tensor& table, const Tensor& indices, Loc loc) {
  Call c(table, loc);
  c.requireFloat(table, EmbeddingOp::getOperationName(), "table");
  c.requireI32(indices, EmbeddingOp::getOperationName(), "indices");
  return c.make<EmbeddingOp>(shapes::embedding(table.shape(), indices.shape()), table, c(table),
                             c(indices));
}

Tensor reshape(const Tensor& x, Shape shape, Loc loc) {
  Call c(x, loc);
  return c.make<ReshapeOp>(shapes::reshape(x.shape(), shape), x, c(x));
}

Tensor transpose(const Tensor& x, std::vector<int64_t> perm, Loc loc) {
  Call c(x, loc);
  return c.make<TransposeOp>(shapes::transpose(x.shape(), perm), x, c(x),
                             c.g.builder().getDenseI64ArrayAttr(perm));
}

std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t parts, Loc loc) {
  Call c(x, loc);
  Shape part = c.g.check(shapes::split(x.shape(), axis, parts), SplitOp::getOperationName(), c.loc);
  llvm::SmallVector<mlir::Type> types(static_cast<size_t>(parts), c.type(part, x));
  auto op = SplitOp::create(c.g.builder(), c.loc, types, c(x),
                            c.g.builder().getI64IntegerAttr(axis));
  c.g.verify(op);
  std::vector<Tensor> out;
  for (mlir::Value v : op.getResults()) out.push_back(c.g.wrap(v));
  return out;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis, Loc loc) {
  if (xs.empty())
    throw ModelError(Diagnostic{loc.file_name(), static_cast<int>(loc.line()),
                                static_cast<int>(loc.column()), "",
                                "'tessel.concat' op needs at least one input"});
  Call c(xs.front(), loc);
  std::vector<Shape> shapes;
  llvm::SmallVector<mlir::Value> values;
  for (const Tensor& t : xs) {
    shapes.push_back(t.shape());
    values.push_back(c(t));
  }
  return c.make<ConcatOp>(shapes::concat(shapes, axis), xs.front(), values,
                          c.g.builder().getI64IntegerAttr(axis));
}

Tensor reduce_sum(const Tensor& x, std::vector<int64_t> dims, Loc loc) {
  Call c(x, loc);
  c.requireFloat(x, ReduceSumOp::getOperationName(), "input");
  return c.make<ReduceSumOp>(shapes::reduce(x.shape(), dims), x, c(x),
                             c.g.builder().getDenseI64ArrayAttr(dims));
}

Tensor reduce_mean(const Tensor& x, std::vector<int64_t> dims, Loc loc) {
  Call c(x, loc);
  c.requireFloat(x, ReduceMeanOp::getOperationName(), "input");
  return c.make<ReduceMeanOp>(shapes::reduce(x.shape(), dims), x, c(x),
                              c.g.builder().getDenseI64ArrayAttr(dims));
}

}  // namespace tessel
