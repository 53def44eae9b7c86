// The function-wide invariants of tessel.param and tessel.assign: parameter names are unique
// in their function, and every assignment names a parameter of the same function with the
// value's type.
//
// Promise: checking them costs time linear in the size of the function, once per
// verification, not once per op. A per-op verifier that searched the function for its
// partner made verification quadratic in depth (a GPT with L blocks has O(L) parameters and
// as many assignments, and the function is verified after every pass). Here only one op of
// each kind, the scope's leader (the first of its kind in pre-order), walks the function
// and checks every op of that kind; the others only find out that they do not lead, by
// walking back to the previous op of their kind in their block (those walks cover each
// block once in total).
#pragma once

#include "compiler/TesselDialect.h"

namespace tessel {

/// Called by ParamOp::verify. If `param` leads its isolated-from-above scope, reports the
/// first reuse of a parameter name in the scope ("parameter name "X" is already used", at
/// the later op, with a note at the first). Success for every other op, and for a param
/// with no isolated ancestor.
mlir::LogicalResult verifyParamNamesUnique(ParamOp param);

/// Called by AssignOp::verify with its function. If `assign` leads `func`, reports the first
/// tessel.assign in `func` that names no tessel.param of `func`, or whose value type differs
/// from that parameter's. Success for every other op.
mlir::LogicalResult verifyAssignTargets(AssignOp assign, mlir::Operation* func);

}  // namespace tessel
