// Typed access to the pipeline attributes; see PipelineAttrs.h.
#include "compiler/PipelineAttrs.h"

#include "mlir/IR/Builders.h"

namespace tessel {

namespace {

llvm::StringRef tagName(PipelineTag tag) {
  switch (tag) {
    case PipelineTag::Chunk: return TesselDialect::PpChunkAttrHelper::getNameStr();
    case PipelineTag::Microbatch: return TesselDialect::PpMicrobatchAttrHelper::getNameStr();
    case PipelineTag::Group: return TesselDialect::PpGroupAttrHelper::getNameStr();
  }
  return {};
}

}  // namespace

std::optional<PipelineInfo> pipelineInfo(mlir::func::FuncOp f) {
  auto d = f->getAttrOfType<mlir::DictionaryAttr>(TesselDialect::PipelineAttrHelper::getNameStr());
  if (!d) return std::nullopt;
  auto i64 = [&](llvm::StringRef key, int64_t fallback) {
    auto n = d.getAs<mlir::IntegerAttr>(key);
    return n ? n.getInt() : fallback;
  };
  PipelineInfo info;
  if (auto a = d.getAs<mlir::StringAttr>("axis")) info.axis = a.str();
  info.stage = i64("stage", 0);
  info.stages = i64("stages", 1);
  info.virtualStages = i64("virtual_stages", 1);
  info.microbatches = i64("microbatches", 0);
  if (auto s = d.getAs<mlir::StringAttr>("schedule")) info.schedule = s.str();
  return info;
}

void setPipelineInfo(mlir::func::FuncOp f, const PipelineInfo& info) {
  mlir::Builder b(f.getContext());
  llvm::SmallVector<mlir::NamedAttribute> entries{
      b.getNamedAttr("axis", b.getStringAttr(info.axis)),
      b.getNamedAttr("stage", b.getI64IntegerAttr(info.stage)),
      b.getNamedAttr("stages", b.getI64IntegerAttr(info.stages)),
      b.getNamedAttr("virtual_stages", b.getI64IntegerAttr(info.virtualStages))};
  if (info.microbatches > 0) entries.push_back(b.getNamedAttr("microbatches", b.getI64IntegerAttr(info.microbatches)));
  if (!info.schedule.empty()) entries.push_back(b.getNamedAttr("schedule", b.getStringAttr(info.schedule)));
  f->setAttr(TesselDialect::PipelineAttrHelper::getNameStr(), b.getDictionaryAttr(entries));
}

std::optional<int64_t> pipelineTag(mlir::Operation* op, PipelineTag tag) {
  if (auto n = op->getAttrOfType<mlir::IntegerAttr>(tagName(tag))) return n.getInt();
  return std::nullopt;
}

void setPipelineTag(mlir::Operation* op, PipelineTag tag, int64_t value) {
  op->setAttr(tagName(tag), mlir::Builder(op->getContext()).getI64IntegerAttr(value));
}

llvm::StringRef actionLetter(mlir::Operation* op) {
  auto s = op->getAttrOfType<mlir::StringAttr>(TesselDialect::PpActionAttrHelper::getNameStr());
  return s ? s.getValue() : llvm::StringRef();
}

bool isBackwardAction(mlir::Operation* op) {
  llvm::StringRef a = actionLetter(op);
  return a == "B" || a == "I" || a == "W";
}

void setBackwardPart(mlir::Operation* op, bool input) {
  op->setAttr(TesselDialect::PpActionAttrHelper::getNameStr(),
              mlir::Builder(op->getContext()).getStringAttr(input ? "I" : "W"));
}

void setAction(mlir::Operation* op, bool backward) {
  op->setAttr(TesselDialect::PpActionAttrHelper::getNameStr(),
              mlir::Builder(op->getContext()).getStringAttr(backward ? "B" : "F"));
}

llvm::SmallVector<int64_t> tiedStages(ParamOp param) {
  auto a = param->getAttrOfType<mlir::DenseI64ArrayAttr>(TesselDialect::PpStagesAttrHelper::getNameStr());
  return a ? llvm::SmallVector<int64_t>(a.asArrayRef()) : llvm::SmallVector<int64_t>{};
}

void setTiedStages(ParamOp param, llvm::ArrayRef<int64_t> stages) {
  param->setAttr(TesselDialect::PpStagesAttrHelper::getNameStr(),
                 mlir::Builder(param->getContext()).getDenseI64ArrayAttr(stages));
}

void copyPipelineTags(mlir::Operation* from, mlir::Operation* to) {
  for (llvm::StringRef name : {TesselDialect::PpChunkAttrHelper::getNameStr(),
                               TesselDialect::PpMicrobatchAttrHelper::getNameStr(),
                               TesselDialect::PpActionAttrHelper::getNameStr()})
    if (mlir::Attribute a = from->getAttr(name)) to->setAttr(name, a);
}

}  // namespace tessel
