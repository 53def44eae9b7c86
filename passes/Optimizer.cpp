//===- Optimizer.cpp - clipping and the optimizer update in the IR -------------===//
//
// Algorithm (see passes/Passes.td):
//   1. Append the hyper-parameters as scalar f32 arguments of @train_step.
//   2. norm = global_norm(grads), every unique element once (the per-rank norms of sharded
//      gradients all-gathered over their axes); coef = clip_coefficient(norm,
//      max_grad_norm); each grad *= coef.
//   3. Per parameter: zero-initialised state params, one tessel.adamw / tessel.sgd, and a
//      tessel.assign for the new parameter and each state slot.
//   4. Return (loss, norm).
//   With shard-state-axis (ZeRO-1/2), 3. works on blocks: each parameter with ZeRO blocks
//   (ZeroBlocks.h) has its state stored as dimension-0 blocks over the axis; the rank slices
//   its block of the parameter and of the gradient (tessel.dynamic_slice at its
//   tessel.mesh_coordinate; a gradient that is already the block, ZeRO-2's, is used as it
//   is), updates it, and all-gathers the updated blocks into the new parameter. In 2., a
//   gradient block counts as split over the axis.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/PipelineAttrs.h"
#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"
#include "passes/ZeroBlocks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include <map>

#define DEBUG_TYPE "tessel-optimizer"

