// Locations as text; see Location.h.
#include "compiler/Location.h"

#include "llvm/Support/raw_ostream.h"

namespace tessel {

std::string locationString(mlir::Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

}  // namespace tessel
