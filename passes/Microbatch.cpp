//===- Microbatch.cpp - M microbatches per pipeline step -----------------------===//
//
// Algorithm (see passes/PassesPipeline.td), on @train_step of one pipeline stage as
// tessel-autodiff leaves it (forward and backward of one microbatch):
//   1. The ops that depend on the data (an argument or a tessel.recv) are per-microbatch;
//      the others (parameters, constants, what is computed from them alone) are shared and
//      move to the top, in order.
//   2. The per-microbatch ops are cloned M times, clone m reading arguments [m k, (m + 1) k)
//      of the new signature (k: the old argument count) and tagged tessel.pp_microbatch = m.
//   3. Each gradient is g_0 + g_1 + ... + g_{M-1} (each add with its microbatch's backward),
//      times 1/M; the loss likewise, then all-reduced (sum) over the pipeline axis once, at
//      the end (the per-microbatch all-reduce of tessel-split-stages goes away): each
//      microbatch's loss and gradients are means over its rows, so the result is the step's
//      mean over all rows, as one rank computes it.
//   4. A parameter several stages hold (tessel.pp_stages, a tied embedding) has its
//      gradient summed across them before anything else reduces it: the later stages send
//      theirs to the first, which adds them in stage order and sends the sum back.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/PipelineAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include <map>

#define DEBUG_TYPE "tessel-microbatch"

namespace tessel {
#define GEN_PASS_DEF_MICROBATCH
#include "passes/Passes.h.inc"

namespace {

using mlir::Operation;
using mlir::Value;

struct MicrobatchPass : impl::MicrobatchBase<MicrobatchPass> {
  using MicrobatchBase::MicrobatchBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto step = unreducedTrainStep(module, trainStepName, DEBUG_TYPE,
                                   "once, after tessel-autodiff and before tessel-gradient-all-reduce and tessel-optimizer");
    if (!step) return signalPassFailure();
    std::optional<PipelineInfo> info = pipelineInfo(step);
    if (!info) {
      step.emitError() << DEBUG_TYPE << ": @" << trainStepName
                       << " is not a pipeline stage (tessel-split-stages did not run)";
      return signalPassFailure();
    }
    if (info->microbatches > 0) {
      step.emitError() << DEBUG_TYPE << ": @" << trainStepName << " already runs " << info->microbatches
                       << " microbatches";
      return signalPassFailure();
    }
    if (microbatches < 1) {
      step.emitError() << DEBUG_TYPE << ": microbatches must be >= 1, got " << static_cast<int64_t>(microbatches);
      return signalPassFailure();
    }
    if (mlir::failed(unroll(step, *info))) return signalPassFailure();
    info->microbatches = microbatches;
    setPipelineInfo(step, *info);
  }