namespace tessel {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

/// Autodiff's explicit zero gradient: the loss ignores the parameter.
bool isIgnored(Value g) {
  auto zero = g.getDefiningOp<ConstantOp>();
  return zero && zero.getValue().isZero();
}

struct OptimizerPass : impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    // Stage: @train_step as autodiff left it (gradients possibly reduced or accumulated),
    // with no optimizer yet and not fused.
    auto step = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(trainStepName);
    mlir::Operation* anchor = step ? step.getOperation() : module.getOperation();
    if (mlir::failed(PipelineStage(module, trainStepName, trainStepName)
                         .require(DEBUG_TYPE, anchor, {StageFact::TrainStep},
                                  {StageFact::Optimizer, StageFact::Fused},
                                  "once, after tessel-autodiff (and any gradient all-reduce) "
                                  "and before tessel-fuse")))
      return signalPassFailure();
    if (optimizer != "adamw" && optimizer != "sgd") {
      step.emitError() << "tessel-optimizer: unknown optimizer '" << optimizer
                       << "' (expected adamw or sgd)";
      return signalPassFailure();
    }
    if (mlir::failed(rewrite(step))) signalPassFailure();
  }

  /// The L2 norm of every gradient element, each unique element counted once. Replicated
  /// gradients (the same on every rank) go in as they are; the gradients of parameters split
  /// over a set of mesh axes are normed per rank, and those norms all-gathered over the
  /// set, so that the one global_norm sees every shard's sum of squares exactly once
  /// (Megatron-LM sums the squares of non-duplicate gradients over its model-parallel group
  /// the same way). Every rank then computes the same norm from the same values.
  /// `grads`: each gradient with the mesh axes it is split over.
  Value globalNorm(mlir::OpBuilder& b, mlir::Location loc,
                   llvm::ArrayRef<std::pair<llvm::SmallVector<int16_t>, Value>> grads) {
    auto scalar = mlir::RankedTensorType::get({}, b.getF32Type());
    llvm::SmallVector<Value> parts;
    std::vector<std::pair<llvm::SmallVector<int16_t>, llvm::SmallVector<Value>>> groups;
    for (auto [splitAxes, g] : grads) {
      llvm::SmallVector<int16_t> axes = splitAxes;
      llvm::sort(axes);
      if (axes.empty()) {
        parts.push_back(g);
        continue;
      }
      auto it = llvm::find_if(groups, [&](const auto& e) { return e.first == axes; });
      if (it == groups.end()) it = groups.insert(groups.end(), {axes, {}});
      it->second.push_back(g);
    }
    if (groups.empty()) return GlobalNormOp::create(b, loc, scalar, parts);
    auto grid = findGrid(getOperation(), DEBUG_TYPE);
    if (mlir::failed(grid)) return Value();
    for (auto& [axes, values] : groups) {
      Value local = GlobalNormOp::create(b, loc, scalar, values);
      auto one = mlir::RankedTensorType::get({1}, b.getF32Type());
      Value vec = ReshapeOp::create(b, loc, one, local);
      auto all = mlir::RankedTensorType::get({grid->groupSize(axes)}, b.getF32Type());
      parts.push_back(AllGatherOp::create(b, loc, all, vec, grid->ref, b.getDenseI16ArrayAttr(axes),
                                          b.getI64IntegerAttr(0)));
    }
    return GlobalNormOp::create(b, loc, scalar, parts);
  }

  mlir::LogicalResult rewrite(mlir::func::FuncOp f) {
    mlir::Block& body = f.getBody().front();
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    mlir::OpBuilder b(ret);
    mlir::Location loc = ret.getLoc();

    // The gradients and their parameters.
    std::map<std::string, ParamOp> params;
    ParamOp lastParam;
    for (auto p : body.getOps<ParamOp>()) {
      params[p.getName().str()] = p;
      lastParam = p;
    }
    Value loss;
    llvm::SmallVector<std::pair<ParamOp, Value>> grads;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (auto name = gradName(f, i)) {
        auto it = params.find(name.str());
        if (it == params.end())
          return f.emitError() << "result #" << i << " is the gradient of '" << name.getValue()
                               << "', which is not a tessel.param of @" << f.getSymName();
        grads.emplace_back(it->second, ret.getOperand(i));
      } else if (auto out = outputName(f, i); out && out.getValue() == "loss") {
        loss = ret.getOperand(i);
      }
    }
    if (!loss) return f.emitError() << "@" << f.getSymName() << " returns no loss";

    // 1. Hyper-parameters.
    bool adamw = optimizer == "adamw";
    std::vector<const char*> names =
        adamw ? std::vector<const char*>{"lr", "beta1", "beta2", "eps", "weight_decay", "step",
                                         "max_grad_norm"}
              : std::vector<const char*>{"lr", "momentum", "weight_decay", "step",
                                         "max_grad_norm"};
    auto scalar = mlir::RankedTensorType::get({}, b.getF32Type());
    std::map<std::string, Value> hyper;
    for (const char* name : names)
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (auto in = inputName(f, i); in && in.getValue() == name)
          return f.emitError() << "the model input '" << name
                               << "' has the name of an optimizer hyper-parameter; rename it";
    for (const char* name : names) {
      unsigned index = f.getNumArguments();
      if (mlir::failed(f.insertArgument(index, scalar, inputAttrs(f.getContext(), name),
                                        f.getLoc())))
        return mlir::failure();
      hyper[name] = f.getArgument(index);
    }

    // ZeRO-1/2: which parameters are updated in blocks, and which gradients are blocks.
    std::optional<GridInfo> grid;
    int16_t blockAxis = -1;
    if (!shardStateAxis.empty()) {
      auto found = findGrid(f->getParentOfType<mlir::ModuleOp>(), DEBUG_TYPE);
      if (mlir::failed(found)) return mlir::failure();
      grid = *found;
      blockAxis = grid->axis(shardStateAxis);
      if (blockAxis < 0)
        return f.emitError() << DEBUG_TYPE << ": shard-state-axis '" << shardStateAxis << "' is not an axis of @mesh";
    }
    llvm::DenseSet<mlir::Operation*> blocked;
    llvm::SmallVector<std::pair<llvm::SmallVector<int16_t>, Value>> normed;
    for (auto& [p, g] : grads) {
      llvm::SmallVector<int16_t> axes = shardingOf(p.getResult()).axes();  // params are never partial
      if (blockAxis >= 0 && !isIgnored(g)) {
        mlir::FailureOr<bool> blocks = hasZeroBlocks(p, *grid, blockAxis, DEBUG_TYPE);
        if (mlir::failed(blocks)) return mlir::failure();
        if (*blocks) blocked.insert(p);
      }
      if (g.getType() != p.getType()) {
        auto block = blocked.contains(p) ? zeroBlockType(mlir::cast<mlir::RankedTensorType>(p.getType()),
                                                         grid->sizes[blockAxis])
                                         : mlir::RankedTensorType();
        if (g.getType() != block) {
          auto diag = p.emitError() << DEBUG_TYPE << ": the gradient of '" << p.getName() << "' is " << g.getType()
                                    << ", not the parameter's type " << p.getType();
          if (block) diag << " nor its block's " << block;
          return diag;
        }
        axes.push_back(blockAxis);  // a ZeRO-2 block: split over the axis
      }
      normed.emplace_back(std::move(axes), g);
    }

    // 2. Global-norm clipping. A pipeline stage norms its own gradients (a tied parameter's
    // on the first stage holding it only, so it counts once) and all-gathers the stages'
    // norms over the pipeline axis: one collective every stage issues alike.
    std::optional<PipelineInfo> pipeline = pipelineInfo(f);
    if (pipeline && pipeline->stages > 1)
      llvm::erase_if(normed, [&](const auto& e) {
        Value g = e.second;
        auto it = llvm::find_if(grads, [&](const auto& pg) { return pg.second == g; });
        llvm::SmallVector<int64_t> tied = it == grads.end() ? llvm::SmallVector<int64_t>{} : tiedStages(it->first);
        return !tied.empty() && tied.front() != pipeline->stage;
      });
    Value norm = globalNorm(b, loc, normed);
    if (!norm) return mlir::failure();
    if (pipeline && pipeline->stages > 1) {
      auto found = findGrid(f->getParentOfType<mlir::ModuleOp>(), DEBUG_TYPE);
      if (mlir::failed(found)) return mlir::failure();
      const int16_t axis = found->axis(pipeline->axis);
      auto one = mlir::RankedTensorType::get({1}, b.getF32Type());
      auto all = mlir::RankedTensorType::get({pipeline->stages}, b.getF32Type());
      Value stages = AllGatherOp::create(b, loc, all, ReshapeOp::create(b, loc, one, norm), found->ref,
                                         b.getDenseI16ArrayAttr({axis}), b.getI64IntegerAttr(0));
      norm = GlobalNormOp::create(b, loc, scalar, mlir::ValueRange{stages});
    }
    Value coef = ClipCoefficientOp::create(b, loc, scalar, norm, hyper["max_grad_norm"]);

    // 3. Updates.
    // The state is laid out like what is updated: the parameter (each rank updates its own
    // shard of a sharded one), or under ZeRO-1/2 its block over the axis.
    auto stateParam = [&](ParamOp p, const char* slot, mlir::Type type) -> Value {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(lastParam);
      auto s = ParamOp::create(b, p.getLoc(), type, b.getStringAttr(p.getName().str() + ":" + slot),
                               InitKindAttr::get(b.getContext(), InitKind::zeros),
                               mlir::FloatAttr(), b.getUnitAttr());
      TesselDialect::ShardingsAttrHelper shardings(b.getContext());
      if (blocked.contains(p)) {
        TensorSharding layout = shardingOf(p.getResult());
        if (layout.dims.empty()) layout = TensorSharding::replicated(p.getType().getRank());
        layout.dims[0] = DimSharding{{blockAxis}, 1};
        setShardings(s, {layout}, grid->ref);
      } else if (mlir::ArrayAttr layout = shardings.getAttr(p)) {
        shardings.setAttr(s, layout);
      }
      lastParam = s;
      return s.getResult();
    };
    for (auto& [p, g] : grads) {
      // A parameter the loss ignores (autodiff's explicit zero gradient) is left alone, as
      // PyTorch skips parameters whose .grad was never set: no decay, no state.
      if (isIgnored(g)) continue;
      mlir::Location ploc = p.getLoc();
      // What is updated: the parameter, or (ZeRO-1/2) this rank's block of it and of the
      // gradient, rows [k R, k R + R) for coordinate k along the axis.
      Value param = p.getResult(), grad = g;
      mlir::Type type = p.getType(), wholeType = p.getType();
      const bool inBlocks = blocked.contains(p);
      if (inBlocks) {
        auto block = zeroBlockType(mlir::cast<mlir::RankedTensorType>(type), grid->sizes[blockAxis]);
        Value offset = MeshCoordinateOp::create(b, ploc, grid->ref.getValue(), llvm::ArrayRef<int16_t>(blockAxis),
                                                block.getShape()[0]);
        param = DynamicSliceOp::create(b, ploc, block, param, offset);
        if (grad.getType() != block) grad = DynamicSliceOp::create(b, ploc, block, grad, offset);
        type = block;
      }
      Value clipped = MulOp::create(b, ploc, type, grad, coef);
      // The new parameter: the update, or the all-gather of every rank's updated block.
      auto whole = [&, inBlocks, wholeType](Value updated) -> Value {
        if (!inBlocks) return updated;
        return AllGatherOp::create(b, ploc, wholeType, updated, grid->ref, b.getDenseI16ArrayAttr({blockAxis}),
                                   b.getI64IntegerAttr(0));
      };
      bool decay = p.getType().getRank() >= 2;
      mlir::UnitAttr decayAttr = decay ? b.getUnitAttr() : mlir::UnitAttr();
      if (adamw) {
        Value m = stateParam(p, "exp_avg", type), v = stateParam(p, "exp_avg_sq", type);
        auto u = AdamWOp::create(b, ploc, type, type, type, param, clipped, m, v, hyper["lr"], hyper["beta1"],
                                 hyper["beta2"], hyper["eps"], hyper["weight_decay"], hyper["step"], decayAttr);
        AssignOp::create(b, ploc, p.getName(), whole(u.getNewParam()));
        AssignOp::create(b, ploc, b.getStringAttr(p.getName().str() + ":exp_avg"),
                         u.getNewExpAvg());
        AssignOp::create(b, ploc, b.getStringAttr(p.getName().str() + ":exp_avg_sq"),
                         u.getNewExpAvgSq());
      } else {
        Value buf = stateParam(p, "momentum_buffer", type);
        auto u = SGDOp::create(b, ploc, type, type, param, clipped, buf, hyper["lr"], hyper["momentum"],
                               hyper["weight_decay"], hyper["step"], decayAttr);
        AssignOp::create(b, ploc, p.getName(), whole(u.getNewParam()));
        AssignOp::create(b, ploc, b.getStringAttr(p.getName().str() + ":momentum_buffer"),
                         u.getNewMomentumBuffer());
      }
    }

    // 4. Return (loss, norm).
    mlir::func::ReturnOp::create(b, loc, mlir::ValueRange{loss, norm});
    ret.erase();
    f.setFunctionType(b.getFunctionType(body.getArgumentTypes(), {loss.getType(), scalar}));
    f.setAllResultAttrs(llvm::ArrayRef<mlir::DictionaryAttr>{
        outputAttrs(f.getContext(), "loss"), outputAttrs(f.getContext(), "grad_norm")});
    return mlir::success();
  }
};

}  // namespace
}  // namespace tessel
