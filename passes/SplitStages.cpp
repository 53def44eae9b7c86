//===- SplitStages.cpp - keep one pipeline stage of @forward -------------------===//
//
// Algorithm (see passes/PassesPipeline.td):
//   1. Each op of @forward belongs to a layer: the index N of the first "<name>.<N>" component
//      of its module path ("blocks.3.attn.qkv" -> 3); an op outside every layer belongs to
//      the layer before it (so the final norm, the head and the loss join the last layer),
//      or to layer 0 before any (the embeddings). Parameters, constants and ops computed from
//      them alone (a cast or all-gather of a parameter) are *free*: every stage that uses
//      one computes it.
//   2. The layers are cut into p x v chunks: the given ranges, or contiguous ranges
//      that minimise the most expensive chunk (cost model below). Chunk c runs on stage c % p.
//   3. The ops of this stage's chunks stay, in order; a value another stage computes is a
//      tessel.recv before its first use here (the recvs from one stage in the order it sends:
//      a channel is FIFO), a value this stage computes for another one a tessel.send right
//      after it (one per value and destination stage); everything else goes.
//   4. The loss is the last chunk's (0 elsewhere), all-reduced (sum) over the pipeline axis,
//      so every stage returns the same loss.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/Location.h"
#include "compiler/PipelineAttrs.h"
#include "compiler/PlanSite.h"
#include "passes/PipelineStage.h"
#include "passes/StageBalance.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

#include <map>
#include <set>

#define DEBUG_TYPE "tessel-split-stages"

namespace tessel {
#define GEN_PASS_DEF_SPLITSTAGES
#include "passes/Passes.h.inc"

namespace {

using mlir::Operation;
using mlir::Value;

/// The layer of a module path: N of its first "<name>.<N>" component, with the container
/// name ("blocks"), or nullopt.
std::optional<std::pair<std::string, int64_t>> layerOf(llvm::StringRef path) {
  llvm::SmallVector<llvm::StringRef> parts;
  path.split(parts, '.');
  for (size_t i = 1; i < parts.size(); ++i) {
    int64_t n = 0;
    if (!parts[i].getAsInteger(10, n) && n >= 0) {
      std::string container = llvm::join(llvm::ArrayRef(parts).take_front(i), ".");
      return std::make_pair(container, n);
    }
  }
  return std::nullopt;
}

/// "0-5,6-11" -> {{0, 5}, {6, 11}}; empty on ""; nullopt on a malformed list.
std::optional<std::vector<std::pair<int64_t, int64_t>>> parseRanges(llvm::StringRef text) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (text.empty()) return ranges;
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',');
  for (llvm::StringRef item : items) {
    auto [a, b] = item.trim().split('-');
    int64_t first = 0, last = 0;
    if (a.trim().getAsInteger(10, first) || b.trim().getAsInteger(10, last)) return std::nullopt;
    ranges.emplace_back(first, last);
  }
  return ranges;
}

