// libFuzzer target for the GGUF reader: any input must parse or fail cleanly, and every tensor view
// the reader hands out must lie inside the input (touching its first and last byte lets ASan catch
// an out-of-bounds view).
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = splash::gguf::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz");
  if (!f.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& t : f->tensors()) {
    if (t.n_bytes == 0) continue;
    sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
  }
  for (const auto& k : f->keys()) {
    const auto* v = f->find(k);
    if (v && v->is_array()) sink = sink ^ static_cast<uint8_t>(v->array_size());
    (void)f->get_string(k);
    (void)f->get_i32_array(k);
  }
  (void)sink;
  return 0;
}
