// Locations as text; see Location.h.
#include "compiler/Location.h"

#include "mlir/IR/BuiltinAttributes.h"
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

llvm::StringRef modulePath(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc)) return name.getName().getValue();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location l : fused.getLocations())
      if (llvm::StringRef p = modulePath(l); !p.empty()) return p;
  if (auto call = mlir::dyn_cast<mlir::CallSiteLoc>(loc)) return modulePath(call.getCallee());
  return "";
}

}  // namespace tessel