struct SplitStagesPass : impl::SplitStagesBase<SplitStagesPass> {
  using SplitStagesBase::SplitStagesBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto forward = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(forwardName);
    if (!forward) {
      module.emitError() << DEBUG_TYPE << ": no function @" << forwardName;
      return signalPassFailure();
    }
    if (mlir::failed(PipelineStage(module, forwardName)
                         .require(DEBUG_TYPE, forward, {}, {StageFact::TrainStep, StageFact::Fused},
                                  "once, on @forward before tessel-autodiff")))
      return signalPassFailure();
    if (pipelineInfo(forward)) {
      forward.emitError() << DEBUG_TYPE << ": @" << forwardName << " is already one pipeline stage";
      return signalPassFailure();
    }
    if (mlir::failed(split(module, forward))) signalPassFailure();
  }

  /// Where the plan's diagnostics point: the pipeline() call, or the function.
  mlir::Location site(mlir::func::FuncOp f) { return planSiteLocation(f.getContext(), planSite, f.getLoc()); }

  mlir::LogicalResult split(mlir::ModuleOp module, mlir::func::FuncOp f) {
    auto grid = findGrid(module, DEBUG_TYPE);
    if (mlir::failed(grid)) return mlir::failure();
    const int16_t axisIndex = grid->axis(axis);
    if (axisIndex < 0)
      return mlir::emitError(site(f)) << DEBUG_TYPE << ": the mesh has no axis '" << axis << "'";
    const int64_t p = grid->sizes[axisIndex];
    const int64_t v = virtualStages;
    if (stage < 0 || stage >= p)
      return mlir::emitError(site(f)) << DEBUG_TYPE << ": stage " << static_cast<int64_t>(stage)
                                      << " is outside the " << p << " stages of axis '" << axis << "'";
    mlir::Block& body = f.getBody().front();
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    std::optional<unsigned> lossIndex = findOutput(f, "loss");
    if (!lossIndex || ret.getNumOperands() != 1)
      return f.emitError() << DEBUG_TYPE << ": under pipeline parallelism @" << forwardName
                           << " must return the loss alone (it has " << ret.getNumOperands() << " results)";

    // 1. Free ops and layers.
    llvm::DenseSet<Operation*> free;
    llvm::DenseMap<Operation*, int64_t> layer;
    std::string container;
    int64_t current = 0, layers = 0;
    for (Operation& op : body.without_terminator()) {
      bool isFree = llvm::isa<ParamOp, ConstantOp>(op) ||
                    (op.getNumOperands() > 0 && !llvm::isa<SendOp, RecvOp>(op) &&
                     llvm::all_of(op.getOperands(), [&](Value x) {
                       Operation* d = x.getDefiningOp();
                       return d && free.contains(d);
                     }));
      if (isFree) {
        free.insert(&op);
        continue;
      }
      if (auto l = layerOf(modulePath(op.getLoc()))) {
        if (!container.empty() && container != l->first)
          return op.emitError() << DEBUG_TYPE << ": the model has layers in '" << container << "' and in '"
                                << l->first << "'; a pipeline cuts one sequence of layers";
        container = l->first;
        current = l->second;
        layers = std::max(layers, current + 1);
      }
      layer[&op] = current;
    }
    const int64_t chunks = p * v;
    if (layers == 0)
      return mlir::emitError(site(f)) << "the pipeline has " << chunks
                                      << " stages but the model has no layers to cut: a pipeline cuts a sequence of "
                                         "modules named <name>.<N> (such as blocks.0, blocks.1)";
    if (layers < chunks)
      return mlir::emitError(site(f)) << "the pipeline has " << chunks << " stages (" << axis << "=" << p
                                      << (v > 1 ? " x " + std::to_string(v) + " virtual stages" : std::string())
                                      << ") but the model has only " << layers << " layer" << (layers == 1 ? "" : "s")
                                      << (container.empty() ? "" : " ('" + container + ".N')")
                                      << "; each stage needs at least one";

    // 2. Layer -> chunk.
    auto given = parseRanges(layerRanges);
    if (!given)
      return mlir::emitError(site(f)) << DEBUG_TYPE << ": layer-ranges '" << layerRanges
                                      << "' is not a list of FIRST-LAST ranges";
    std::vector<int64_t> chunkOfLayer(static_cast<size_t>(layers), -1);
    if (!given->empty()) {
      if (static_cast<int64_t>(given->size()) != chunks)
        return mlir::emitError(site(f)) << "the stages list " << given->size() << " layer ranges but the pipeline has "
                                        << chunks << " stages";
      int64_t next = 0;
      for (auto [c, r] : llvm::enumerate(*given)) {
        if (r.first != next || r.second < r.first || r.second >= layers)
          return mlir::emitError(site(f)) << "the stages' layer ranges must cover layers 0-" << layers - 1
                                          << " in order, each range FIRST-LAST with FIRST <= LAST; range " << c
                                          << " is " << r.first << "-" << r.second
                                          << (r.first != next ? " (expected to start at " + std::to_string(next) + ")"
                                                              : std::string());
        for (int64_t l = r.first; l <= r.second; ++l) chunkOfLayer[static_cast<size_t>(l)] = static_cast<int64_t>(c);
        next = r.second + 1;
      }
      if (next != layers)
        return mlir::emitError(site(f)) << "the stages' layer ranges end at layer " << next - 1 << " but the model has "
                                        << layers << " layers";
    } else {
      std::vector<double> cost(static_cast<size_t>(layers), 0.0);
      for (auto& [op, l] : layer) cost[static_cast<size_t>(l)] += opCost(op);
      std::vector<int64_t> firsts = balanceLayers(cost, chunks);
      for (int64_t c = 0; c < chunks; ++c) {
        int64_t end = c + 1 < chunks ? firsts[static_cast<size_t>(c + 1)] : layers;
        for (int64_t l = firsts[static_cast<size_t>(c)]; l < end; ++l) chunkOfLayer[static_cast<size_t>(l)] = c;
      }
    }
    auto chunkOf = [&](Operation* op) { return chunkOfLayer[static_cast<size_t>(layer.lookup(op))]; };
    auto stageOf = [&](int64_t chunk) { return chunk % p; };

    // Which stages use each free op (directly or through other free ops), for tied
    // parameters; and the free ops to keep.
    llvm::DenseMap<Operation*, std::set<int64_t>> freeUsers;
    llvm::SmallVector<Operation*> ops;
    for (Operation& op : body.without_terminator()) ops.push_back(&op);
    for (Operation* op : llvm::reverse(ops)) {
      if (!free.contains(op)) continue;
      std::set<int64_t>& s = freeUsers[op];
      for (Value r : op->getResults())
        for (Operation* user : r.getUsers()) {
          if (user == ret) s.insert(stageOf(chunks - 1));
          else if (free.contains(user)) s.insert(freeUsers[user].begin(), freeUsers[user].end());
          else s.insert(stageOf(chunkOf(user)));
        }
    }

    // The values this stage receives, per source stage in the order the source sends them
    // (its program order, results in order): the channel between two ranks is FIFO, so the
    // recvs must come in this order too, not in the order of their first use here.
    std::map<int64_t, llvm::SmallVector<Value>> incoming;
    for (Operation* op : ops) {
      if (free.contains(op) || stageOf(chunkOf(op)) == stage) continue;
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation* user) {
              return user != ret && !free.contains(user) && layer.count(user) && stageOf(chunkOf(user)) == stage;
            }))
          incoming[stageOf(chunkOf(op))].push_back(r);
    }
    std::map<int64_t, size_t> nextIncoming;  // per source stage: the first value not yet received

    // 3. Rewrite in place: sends after producers, recvs before first users, then erase.
    mlir::OpBuilder b(f.getContext());
    auto axes = b.getDenseI16ArrayAttr({axisIndex});
    llvm::DenseMap<Value, Value> received;  // another stage's value -> its recv here
    llvm::SmallVector<Operation*> dead;
    for (Operation* op : ops) {
      if (free.contains(op)) {
        const std::set<int64_t>& users = freeUsers[op];
        if (!users.contains(stage)) dead.push_back(op);
        else if (auto param = llvm::dyn_cast<ParamOp>(op); param && users.size() > 1)
          setTiedStages(param, llvm::SmallVector<int64_t>(users.begin(), users.end()));
        continue;
      }
      const int64_t chunk = chunkOf(op);
      if (stageOf(chunk) != stage) {
        dead.push_back(op);
        continue;
      }
      setPipelineTag(op, PipelineTag::Chunk, chunk);
      setAction(op, /*backward=*/false);
      // Operands from another stage.
      for (mlir::OpOperand& use : op->getOpOperands()) {
        Operation* def = use.get().getDefiningOp();
        if (!def || free.contains(def) || stageOf(chunkOf(def)) == stage) continue;
        // Receive, in the source's send order, every value up to this one not yet received.
        const int64_t source = stageOf(chunkOf(def));
        llvm::SmallVector<Value>& queue = incoming[source];
        size_t& next = nextIncoming[source];
        while (!received.count(use.get()) && next < queue.size()) {
          Value v = queue[next++];
          b.setInsertionPoint(op);
          auto recv = RecvOp::create(b, v.getLoc(), v.getType(), b.getI64IntegerAttr(source), grid->ref, axes);
          setPipelineTag(recv, PipelineTag::Chunk, chunk);
          setAction(recv, false);
          received[v] = recv.getResult();
        }
        use.set(received.lookup(use.get()));
      }
      // Results another stage uses: one send per destination stage, right after the op.
      b.setInsertionPointAfter(op);
      for (Value r : op->getResults()) {
        std::set<int64_t> destinations;
        for (Operation* user : r.getUsers())
          if (user != ret && !free.contains(user) && layer.count(user) && stageOf(chunkOf(user)) != stage)
            destinations.insert(stageOf(chunkOf(user)));
        for (int64_t d : destinations) {
          auto send = SendOp::create(b, op->getLoc(), r, b.getI64IntegerAttr(d), grid->ref, axes);
          setPipelineTag(send, PipelineTag::Chunk, chunk);
          setAction(send, false);
        }
      }
    }
    // 4. The loss: this stage's if the last chunk is here, else 0; summed over the axis.
    Value loss = ret.getOperand(0);
    b.setInsertionPoint(ret);
    Operation* lossDef = loss.getDefiningOp();
    if (lossDef && !free.contains(lossDef) && stageOf(chunkOf(lossDef)) != stage)
      loss = ConstantOp::create(b, ret.getLoc(), loss.getType(), b.getF64FloatAttr(0.0));
    auto summed = AllReduceOp::create(b, ret.getLoc(), loss, ReduceKindAttr::get(f.getContext(), ReduceKind::sum), grid->ref, axes);
    ret.setOperand(0, summed.getResult());
    for (Operation* op : llvm::reverse(dead)) {
      if (!op->use_empty())  // only other stages' ops used it, erased before it
        return op->emitError() << DEBUG_TYPE << ": internal error: an op of another stage is still used here";
      op->erase();
    }
    setPipelineInfo(f, PipelineInfo{axis, stage, p, v, 0, ""});
    return mlir::success();
  }
};

}  // namespace
}  // namespace tessel
