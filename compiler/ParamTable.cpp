// Function-wide checks of tessel.param and tessel.assign; see ParamTable.h.
#include "compiler/ParamTable.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace tessel {
namespace {

/// Whether `op` is the first op of type OpTy in the pre-order of `scope`. An op with an
/// earlier OpTy in its own block is not (found by walking back to it: linear in the block
/// over all OpTy ops of the block); otherwise the scope is walked up to its first OpTy,
/// which happens once per block that holds OpTy ops.
template <typename OpTy>
bool leadsScope(OpTy op, Operation* scope) {
  for (Operation* prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
    if (isa<OpTy>(prev)) return false;
  Operation* first = nullptr;
  scope->walk<WalkOrder::PreOrder>([&](OpTy other) {
    first = other;
    return WalkResult::interrupt();
  });
  return first == op.getOperation();
}

}  // namespace

LogicalResult verifyParamNamesUnique(ParamOp param) {
  Operation* scope = param->getParentWithTrait<OpTrait::IsIsolatedFromAbove>();
  if (!scope || !leadsScope(param, scope)) return success();
  llvm::DenseMap<StringAttr, ParamOp> firstByName;
  ParamOp duplicate, first;
  scope->walk<WalkOrder::PreOrder>([&](ParamOp p) {
    // Ops after the leader are not verified yet: one without its name attribute reports
    // that itself.
    StringAttr name = p.getNameAttr();
    if (!name) return WalkResult::advance();
    auto [it, inserted] = firstByName.try_emplace(name, p);
    if (inserted) return WalkResult::advance();
    duplicate = p;
    first = it->second;
    return WalkResult::interrupt();
  });
  if (!duplicate) return success();
  InFlightDiagnostic diag = duplicate.emitOpError()
                            << "parameter name \"" << duplicate.getName() << "\" is already used";
  diag.attachNote(first.getLoc()) << "first declared here";
  return diag;
}

LogicalResult verifyAssignTargets(AssignOp assign, Operation* func) {
  if (!leadsScope(assign, func)) return success();
  llvm::DenseMap<StringAttr, ParamOp> params;
  func->walk([&](ParamOp p) {
    if (StringAttr name = p.getNameAttr()) params.try_emplace(name, p);
  });
  LogicalResult result = success();
  func->walk([&](AssignOp a) {
    StringAttr name = a.getNameAttr();
    if (!name || a->getNumOperands() != 1) return WalkResult::advance();  // its own verifier reports it
    auto it = params.find(name);
    if (it == params.end()) {
      result = a.emitOpError() << "assigns \"" << name.getValue()
                               << "\", which no tessel.param in the function declares";
      return WalkResult::interrupt();
    }
    if (it->second.getType() != a.getValue().getType()) {
      result = a.emitOpError() << "value type " << a.getValue().getType() << " differs from \""
                               << name.getValue() << "\"'s type " << it->second.getType();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result;
}

}  // namespace tessel
