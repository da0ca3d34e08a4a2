// libFuzzer target for the safetensors parser: any input must parse or fail cleanly, and every
// tensor view must lie inside the input (touching its first and last byte lets ASan catch an
// out-of-bounds view). Parsed from memory, as SafeTensorsFile does after mapping a file.
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = splash::parse_safetensors(std::span<const uint8_t>(data, size), "fuzz");
  if (!h.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& t : h->tensors) {
    if (t.data.empty()) continue;
    sink = sink ^ t.data.front() ^ t.data.back();
  }
  for (const auto& [k, v] : h->metadata) sink = sink ^ static_cast<uint8_t>(k.size() + v.size());
  (void)sink;
  return 0;
}