  mlir::LogicalResult unroll(mlir::func::FuncOp f, const PipelineInfo& info) {
    mlir::Block& body = f.getBody().front();
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    const unsigned k = body.getNumArguments();
    const int64_t m = microbatches;

    // The loss all-reduce over the pipeline axis (tessel-split-stages), moved to the end.
    std::optional<unsigned> lossIndex = findOutput(f, "loss");
    if (!lossIndex) return f.emitError() << DEBUG_TYPE << ": @" << trainStepName << " returns no loss";
    Operation* lossReduce = nullptr;
    Value loss = ret.getOperand(*lossIndex);
    if (auto ar = loss.getDefiningOp<AllReduceOp>(); ar && ar.getReduce() == ReduceKind::sum) {
      lossReduce = ar;
      loss = ar.getInput();
    }

    // 1. Per-microbatch ops: those reading the data.
    llvm::DenseSet<Operation*> perMicrobatch;
    llvm::SmallVector<Operation*> ops;
    for (Operation& op : body.without_terminator()) {
      if (&op == lossReduce) continue;
      ops.push_back(&op);
      bool data = llvm::isa<RecvOp>(op) || llvm::any_of(op.getOperands(), [&](Value x) {
                    Operation* d = x.getDefiningOp();
                    return d ? perMicrobatch.contains(d) : true;  // a block argument: the data
                  });
      if (data) perMicrobatch.insert(&op);
    }
    // Shared ops first, in order (they read only shared ops).
    for (Operation* op : ops)
      if (!perMicrobatch.contains(op)) op->moveBefore(ret);

    // 2. The new arguments: k per microbatch.
    llvm::SmallVector<mlir::Type> argTypes;
    llvm::SmallVector<mlir::DictionaryAttr> argAttrs;
    // Microbatch i > 0 names its copy of input "x" "x.mb<i>" (buffer names stay unique).
    for (int64_t i = 0; i < m; ++i)
      for (unsigned a = 0; a < k; ++a) {
        argTypes.push_back(body.getArgument(a).getType());
        auto name = inputName(f, a);
        argAttrs.push_back(i == 0 || !name ? f.getArgAttrDict(a)
                                           : inputAttrs(f.getContext(), (name.getValue() + ".mb" + llvm::Twine(i)).str()));
      }
    llvm::SmallVector<Value> args;
    for (int64_t i = 0; i < m * static_cast<int64_t>(k); ++i)
      args.push_back(body.addArgument(argTypes[static_cast<size_t>(i)], f.getLoc()));

    mlir::OpBuilder b(ret);
    std::vector<mlir::IRMapping> maps(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      mlir::IRMapping& map = maps[static_cast<size_t>(i)];
      for (unsigned a = 0; a < k; ++a) map.map(body.getArgument(a), args[static_cast<size_t>(i * k + a)]);
      for (Operation* op : ops) {
        if (!perMicrobatch.contains(op)) continue;
        Operation* clone = b.clone(*op, map);
        setPipelineTag(clone, PipelineTag::Microbatch, i);
      }
    }

    // 3. Sums over the microbatches, in microbatch order (each add with its microbatch),
    // then every sum scaled by 1/M at the step's end.
    auto sum = [&](Value v) -> Value {
      Operation* def = v.getDefiningOp();
      if (!def || !perMicrobatch.contains(def)) return v;  // shared (an explicit zero)
      Value acc = maps[0].lookup(v);
      for (int64_t i = 1; i < m; ++i) {
        Value next = maps[static_cast<size_t>(i)].lookup(v);
        auto add = AddOp::create(b, next.getLoc(), v.getType(), acc, next);
        copyPipelineTags(next.getDefiningOp(), add);
        acc = add;
      }
      return acc;
    };
    llvm::SmallVector<Value> results;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      results.push_back(i == *lossIndex ? sum(loss) : sum(ret.getOperand(i)));
    if (m > 1)
      for (auto [i, r] : llvm::enumerate(results)) {
        Value old = i == *lossIndex ? loss : ret.getOperand(static_cast<unsigned>(i));
        if (r != old)
          r = ScaleOp::create(b, old.getLoc(), r, b.getF64FloatAttr(1.0 / static_cast<double>(m)));
      }
    if (lossReduce) {
      auto ar = llvm::cast<AllReduceOp>(lossReduce);
      results[*lossIndex] = AllReduceOp::create(b, ar.getLoc(), results[*lossIndex], ar.getReduceAttr(),
                                                ar.getGridAttr(), ar.getGridAxesAttr());
    }

    // 4. Tied parameters: their gradient summed across the stages holding them.
    std::map<std::string, ParamOp> params;
    for (auto p : body.getOps<ParamOp>()) params[p.getName().str()] = p;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto name = gradName(f, i);
      if (!name) continue;
      ParamOp p = params[name.str()];
      llvm::SmallVector<int64_t> stages = p ? tiedStages(p) : llvm::SmallVector<int64_t>{};
      if (stages.empty()) continue;
      results[i] = sumTied(b, results[i], stages, info, p);
    }

    // The old body goes: clones and sums replace it.
    mlir::func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    if (lossReduce) lossReduce->erase();
    for (Operation* op : llvm::reverse(ops))
      if (perMicrobatch.contains(op)) {
        if (!op->use_empty())
          return op->emitError() << DEBUG_TYPE << ": internal error: a microbatch op is still used";
        op->erase();
      }
    body.eraseArguments(0, k);
    f.setFunctionType(b.getFunctionType(argTypes, body.getTerminator()->getOperandTypes()));
    f.setAllArgAttrs(argAttrs);
    return mlir::success();
  }

  /// The sum of `g` over the stages `stages` (ascending, this one among them) by send/recv
  /// along the pipeline axis of `p`'s grid: the first stage adds the others' in order and
  /// sends the sum back, so every holder ends with the same bits.
  Value sumTied(mlir::OpBuilder& b, Value g, llvm::ArrayRef<int64_t> stages, const PipelineInfo& info,
                ParamOp p) {
    auto grid = findGrid(p->getParentOfType<mlir::ModuleOp>(), DEBUG_TYPE);
    auto axes = b.getDenseI16ArrayAttr({grid->axis(info.axis)});
    mlir::Location loc = p.getLoc();
    const int64_t first = stages.front();
    if (info.stage != first) {
      SendOp::create(b, loc, g, b.getI64IntegerAttr(first), grid->ref, axes);
      return RecvOp::create(b, loc, g.getType(), b.getI64IntegerAttr(first), grid->ref, axes);
    }
    Value acc = g;
    for (int64_t s : stages.drop_front())
      acc = AddOp::create(b, loc, g.getType(), acc, RecvOp::create(b, loc, g.getType(), b.getI64IntegerAttr(s), grid->ref, axes));
    for (int64_t s : stages.drop_front()) SendOp::create(b, loc, acc, b.getI64IntegerAttr(s), grid->ref, axes);
    return acc;
  }
};

}  // namespace
}  // namespace tessel
