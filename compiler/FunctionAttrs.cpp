// Typed access to the tessel.* attributes of functions; see FunctionAttrs.h.
#include "compiler/FunctionAttrs.h"

#include "mlir/IR/Builders.h"

namespace tessel {

mlir::StringAttr inputName(mlir::func::FuncOp f, unsigned i) {
  return f.getArgAttrOfType<mlir::StringAttr>(i, kInputAttr);
}

mlir::StringAttr outputName(mlir::func::FuncOp f, unsigned i) {
  return f.getResultAttrOfType<mlir::StringAttr>(i, kOutputAttr);
}

mlir::StringAttr gradName(mlir::func::FuncOp f, unsigned i) {
  return f.getResultAttrOfType<mlir::StringAttr>(i, kGradAttr);
}

std::optional<unsigned> findOutput(mlir::func::FuncOp f, llvm::StringRef name) {
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (auto out = outputName(f, i); out && out.getValue() == name) return i;
  return std::nullopt;
}

llvm::DenseSet<mlir::Operation*> opsResultDependsOn(mlir::func::FuncOp f, unsigned i) {
  mlir::Block& body = f.getBody().front();
  llvm::DenseSet<mlir::Operation*> ops;
  llvm::DenseSet<mlir::Value> needed{body.getTerminator()->getOperand(i)};
  for (mlir::Operation& op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(), [&](mlir::Value r) { return needed.contains(r); })) {
      ops.insert(&op);
      for (mlir::Value v : op.getOperands()) needed.insert(v);
    }
  return ops;
}

void setInputName(mlir::func::FuncOp f, unsigned i, llvm::StringRef name) {
  f.setArgAttr(i, kInputAttr, mlir::StringAttr::get(f.getContext(), name));
}

void setOutputName(mlir::func::FuncOp f, unsigned i, llvm::StringRef name) {
  f.setResultAttr(i, kOutputAttr, mlir::StringAttr::get(f.getContext(), name));
}

namespace {
mlir::DictionaryAttr single(mlir::MLIRContext* context, llvm::StringRef attr,
                            llvm::StringRef value) {
  mlir::Builder b(context);
  return b.getDictionaryAttr(b.getNamedAttr(attr, b.getStringAttr(value)));
}
}  // namespace

mlir::DictionaryAttr inputAttrs(mlir::MLIRContext* context, llvm::StringRef name) {
  return single(context, kInputAttr, name);
}

mlir::DictionaryAttr outputAttrs(mlir::MLIRContext* context, llvm::StringRef name) {
  return single(context, kOutputAttr, name);
}

mlir::DictionaryAttr gradAttrs(mlir::MLIRContext* context, llvm::StringRef name) {
  return single(context, kGradAttr, name);
}

int64_t batchShards(mlir::func::FuncOp f) {
  auto n = f->getAttrOfType<mlir::IntegerAttr>(kBatchShardsAttr);
  return n ? n.getInt() : 0;
}

void setBatchShards(mlir::func::FuncOp f, int64_t shards) {
  f->setAttr(kBatchShardsAttr, mlir::Builder(f.getContext()).getI64IntegerAttr(shards));
}

bool isMixedPrecision(mlir::func::FuncOp f) { return f->hasAttr(kMixedPrecisionAttr); }

void setMixedPrecision(mlir::func::FuncOp f) {
  f->setAttr(kMixedPrecisionAttr, mlir::UnitAttr::get(f.getContext()));
}

bool isPartitioned(mlir::func::FuncOp f) {
  return f->hasAttr(TesselDialect::PartitionedAttrHelper::getNameStr());
}

void setPartitioned(mlir::func::FuncOp f) {
  f->setAttr(TesselDialect::PartitionedAttrHelper::getNameStr(), mlir::UnitAttr::get(f.getContext()));
}

}  // namespace tessel
