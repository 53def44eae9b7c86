// Declarations of every Tessel pass (generated from passes/Passes.td) and their
// registration with the MLIR pass registry (so tessel-opt and --pass-pipeline see them).
#pragma once

#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"

namespace tessel {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

}  // namespace tessel
