// The dialect's attributes (TesselDialect.td): the generated definitions of the enum
// attributes and of #tessel.sharding, and #tessel.sharding's syntax, invariants and queries:
//
//   #tessel.sharding<@mesh, [[1], []], blocks = [3, 1], partial = [1], padding = [0, 0]>
//
// `blocks`, `partial` and `padding` are printed only when they say something (a block count
// other than 1, a partial axis, a padded dimension).
#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/DialectImplementation.h"

#include "llvm/ADT/TypeSwitch.h"

#define GET_ATTRDEF_CLASSES
#include "compiler/TesselAttrs.cpp.inc"

using namespace mlir;

namespace tessel {

// Here rather than in TesselDialect.cpp: registering attributes needs their storage classes,
// which only this file defines.
void TesselDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "compiler/TesselOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "compiler/TesselAttrs.cpp.inc"
      >();
}

ShardingAttr ShardingAttr::replicated(MLIRContext* ctx, FlatSymbolRefAttr grid, int64_t rank) {
  SmallVector<shard::GridAxesAttr> dims(rank, DenseI16ArrayAttr::get(ctx, {}));
  return ShardingAttr::get(ctx, grid, shard::GridAxesArrayAttr::get(ctx, dims), {}, {}, {});
}

ArrayRef<int16_t> ShardingAttr::axesOf(int64_t dim) const {
  return getSplitAxes().getAxes()[dim].asArrayRef();
}

int64_t ShardingAttr::blocksOf(int64_t dim) const {
  return getBlocks().empty() ? 1 : getBlocks()[dim];
}

int64_t ShardingAttr::paddingOf(int64_t dim) const {
  return getPadding().empty() ? 0 : getPadding()[dim];
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr grid, shard::GridAxesArrayAttr splitAxes,
                                   ArrayRef<int64_t> blocks, ArrayRef<int16_t> partialAxes,
                                   ArrayRef<int64_t> padding) {
  if (!grid) return emitError() << "a sharding needs a grid";
  if (!blocks.empty() && blocks.size() != splitAxes.size())
    return emitError() << "blocks has " << blocks.size() << " entries for " << splitAxes.size()
                       << " dimensions";
  for (int64_t b : blocks)
    if (b < 1) return emitError() << "blocks must be >= 1, got " << b;
  if (!padding.empty() && padding.size() != splitAxes.size())
    return emitError() << "padding has " << padding.size() << " entries for " << splitAxes.size()
                       << " dimensions";
  for (auto [d, pad] : llvm::enumerate(padding)) {
    if (pad < 0) return emitError() << "padding must be >= 0, got " << pad;
    if (pad == 0) continue;
    if (splitAxes.getAxes()[d].empty())
      return emitError() << "dimension " << d << " is padded but not split";
    if (!blocks.empty() && blocks[d] != 1)
      return emitError() << "dimension " << d << " is padded and made of " << blocks[d]
                         << " blocks; only an unblocked dimension is padded";
  }
  // One axis splits a tensor once: twice (on two dimensions, or partial and split) would
  // leave some ranks with no part of it.
  llvm::SmallDenseSet<int16_t> seen;
  auto once = [&](int16_t axis) -> LogicalResult {
    if (axis < 0) return emitError() << "grid axis " << axis << " is negative";
    if (!seen.insert(axis).second)
      return emitError() << "grid axis " << axis << " is used twice in one sharding";
    return success();
  };
  for (shard::GridAxesAttr d : splitAxes.getAxes())
    for (int16_t a : d.asArrayRef())
      if (failed(once(a))) return failure();
  for (int16_t a : partialAxes)
    if (failed(once(a))) return failure();
  return success();
}

namespace {

/// Parses `[a, b, ...]` of integers into `out`.
template <typename T>
ParseResult parseIntList(AsmParser& p, SmallVectorImpl<T>& out) {
  return p.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
    int64_t v;
    if (p.parseInteger(v)) return failure();
    out.push_back(static_cast<T>(v));
    return success();
  });
}

template <typename T>
void printIntList(AsmPrinter& p, ArrayRef<T> values) {
  p << '[';
  llvm::interleaveComma(values, p, [&](T v) { p << static_cast<int64_t>(v); });
  p << ']';
}

}  // namespace

Attribute ShardingAttr::parse(AsmParser& p, Type) {
  MLIRContext* ctx = p.getContext();
  FlatSymbolRefAttr grid;
  SmallVector<shard::GridAxesAttr> dims;
  SmallVector<int64_t> blocks;
  SmallVector<int16_t> partial;
  SmallVector<int64_t> padding;
  if (p.parseLess() || p.parseAttribute(grid) || p.parseComma() ||
      p.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        SmallVector<int16_t> axes;
        if (parseIntList(p, axes)) return failure();
        dims.push_back(DenseI16ArrayAttr::get(ctx, axes));
        return success();
      }))
    return {};
  while (succeeded(p.parseOptionalComma())) {
    StringRef key;
    if (p.parseKeyword(&key) || p.parseEqual()) return {};
    if (key == "blocks") {
      if (parseIntList(p, blocks)) return {};
    } else if (key == "partial") {
      if (parseIntList(p, partial)) return {};
    } else if (key == "padding") {
      if (parseIntList(p, padding)) return {};
    } else {
      p.emitError(p.getCurrentLocation(), "expected 'blocks', 'partial' or 'padding', got '")
          << key << "'";
      return {};
    }
  }
  if (p.parseGreater()) return {};
  if (llvm::all_of(blocks, [](int64_t b) { return b == 1; })) blocks.clear();
  if (llvm::all_of(padding, [](int64_t n) { return n == 0; })) padding.clear();
  return getChecked([&] { return p.emitError(p.getNameLoc()); }, ctx, grid,
                    shard::GridAxesArrayAttr::get(ctx, dims), blocks, partial, padding);
}

void ShardingAttr::print(AsmPrinter& p) const {
  p << '<' << getGrid() << ", [";
  llvm::interleaveComma(getSplitAxes().getAxes(), p,
                        [&](shard::GridAxesAttr d) { printIntList(p, d.asArrayRef()); });
  p << ']';
  if (llvm::any_of(getBlocks(), [](int64_t b) { return b != 1; })) {
    p << ", blocks = ";
    printIntList(p, getBlocks());
  }
  if (!getPartialAxes().empty()) {
    p << ", partial = ";
    printIntList(p, getPartialAxes());
  }
  if (llvm::any_of(getPadding(), [](int64_t n) { return n != 0; })) {
    p << ", padding = ";
    printIntList(p, getPadding());
  }
  p << '>';
}

}  // namespace tessel
