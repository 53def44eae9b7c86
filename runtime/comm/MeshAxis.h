// One named axis of a device mesh: shared by the program format (runtime/exec/Program.h, the
// plan's mesh a program was compiled for) and the communicators (runtime/comm/DeviceMesh.h),
// so that neither needs the other.
#pragma once

#include <string>

namespace tessel::rt {

/// One mesh axis: its name ("dp", "tp", ...) and its number of ranks (>= 1).
struct MeshAxis {
  std::string name;
  int size = 1;
  bool operator==(const MeshAxis&) const = default;
};

}  // namespace tessel::rt
