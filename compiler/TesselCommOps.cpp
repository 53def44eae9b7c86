// Verifiers and result types of the collective ops (TesselCommOps.td).
#include "compiler/TesselDialect.h"

using namespace mlir;

namespace tessel {

LogicalResult AllReduceStartOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                 ValueRange operands, DictionaryAttr,
                                                 OpaqueProperties, RegionRange,
                                                 llvm::SmallVectorImpl<Type>& types) {
  for (Value v : operands) types.push_back(v.getType());
  return success();
}

LogicalResult AllReduceWaitOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                ValueRange operands, DictionaryAttr,
                                                OpaqueProperties, RegionRange,
                                                llvm::SmallVectorImpl<Type>& types) {
  for (Value v : operands) types.push_back(v.getType());
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  if (getInputs().empty()) return emitOpError() << "needs at least one input";
  if (getAxis().empty()) return emitOpError() << "axis must not be empty";
  int64_t group = static_cast<int64_t>(getGroupSize()), bucket = static_cast<int64_t>(getBucket());
  if (group < 1) return emitOpError() << "group must be >= 1, got " << group;
  if (bucket < 0) return emitOpError() << "bucket must be >= 0, got " << bucket;
  if (getParams().size() != getInputs().size())
    return emitOpError() << "names " << getParams().size() << " params for "
                         << getInputs().size() << " inputs";
  // Every in-flight value goes to one wait, which takes all of them in order.
  Operation* wait = nullptr;
  for (Value r : getInFlight())
    for (Operation* user : r.getUsers()) {
      if (!isa<AllReduceWaitOp>(user))
        return emitOpError() << "in-flight result used by '" << user->getName()
                             << "'; only tessel.all_reduce_wait may use it";
      if (wait && wait != user)
        return emitOpError() << "in-flight results go to more than one tessel.all_reduce_wait";
      wait = user;
    }
  // A collective that is never waited for would be left in flight (and its results unused):
  // every rank must complete what it starts.
  if (!wait)
    return emitOpError() << "bucket " << getBucket()
                         << " is never waited for: its in-flight results need a "
                            "tessel.all_reduce_wait";
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  if (getInFlight().empty()) return emitOpError() << "needs at least one operand";
  auto start = getInFlight().front().getDefiningOp<AllReduceStartOp>();
  if (!start) return emitOpError() << "operand #0 is not a result of tessel.all_reduce_start";
  if (start.getInFlight().size() != getInFlight().size())
    return emitOpError() << "waits for " << getInFlight().size() << " of the "
                         << start.getInFlight().size() << " tensors of bucket "
                         << start.getBucket() << "; it must wait for all of them";
  for (auto [i, v] : llvm::enumerate(getInFlight()))
    if (v != start.getInFlight()[i])
      return emitOpError() << "operand #" << i << " is not result #" << i
                           << " of the same tessel.all_reduce_start";
  if (start->getBlock() == (*this)->getBlock() && !start->isBeforeInBlock(*this))
    return emitOpError() << "waits before its tessel.all_reduce_start";
  return success();
}

}  // namespace tessel
