// libFuzzer entry point: the safetensors header parser (runtime/io/SafeTensors.h
// parseSafeTensorsHeader) on arbitrary bytes taken as a whole file. Any input either parses
// or throws SafeTensorsError; a parsed header's tensor ranges must lie inside the file, in
// the data area, without overlap (what the checkpoint reader relies on before any pread).
#include "runtime/io/SafeTensors.h"

#include <cstdint>
#include <cstdlib>
#include <map>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel;
  SafeTensorsHeader header;
  try {
    header = parseSafeTensorsHeader(data, size, size, "fuzz.safetensors");
  } catch (const SafeTensorsError&) {
    return 0;
  }
  std::map<int64_t, int64_t> ranges;
  for (const auto& [name, info] : header.tensors) {
    if (info.begin < header.dataBegin || info.end < info.begin || info.end > header.fileSize) std::abort();
    ranges[info.begin] = info.end;
  }
  int64_t at = header.dataBegin;
  for (const auto& [begin, end] : ranges) {
    if (begin < at) std::abort();
    at = end;
  }
  return 0;
}
