// The reference interpreter; see Interpreter.h.
//
// 1. Bind each block argument to its input tensor (shapes checked against the signature).
// 2. Walk the body in order; each tessel op maps its operands to one reference kernel.
// 3. Return the operands of func.return.
// Kernel errors (ref::ShapeError) are rethrown as InterpreterError with the op's location.
#include "compiler/Interpreter.h"

#include "compiler/Location.h"
#include "compiler/TesselDialect.h"
#include "runtime/numeric/BFloat16.h"
#include "runtime/reference/ReferenceNorm.h"
#include "runtime/reference/ReferenceAttention.h"
#include "runtime/reference/ReferenceVocab.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <fmt/format.h>
#include <optional>
#include <set>
#include <utility>

namespace tessel {
namespace {

std::string describe(mlir::Operation* op) {
  return fmt::format("'{}' at {}", op->getName().getStringRef().str(),
                     locationString(op->getLoc()));
}

std::vector<int64_t> shapeOf(mlir::Type type) {
  auto shape = mlir::cast<mlir::RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

std::vector<int64_t> toVector(llvm::ArrayRef<int64_t> a) { return {a.begin(), a.end()}; }

/// Evaluates one tessel op (everything but param) on its operand values.
std::vector<ref::Tensor> evaluate(mlir::Operation* op, const std::vector<const ref::Tensor*>& in) {
  auto one = [](ref::Tensor t) { return std::vector<ref::Tensor>{std::move(t)}; };
  return llvm::TypeSwitch<mlir::Operation*, std::vector<ref::Tensor>>(op)
      .Case([&](MatmulOp o) {
        return one(ref::matmul(*in[0], *in[1], o.getTransposeLhs(), o.getTransposeRhs()));
      })
      .Case([&](MatmulEpilogueOp o) {  // TesselFusedOps.td: the ops it fuses, in order
        ref::Tensor pre = ref::matmul(*in[0], *in[1], o.getTransposeLhs(), o.getTransposeRhs());
        size_t next = 2;
        if (o.getBias()) pre = ref::add(pre, *in[next++]);
        std::vector<ref::Tensor> out{o.getGelu() ? ref::gelu(pre) : pre};
        if (o.getResidual()) out[0] = ref::add(out[0], *in[next++]);
        if (o.getPreActivation()) out.push_back(std::move(pre));
        if (o.getBiasGradient()) out.push_back(ref::reduceSum(*in[0], {o.getTransposeLhs() ? 0 : 1}));
        return out;
      })
      .Case([&](AddOp) { return one(ref::add(*in[0], *in[1])); })
      .Case([&](CastOp) { return one(*in[0]); })  // evaluateChecked rounds bf16 results
      .Case([&](SubOp) { return one(ref::sub(*in[0], *in[1])); })
      .Case([&](MulOp) { return one(ref::mul(*in[0], *in[1])); })
      .Case([&](ScaleOp o) { return one(ref::scale(*in[0], o.getFactor().convertToDouble())); })
      .Case([&](GeluOp) { return one(ref::gelu(*in[0])); })
      .Case([&](ReluOp) { return one(ref::relu(*in[0])); })
      .Case([&](SiluOp) { return one(ref::silu(*in[0])); })
      .Case([&](RmsNormOp o) {
        return one(ref::rmsNorm(*in[0], *in[1], o.getEpsilon().convertToDouble()));
      })
      .Case([&](LayerNormOp o) {
        return one(ref::layerNorm(*in[0], *in[1], *in[2], o.getEpsilon().convertToDouble()));
      })
      .Case([&](SoftmaxOp o) { return one(ref::softmax(*in[0], o.getCausal())); })
      .Case([&](EmbeddingOp) { return one(ref::embedding(*in[0], *in[1])); })
      .Case([&](CrossEntropyOp) { return one(ref::crossEntropy(*in[0], *in[1])); })
      .Case([&](CausalAttentionOp o) {
        return one(ref::causalAttention(*in[0], static_cast<int64_t>(o.getNumHeads())));
      })
      .Case([&](RopeOp o) {
        return one(ref::rope(*in[0], static_cast<int64_t>(o.getNumHeads()),
                             o.getTheta().convertToDouble(), o.getInverse()));
      })
      .Case([&](GroupedAttentionOp o) {
        return one(ref::groupedAttention(*in[0], *in[1], *in[2],
                                         static_cast<int64_t>(o.getNumHeads()),
                                         static_cast<int64_t>(o.getNumKvHeads())));
      })
      .Case([&](CausalAttentionGradOp o) {
        return one(ref::causalAttentionGrad(*in[0], *in[1], static_cast<int64_t>(o.getNumHeads())));
      })
      .Case([&](GroupedAttentionGradOp o) {
        return ref::groupedAttentionGrad(*in[0], *in[1], *in[2], *in[3],
                                         static_cast<int64_t>(o.getNumHeads()),
                                         static_cast<int64_t>(o.getNumKvHeads()));
      })
      .Case([&](ReshapeOp o) { return one(ref::reshape(*in[0], shapeOf(o.getType()))); })
      .Case([&](TransposeOp o) {
        return one(ref::transpose(*in[0], toVector(o.getPermutation())));
      })
      .Case([&](SplitOp o) {
        return ref::split(*in[0], static_cast<int64_t>(o.getAxis()),
                          static_cast<int64_t>(o.getNumResults()));
      })
      .Case([&](ConcatOp o) {
        std::vector<ref::Tensor> xs;
        for (const ref::Tensor* t : in) xs.push_back(*t);
        return one(ref::concat(xs, static_cast<int64_t>(o.getAxis())));
      })
      .Case([&](ReduceSumOp o) { return one(ref::reduceSum(*in[0], toVector(o.getDims()))); })
      .Case([&](ReduceMeanOp o) { return one(ref::reduceMean(*in[0], toVector(o.getDims()))); })
      // ---- backward ops ----
      .Case([&](ConstantOp o) {
        return one(ref::Tensor::filled(shapeOf(o.getType()), o.getValue().convertToDouble()));
      })
      .Case([&](BroadcastOp o) {
        return one(ref::broadcast(*in[0], shapeOf(o.getType()), toVector(o.getDims())));
      })
      .Case([&](GeluGradOp) { return one(ref::geluBackward(*in[0], *in[1])); })
      .Case([&](ReluGradOp) { return one(ref::reluBackward(*in[0], *in[1])); })
      .Case([&](SiluGradOp) { return one(ref::siluBackward(*in[0], *in[1])); })
      .Case([&](RmsNormGradOp o) {
        ref::RmsNormGrads g =
            ref::rmsNormBackward(*in[0], *in[1], *in[2], o.getEpsilon().convertToDouble());
        return std::vector<ref::Tensor>{std::move(g.dx), std::move(g.dweight)};
      })
      .Case([&](SoftmaxGradOp) { return one(ref::softmaxBackward(*in[0], *in[1])); })
      .Case([&](LayerNormGradOp o) {
        ref::LayerNormGrads g =
            ref::layerNormBackward(*in[0], *in[1], *in[2], o.getEpsilon().convertToDouble());
        return std::vector<ref::Tensor>{std::move(g.dx), std::move(g.dgamma), std::move(g.dbeta)};
      })
      .Case([&](EmbeddingGradOp o) {
        return one(ref::embeddingBackward(*in[0], *in[1], o.getType().getDimSize(0)));
      })
      .Case([&](CrossEntropyGradOp) {
        return one(ref::crossEntropyBackward(*in[0], *in[1], *in[2]));
      })
      .Case([&](FusedClassifierOp) {
        return std::vector<ref::Tensor>{ref::crossEntropy(*in[0], *in[1]),
                                        ref::crossEntropyBackward(*in[0], *in[1], *in[2])};
      })
      // ---- vocab-parallel ops (a shard's local work; the all-reduces are separate ops) ----
      .Case([&](MeshCoordinateOp) { return one(ref::Tensor::filled({}, 0.0)); })  // one rank
      .Case([&](DynamicSliceOp o) {  // rows [offset, offset + R), the offset clamped as XLA's
        std::vector<int64_t> shape = shapeOf(o.getType());
        const int64_t rows = in[0]->shape.at(0), row = rows == 0 ? 0 : in[0]->numel() / rows;
        const int64_t first = std::clamp<int64_t>(static_cast<int64_t>(in[1]->data.at(0)), 0, rows - shape[0]);
        return one(ref::Tensor(std::move(shape), std::vector<double>(in[0]->data.begin() + first * row,
                                                                     in[0]->data.begin() + (first + shape[0]) * row)));
      })
      .Case([&](EmbeddingShardOp o) {
        return one(ref::embeddingShard(*in[0], *in[1], *in[2], o.getVocab()));
      })
      .Case([&](RowMaxOp) { return one(ref::rowMax(*in[0])); })
      .Case([&](SumExpOp) { return one(ref::sumExp(*in[0], *in[1])); })
      .Case([&](TargetLogitOp o) {
        return one(ref::targetLogit(*in[0], *in[1], *in[2], o.getVocab()));
      })
      .Case([&](MaskVocabPaddingOp o) {
        return one(ref::maskVocabPadding(*in[0], *in[1], o.getVocab(),
                                         o.getFill().convertToDouble()));
      })
      .Case([&](CrossEntropyFromStatsOp) {
        return one(ref::crossEntropyFromStats(*in[0], *in[1], *in[2]));
      })
      .Case([&](EmbeddingShardGradOp o) {
        return one(ref::embeddingShardBackward(*in[0], *in[1], *in[2], o.getType().getDimSize(0)));
      })
      .Case([&](SumExpGradOp) { return one(ref::sumExpBackward(*in[0], *in[1], *in[2])); })
      .Case([&](TargetLogitGradOp o) {
        return one(ref::targetLogitBackward(*in[0], *in[1], *in[2],
                                            o.getType().getShape().back()));
      })
      .Case([&](CrossEntropyFromStatsGradOp) {
        ref::CrossEntropyFromStatsGrads g = ref::crossEntropyFromStatsBackward(*in[0], *in[1]);
        return std::vector<ref::Tensor>{std::move(g.dsum), std::move(g.dtarget)};
      })
      // ---- optimizer ops (scalar hyper-parameters are tensor<f32> operands) ----
      .Case([&](AdamWOp o) {
        ref::Tensor p = *in[0], m = *in[2], v = *in[3];
        ref::AdamWConfig c{in[4]->data[0], in[5]->data[0], in[6]->data[0], in[7]->data[0],
                           o.getDecay() ? in[8]->data[0] : 0.0,
                           static_cast<int64_t>(in[9]->data[0])};
        ref::adamwStep(p, *in[1], m, v, c);
        return std::vector<ref::Tensor>{std::move(p), std::move(m), std::move(v)};
      })
      .Case([&](SGDOp o) {
        ref::Tensor p = *in[0], buf = *in[2];
        ref::sgdStep(p, *in[1], buf, in[3]->data[0], in[4]->data[0],
                     o.getDecay() ? in[5]->data[0] : 0.0, in[6]->data[0] == 1.0);
        return std::vector<ref::Tensor>{std::move(p), std::move(buf)};
      })
      .Case([&](GlobalNormOp) {
        std::vector<const ref::Tensor*> xs(in.begin(), in.end());
        return one(ref::Tensor::filled({}, ref::globalNorm(xs)));
      })
      .Case([&](ClipCoefficientOp) {
        return one(ref::Tensor::filled({}, ref::clipCoefficient(in[0]->data[0], in[1]->data[0])));
      })
      .Default([&](mlir::Operation*) -> std::vector<ref::Tensor> {
        throw InterpreterError(
            fmt::format("the reference interpreter cannot run {}", describe(op)));
      });
}

std::vector<ref::Tensor> evaluateChecked(mlir::Operation* op,
                                         const llvm::DenseMap<mlir::Value, ref::Tensor>& values) {
  std::vector<const ref::Tensor*> in;
  for (mlir::Value v : op->getOperands()) in.push_back(&values.at(v));
  try {
    std::vector<ref::Tensor> out = evaluate(op, in);
    // bf16 results are stored as bf16: every value a bf16 kernel writes is rounded.
    for (auto [v, t] : llvm::zip(op->getResults(), out))
      if (mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType().isBF16())
        for (double& x : t.data) x = numeric::roundToBF16(x);
    return out;
  } catch (const ref::ShapeError& e) {
    throw InterpreterError(fmt::format("{}: {}", describe(op), e.what()));
  }
}

/// A fused region computes exactly what its members compute unfused: run them in order.
std::vector<ref::Tensor> runFused(FusedOp fused,
                                  const llvm::DenseMap<mlir::Value, ref::Tensor>& outer) {
  mlir::Block& body = fused.getBody().front();
  llvm::DenseMap<mlir::Value, ref::Tensor> values;
  for (auto [arg, input] : llvm::zip(body.getArguments(), fused.getInputs()))
    values[arg] = outer.at(input);
  for (mlir::Operation& m : body.without_terminator()) {
    std::vector<ref::Tensor> outs = evaluateChecked(&m, values);
    for (auto [v, t] : llvm::zip(m.getResults(), outs)) values[v] = std::move(t);
  }
  std::vector<ref::Tensor> results;
  for (mlir::Value v : llvm::cast<YieldOp>(body.getTerminator()).getValues())
    results.push_back(values.at(v));
  return results;
}

/// For a collective that moves shards between ranks (tessel.all_gather, reduce_scatter,
/// all_to_all and their start and wait ops): what it does and over how many ranks, for the
/// error when the group has more than one; nullopt for any other op. Over a group of one
/// rank each of them is the identity (the verifier has checked that the shapes agree).
std::optional<std::pair<const char*, int64_t>> shardMove(mlir::Operation* op) {
  using Move = std::optional<std::pair<const char*, int64_t>>;
  return llvm::TypeSwitch<mlir::Operation*, Move>(op)
      .Case<AllGatherOp, AllGatherStartOp>([](auto o) -> Move {
        return std::pair{"gather", o.getGroupSize()};
      })
      .Case<ReduceScatterOp, ReduceScatterStartOp>([](auto o) -> Move {
        return std::pair{"reduce-scatter", o.getGroupSize()};
      })
      .Case<AllToAllOp, AllToAllStartOp>([](auto o) -> Move {
        return std::pair{"exchange blocks", o.getGroupSize()};
      })
      // A wait completes its start, which has been checked (and run) already.
      .Case<AllGatherWaitOp, ReduceScatterWaitOp, AllToAllWaitOp>(
          [](auto) -> Move { return std::pair{"wait", int64_t{1}}; })
      .Default([](mlir::Operation*) -> Move { return std::nullopt; });
}

}  // namespace

std::vector<ref::Tensor> interpret(mlir::func::FuncOp func, const ParameterMap& params,
                                   const std::vector<ref::Tensor>& args, const Observer& observe,
                                   ParameterMap* assigned) {
  mlir::Block& body = func.getBody().front();
  if (args.size() != body.getNumArguments())
    throw InterpreterError(fmt::format("function @{} takes {} arguments, got {}",
                                       func.getSymName().str(), body.getNumArguments(),
                                       args.size()));
  llvm::DenseMap<mlir::Value, ref::Tensor> values;
  std::set<std::string> assignedHere;
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    std::vector<int64_t> want = shapeOf(arg.getType());
    if (args[i].shape != want)
      throw InterpreterError(fmt::format("argument #{} of @{} must be {}, got {}", i,
                                         func.getSymName().str(), ref::shapeString(want),
                                         ref::shapeString(args[i].shape)));
    values[arg] = args[i];
  }
  for (mlir::Operation& op : body) {
    if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      std::vector<ref::Tensor> results;
      for (mlir::Value v : ret.getOperands()) results.push_back(values.at(v));
      return results;
    }
    if (auto assign = mlir::dyn_cast<AssignOp>(op)) {
      if (!assigned)
        throw InterpreterError(fmt::format("{} writes state, but the caller collects no "
                                           "assignments",
                                           describe(&op)));
      if (!assignedHere.insert(assign.getName().str()).second)
        throw InterpreterError(fmt::format("{} assigns '{}' a second time", describe(&op),
                                           assign.getName().str()));
      (*assigned)[assign.getName().str()] = values.at(assign.getValue());
      continue;
    }
    std::vector<ref::Tensor> outs;
    if (auto param = mlir::dyn_cast<ParamOp>(op)) {
      auto it = params.find(param.getName().str());
      if (it == params.end())
        throw InterpreterError(fmt::format("no value for parameter '{}' ({})",
                                           param.getName().str(), describe(&op)));
      if (it->second.shape != shapeOf(param.getType()))
        throw InterpreterError(fmt::format(
            "parameter '{}' must be {}, got {}", param.getName().str(),
            ref::shapeString(shapeOf(param.getType())), ref::shapeString(it->second.shape)));
      outs.push_back(it->second);
    } else if (auto fused = mlir::dyn_cast<FusedOp>(op)) {
      outs = runFused(fused, values);
    } else if (mlir::isa<ReplicateOp>(op)) {
      outs.push_back(values.at(op.getOperand(0)));  // the identity in the forward pass
    } else if (auto ar = mlir::dyn_cast<AllReduceOp>(op)) {
      if (ar.getReduce() == ReduceKind::sum && ar.getGroupSize() != 1)
        throw InterpreterError(fmt::format("{}: the interpreter runs one rank and cannot sum "
                                           "over {} ranks", describe(&op), ar.getGroupSize()));
      outs.push_back(values.at(op.getOperand(0)));
    } else if (auto move = shardMove(&op)) {
      if (move->second != 1)
        throw InterpreterError(fmt::format("{}: the interpreter runs one rank and cannot {} "
                                           "over {} ranks", describe(&op), move->first,
                                           move->second));
      outs.push_back(values.at(op.getOperand(0)));
    } else if (mlir::isa<AllReduceStartOp, AllReduceWaitOp>(op)) {
      // One process sees one replica: the average or the maximum over a group of identical
      // replicas is the identity (a sum is not); the interpreter models a single rank.
      if (auto s = mlir::dyn_cast<AllReduceStartOp>(op);
          s && s.getReduce() == ReduceKind::sum && s.getGroupSize() != 1)
        throw InterpreterError(fmt::format("{}: the interpreter runs one rank and cannot sum "
                                           "over {} ranks", describe(&op), s.getGroupSize()));
      for (mlir::Value v : op.getOperands()) outs.push_back(values.at(v));
    } else {
      outs = evaluateChecked(&op, values);
    }
    if (observe) observe(&op, outs);
    for (auto [v, t] : llvm::zip(op.getResults(), outs)) values[v] = std::move(t);
  }
  throw InterpreterError(
      fmt::format("function @{} has no func.return", func.getSymName().str()));
}

}  // namespace tessel
