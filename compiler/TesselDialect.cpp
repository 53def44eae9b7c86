// The tessel dialect: registration, enum attributes, and the verification of its
// discardable attributes (declared in TesselDialect.td).
#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/TypeSwitch.h"

#include "compiler/TesselDialect.cpp.inc"
#include "compiler/TesselEnums.cpp.inc"
#include "compiler/TesselInterfaces.cpp.inc"

namespace tessel {


namespace {

/// Checks that `attr`, named `name`, is a non-empty string (the names that tessel.input,
/// tessel.output and tessel.grad carry).
mlir::LogicalResult verifyName(mlir::Operation* op, llvm::StringRef where,
                               mlir::NamedAttribute attr) {
  auto s = mlir::dyn_cast<mlir::StringAttr>(attr.getValue());
  if (!s || s.getValue().empty())
    return op->emitError() << "'" << attr.getName().getValue() << "' on " << where
                           << " must be a non-empty string, got " << attr.getValue();
  return mlir::success();
}

/// Checks `tessel.axis_names` on `grid`: an array of one non-empty string per grid axis,
/// no name twice.
mlir::LogicalResult verifyAxisNames(mlir::shard::GridOp grid, mlir::NamedAttribute attr) {
  auto names = mlir::dyn_cast<mlir::ArrayAttr>(attr.getValue());
  size_t rank = grid.getShape().size();
  if (!names || names.size() != rank ||
      !llvm::all_of(names, [](mlir::Attribute a) {
        auto s = mlir::dyn_cast<mlir::StringAttr>(a);
        return s && !s.getValue().empty();
      }))
    return grid.emitError() << "'" << attr.getName().getValue() << "' must name each of the "
                            << rank << " axes of the grid with a non-empty string, got "
                            << attr.getValue();
  llvm::SmallDenseSet<mlir::Attribute> seen;
  for (mlir::Attribute n : names)
    if (!seen.insert(n).second)
      return grid.emitError() << "'" << attr.getName().getValue() << "' names axis " << n
                              << " twice";
  return mlir::success();
}

/// Checks `tessel.shardings` on `op`: one #tessel.sharding per result, each with one entry
/// per dimension of that (ranked tensor) result.
mlir::LogicalResult verifyShardings(mlir::Operation* op, mlir::NamedAttribute attr) {
  auto list = mlir::dyn_cast<mlir::ArrayAttr>(attr.getValue());
  if (!list || list.size() != op->getNumResults())
    return op->emitError() << "'" << attr.getName().getValue() << "' must hold one "
                           << "#tessel.sharding per result (" << op->getNumResults()
                           << "), got " << attr.getValue();
  for (auto [i, a] : llvm::enumerate(list)) {
    auto sharding = mlir::dyn_cast<ShardingAttr>(a);
    auto type = mlir::dyn_cast<mlir::RankedTensorType>(op->getResult(i).getType());
    if (!sharding || !type)
      return op->emitError() << "'" << attr.getName().getValue() << "' entry #" << i
                             << " must be a #tessel.sharding of a ranked tensor, got " << a;
    if (static_cast<int64_t>(sharding.getSplitAxes().size()) != type.getRank())
      return op->emitError() << "sharding of result #" << i << " has "
                             << sharding.getSplitAxes().size() << " dimensions, the result "
                             << type.getRank();
  }
  return mlir::success();
}

/// The error for a `tessel.*` attribute that is not declared for this place.
mlir::LogicalResult misplaced(mlir::Operation* op, llvm::StringRef where,
                              mlir::NamedAttribute attr) {
  using D = TesselDialect;
  return op->emitError() << "'" << attr.getName().getValue()
                         << "' is not a tessel attribute of " << where << " (arguments take "
                         << D::InputAttrHelper::getNameStr() << "; results "
                         << D::OutputAttrHelper::getNameStr() << " and "
                         << D::GradAttrHelper::getNameStr() << "; functions "
                         << D::BatchShardsAttrHelper::getNameStr() << ", "
                         << D::MixedPrecisionAttrHelper::getNameStr() << ", "
                         << D::PartitionedAttrHelper::getNameStr() << " and "
                         << D::PipelineAttrHelper::getNameStr() << "; operations "
                         << D::ShardingsAttrHelper::getNameStr() << ", "
                         << D::PpChunkAttrHelper::getNameStr() << ", "
                         << D::PpMicrobatchAttrHelper::getNameStr() << ", "
                         << D::PpActionAttrHelper::getNameStr() << " and "
                         << D::PpGroupAttrHelper::getNameStr() << "; params and all-gathers "
                         << D::FsdpUnitAttrHelper::getNameStr() << "; params "
                         << D::PpStagesAttrHelper::getNameStr() << "; shard.grid "
                         << D::AxisNamesAttrHelper::getNameStr() << ")";
}

/// `tessel.pipeline`: a dictionary of i64 stage, stages, virtual_stages (and microbatches)
/// with 0 <= stage < stages, the pipeline axis's name, and an optional string schedule.
mlir::LogicalResult verifyPipelineAttr(mlir::Operation* op, mlir::NamedAttribute attr) {
  auto d = mlir::dyn_cast<mlir::DictionaryAttr>(attr.getValue());
  auto refuse = [&](const llvm::Twine& why) {
    return op->emitError() << "'" << attr.getName().getValue() << "' " << why << ", got " << attr.getValue();
  };
  if (!d) return refuse("must be a dictionary");
  auto i64 = [&](llvm::StringRef key) -> std::optional<int64_t> {
    auto n = d.getAs<mlir::IntegerAttr>(key);
    if (!n || !n.getType().isInteger(64)) return std::nullopt;
    return n.getInt();
  };
  for (mlir::NamedAttribute e : d) {
    llvm::StringRef k = e.getName().getValue();
    if (k == "schedule" || k == "axis" ? !mlir::isa<mlir::StringAttr>(e.getValue())
                        : (k != "stage" && k != "stages" && k != "virtual_stages" && k != "microbatches") || !i64(k))
      return refuse("has a key '" + k + "' that is not one of stage, stages, virtual_stages, microbatches "
                    "(i64), axis and schedule (strings), or of the wrong type");
  }
  auto stage = i64("stage"), stages = i64("stages"), virtualStages = i64("virtual_stages");
  if (!d.getAs<mlir::StringAttr>("axis")) return refuse("needs the pipeline axis's name, axis");
  if (!stage || !stages || !virtualStages || *stages < 1 || *virtualStages < 1 || *stage < 0 || *stage >= *stages)
    return refuse("needs i64 stage, stages and virtual_stages with 0 <= stage < stages and virtual_stages >= 1");
  if (auto m = i64("microbatches"); d.get("microbatches") && (!m || *m < 1))
    return refuse("needs microbatches >= 1");
  return mlir::success();
}

}  // namespace

mlir::LogicalResult TesselDialect::verifyOperationAttribute(mlir::Operation* op,
                                                            mlir::NamedAttribute attr) {
  llvm::StringRef name = attr.getName().getValue();
  bool function = mlir::isa<mlir::FunctionOpInterface>(op);
  if (name == BatchShardsAttrHelper::getNameStr() && function) {
    auto n = mlir::dyn_cast<mlir::IntegerAttr>(attr.getValue());
    if (!n || !n.getType().isInteger(64) || n.getInt() < 1)
      return op->emitError() << "'" << name << "' must be an i64 >= 1, got " << attr.getValue();
    return mlir::success();
  }
  if ((name == MixedPrecisionAttrHelper::getNameStr() ||
       name == PartitionedAttrHelper::getNameStr()) && function) {
    if (!mlir::isa<mlir::UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' is a unit attribute, got " << attr.getValue();
    return mlir::success();
  }
  if (name == AxisNamesAttrHelper::getNameStr()) {
    if (auto grid = mlir::dyn_cast<mlir::shard::GridOp>(op)) return verifyAxisNames(grid, attr);
  }
  if (name == ShardingsAttrHelper::getNameStr() && !function) return verifyShardings(op, attr);
  if (name == FsdpUnitAttrHelper::getNameStr() && mlir::isa<ParamOp, AllGatherOp, AllGatherStartOp, AllGatherWaitOp>(op)) {
    if (!mlir::isa<mlir::StringAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a string (a module path, \"\" for the root unit), got "
                             << attr.getValue();
    return mlir::success();
  }
  if (name == PipelineAttrHelper::getNameStr() && function) return verifyPipelineAttr(op, attr);
  if ((name == PpChunkAttrHelper::getNameStr() || name == PpMicrobatchAttrHelper::getNameStr() ||
       name == PpGroupAttrHelper::getNameStr()) && !function) {
    auto n = mlir::dyn_cast<mlir::IntegerAttr>(attr.getValue());
    if (!n || !n.getType().isInteger(64) || n.getInt() < 0)
      return op->emitError() << "'" << name << "' must be an i64 >= 0, got " << attr.getValue();
    return mlir::success();
  }
  if (name == PpActionAttrHelper::getNameStr() && !function) {
    auto s = mlir::dyn_cast<mlir::StringAttr>(attr.getValue());
    if (!s || (s.getValue() != "F" && s.getValue() != "B" && s.getValue() != "I" && s.getValue() != "W"))
      return op->emitError() << "'" << name << "' must be \"F\", \"B\", \"I\" or \"W\", got " << attr.getValue();
    return mlir::success();
  }
  if (name == PpStagesAttrHelper::getNameStr() && mlir::isa<ParamOp>(op)) {
    auto a = mlir::dyn_cast<mlir::DenseI64ArrayAttr>(attr.getValue());
    if (!a || a.size() < 2 || !llvm::is_sorted(a.asArrayRef()) || a.asArrayRef().front() < 0)
      return op->emitError() << "'" << name << "' must list at least two stages >= 0, ascending, got "
                             << attr.getValue();
    return mlir::success();
  }
  return misplaced(op, function ? "a function" : "an operation", attr);
}

mlir::LogicalResult TesselDialect::verifyRegionArgAttribute(mlir::Operation* op, unsigned,
                                                            unsigned, mlir::NamedAttribute attr) {
  if (attr.getName().getValue() == InputAttrHelper::getNameStr())
    return verifyName(op, "an argument", attr);
  return misplaced(op, "an argument", attr);
}

mlir::LogicalResult TesselDialect::verifyRegionResultAttribute(mlir::Operation* op, unsigned,
                                                               unsigned,
                                                               mlir::NamedAttribute attr) {
  llvm::StringRef name = attr.getName().getValue();
  if (name == OutputAttrHelper::getNameStr() || name == GradAttrHelper::getNameStr())
    return verifyName(op, "a result", attr);
  return misplaced(op, "a result", attr);
}

void registerTesselDialects(mlir::DialectRegistry& registry) {
  registry.insert<TesselDialect, mlir::func::FuncDialect, mlir::shard::ShardDialect,
                  mlir::tensor::TensorDialect, mlir::arith::ArithDialect>();
}

}  // namespace tessel
