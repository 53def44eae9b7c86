// Verifiers of the point-to-point ops of pipeline parallelism (TesselPipelineOps.td).
#include "compiler/TesselDialect.h"

using namespace mlir;

namespace tessel {

namespace {

/// One grid axis, and a peer coordinate inside it.
LogicalResult verifyPeer(Operation* op, FlatSymbolRefAttr grid, ArrayRef<int16_t> axes, int64_t peer) {
  if (failed(verifyGridAxes(op, grid, axes))) return failure();
  if (axes.size() != 1)
    return op->emitOpError() << "names " << axes.size()
                             << " grid axes; a pipeline transfer runs along exactly one (the pipeline axis)";
  const int64_t size = gridGroupSize(op, grid, axes);
  if (peer < 0 || peer >= size)
    return op->emitOpError() << "peer " << peer << " is outside the pipeline axis of " << size << " stages";
  return success();
}

}  // namespace

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getGridAttr(), getGridAxes(), static_cast<int64_t>(getPeer()));
}

LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getGridAttr(), getGridAxes(), static_cast<int64_t>(getPeer()));
}

}  // namespace tessel
