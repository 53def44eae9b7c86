// Internal to runtime/io: what the safetensors reader (SafeTensors.cpp) and writer
// (SafeTensorsWrite.cpp) share.
#pragma once

#include "runtime/io/SafeTensors.h"

#include <string>

namespace tessel::detail {

/// Throws SafeTensorsError "<what>: tensor '<name>' ..." unless t's shape is valid (no negative
/// dimension, no int64 overflow) and t.bytes holds exactly dtypeSize x element-count bytes.
void checkTensor(const std::string& what, const std::string& name, const StTensor& t);

}  // namespace tessel::detail
