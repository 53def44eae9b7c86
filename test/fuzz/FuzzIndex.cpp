// libFuzzer entry point: parseIndex (runtime/ckpt/Index.h) on arbitrary bytes. The promise
// under test: any input either parses or throws CheckpointError; nothing else escapes (an
// uncaught exception aborts, which libFuzzer reports), and AddressSanitizer/UBSan find no
// out-of-bounds access, overflow or leak. A parsed index must serialize and parse back equal.
#include "runtime/ckpt/Index.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::ckpt;
  Index index;
  try {
    index = parseIndex(std::string(reinterpret_cast<const char*>(data), size), "fuzz/index.json");
  } catch (const CheckpointError&) {
    return 0;
  }
  if (!(parseIndex(serializeIndex(index), "fuzz/reserialized.json") == index)) std::abort();
  return 0;
}
