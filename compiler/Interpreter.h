// The reference interpreter: runs a tessel function op by op on the f64 reference kernels
// (runtime/reference). It is the oracle that codegen, autodiff and sharding are checked
// against, and, until codegen exists, how the examples compute their forward loss.
#pragma once

#include "runtime/reference/Reference.h"
#include "runtime/reference/ReferenceGrad.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel {

/// Thrown when a function cannot be interpreted: a missing or mis-shaped parameter, an
/// argument of the wrong shape, an op the interpreter does not know, or an out-of-range
/// index. what() names the op and its source location.
struct InterpreterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parameter values by name ("blocks.0.attn.qkv.weight"), each with its declared shape.
using ParameterMap = std::map<std::string, ref::Tensor>;

/// Called with every op and its result values as they are computed.
using Observer = std::function<void(mlir::Operation*, const std::vector<ref::Tensor>&)>;

/// Runs `func` on `args` (one per function argument, shapes checked) with `params` supplying
/// every tessel.param (parameters and optimizer state), and returns the values of its
/// `func.return`. Values written by tessel.assign go to `*assigned` (required when the
/// function assigns); they take effect only when the caller copies them into `params`, which
/// matches the op's semantics (reads see the values from before the call).
std::vector<ref::Tensor> interpret(mlir::func::FuncOp func, const ParameterMap& params,
                                   const std::vector<ref::Tensor>& args,
                                   const Observer& observe = {}, ParameterMap* assigned = nullptr);

}  // namespace tessel
