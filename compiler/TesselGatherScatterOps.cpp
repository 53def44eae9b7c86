// Verifiers of the collectives that move shards (TesselGatherScatterOps.td) and of their local
// counterpart tessel.dynamic_slice (TesselSliceOps.td): the grid
// reference (verifyGridAxes), the shape rule of each op (compiler/Shapes.h) against the
// declared result type, and the pairing of each asynchronous start with its wait.
#include "compiler/Shapes.h"
#include "compiler/TesselDialect.h"

#include <algorithm>
#include <functional>

using namespace mlir;

namespace tessel {
namespace {

shapes::Shape shapeOf(Value v) {
  auto shape = cast<RankedTensorType>(v.getType()).getShape();
  return {shape.begin(), shape.end()};
}

/// Checks `op`'s grid reference, then that its result has the shape `rule` gives for its
/// input over the group, or, for a gather (`trimAxis` >= 0), that shape with the padding of
/// an uneven dimension trimmed along `trimAxis` (shapes::isTrimmedGather); the error names
/// the input, the group size and both shapes.
LogicalResult verifyCollectiveShape(
    Operation* op, FlatSymbolRefAttr grid, ArrayRef<int16_t> axes,
    const std::function<shapes::Result(shapes::ShapeRef, int64_t)>& rule, int64_t trimAxis = -1) {
  if (failed(verifyGridAxes(op, grid, axes))) return failure();
  int64_t group = gridGroupSize(op, grid, axes);
  shapes::Shape in = shapeOf(op->getOperand(0)), out = shapeOf(op->getResult(0));
  shapes::Result want = rule(in, group);
  if (!want.ok()) return op->emitOpError() << want.error;
  if (trimAxis >= 0 && shapes::isTrimmedGather(want.shape, out, trimAxis, group)) return success();
  if (want.shape != out)
    return op->emitOpError() << "result is " << shapes::str(out) << ", but the input "
                             << shapes::str(in) << " over a group of " << group
                             << " ranks gives " << shapes::str(want.shape);
  return success();
}

/// Checks that the in-flight result of the start op `start` is used by exactly one `WaitOp`.
template <typename WaitOp>
LogicalResult verifyWaitedFor(Operation* start) {
  Value inFlight = start->getResult(0);
  StringRef wait = WaitOp::getOperationName();
  for (Operation* user : inFlight.getUsers())
    if (!isa<WaitOp>(user))
      return start->emitOpError() << "in-flight result used by '" << user->getName()
                                  << "'; only " << wait << " may use it";
  // A collective that is never waited for would be left in flight: every rank must complete
  // what it starts. Two waits would complete it twice.
  if (inFlight.use_empty())
    return start->emitOpError() << "is never waited for: its in-flight result needs a " << wait;
  if (!inFlight.hasOneUse())
    return start->emitOpError() << "in-flight result goes to more than one " << wait;
  return success();
}

/// Checks that the wait `wait` waits for a `StartOp` that comes before it.
template <typename StartOp>
LogicalResult verifyWait(Operation* wait) {
  auto start = wait->getOperand(0).getDefiningOp<StartOp>();
  if (!start)
    return wait->emitOpError() << "operand is not the result of a " << StartOp::getOperationName();
  if (start->getBlock() == wait->getBlock() && !start->isBeforeInBlock(wait))
    return wait->emitOpError() << "waits before its " << StartOp::getOperationName();
  return success();
}

/// The shape rules, bound to each op's attributes.
auto gatherRule(int64_t axis) {
  return [axis](shapes::ShapeRef in, int64_t group) { return shapes::allGather(in, axis, group); };
}

auto scatterRule(int64_t axis) {
  return [axis](shapes::ShapeRef in, int64_t group) {
    return shapes::reduceScatter(in, axis, group);
  };
}

auto allToAllRule(int64_t split, int64_t concat) {
  return [split, concat](shapes::ShapeRef in, int64_t group) {
    return shapes::allToAll(in, split, concat, group);
  };
}

/// reduce_scatter computes sum and avg only (see its description).
LogicalResult verifyScatterReduce(Operation* op, ReduceKind reduce) {
  if (reduce == ReduceKind::max)
    return op->emitOpError() << "reduce max is not supported (the runtime has no max "
                                "collective and a max has no VJP); use sum or avg";
  return success();
}

}  // namespace

LogicalResult AllGatherOp::verify() {
  return verifyCollectiveShape(*this, getGridAttr(), getGridAxes(), gatherRule(getGatherAxis()),
                               getGatherAxis());
}

LogicalResult AllGatherStartOp::verify() {
  if (failed(verifyCollectiveShape(*this, getGridAttr(), getGridAxes(),
                                   gatherRule(getGatherAxis()), getGatherAxis())))
    return failure();
  return verifyWaitedFor<AllGatherWaitOp>(*this);
}

LogicalResult AllGatherWaitOp::verify() { return verifyWait<AllGatherStartOp>(*this); }

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyScatterReduce(*this, getReduce()))) return failure();
  return verifyCollectiveShape(*this, getGridAttr(), getGridAxes(),
                               scatterRule(getScatterAxis()));
}

LogicalResult ReduceScatterStartOp::verify() {
  if (failed(verifyScatterReduce(*this, getReduce())) ||
      failed(verifyCollectiveShape(*this, getGridAttr(), getGridAxes(),
                                   scatterRule(getScatterAxis()))))
    return failure();
  return verifyWaitedFor<ReduceScatterWaitOp>(*this);
}

LogicalResult ReduceScatterWaitOp::verify() { return verifyWait<ReduceScatterStartOp>(*this); }

LogicalResult AllToAllOp::verify() {
  return verifyCollectiveShape(*this, getGridAttr(), getGridAxes(),
                               allToAllRule(getSplitAxis(), getConcatAxis()));
}

LogicalResult AllToAllStartOp::verify() {
  if (failed(verifyCollectiveShape(*this, getGridAttr(), getGridAxes(),
                                   allToAllRule(getSplitAxis(), getConcatAxis()))))
    return failure();
  return verifyWaitedFor<AllToAllWaitOp>(*this);
}

LogicalResult AllToAllWaitOp::verify() { return verifyWait<AllToAllStartOp>(*this); }

// The local inverse of an all-gather along dimension 0 (TesselSliceOps.td): a block of rows.
LogicalResult DynamicSliceOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType() << " differs from the input's "
                         << in.getElementType();
  shapes::Shape a = shapeOf(getInput()), b = shapeOf(getResult());
  if (a.empty() || a.size() != b.size() || !std::equal(a.begin() + 1, a.end(), b.begin() + 1) || b[0] < 1 ||
      b[0] > a[0])
    return emitOpError() << "result " << shapes::str(b) << " is not a block of rows of the input " << shapes::str(a)
                         << " (same rank >= 1, same dimensions after the first, 1 to " << (a.empty() ? 0 : a[0])
                         << " rows)";
  return success();
}

}  // namespace tessel
