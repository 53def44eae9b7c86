// Locations as text: one line, e.g. loc("blocks.0.attn.qkv"("model.h":45:46)), for error
// messages, kernel header comments and step records.
#pragma once

#include "mlir/IR/Location.h"

#include <string>

namespace tessel {

/// `loc` printed by MLIR on a single line (any newline becomes a space).
std::string locationString(mlir::Location loc);

}  // namespace tessel
