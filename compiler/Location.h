// Locations as text: one line, e.g. loc("blocks.0.attn.qkv"("model.h":45:46)), for error
// messages, kernel header comments and step records.
#pragma once

#include "mlir/IR/Location.h"

#include <string>

namespace tessel {

/// `loc` printed by MLIR on a single line (any newline becomes a space).
std::string locationString(mlir::Location loc);

/// The module path a location carries (the name of its NameLoc, e.g. "blocks.0.attn.qkv",
/// looking through fused and call-site locations), or "" for an op outside every module.
llvm::StringRef modulePath(mlir::Location loc);

}  // namespace tessel
