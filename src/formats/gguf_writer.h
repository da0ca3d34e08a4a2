// GGUF writer (version 3, little-endian). Metadata of every GGUF type, tensors given as owned bytes,
// borrowed spans, or a producer callback that streams the bytes at write time, so a multi-GB model is
// never held twice in memory. `write` goes to `path.tmp-<pid>` and renames, so readers never see a
// partial file.
//
// Not thread-safe; one writer per output file. Borrowed spans must stay valid until `write` returns.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "core/byte_sink.h"
#include "formats/gguf.h"

namespace splash::gguf {

using splash::ByteSink;  // core/byte_sink.h, shared with the safetensors writer

// Streams exactly the tensor's n_bytes into the sink (checked by the writer).
using TensorProducer = std::function<Status(ByteSink&)>;

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = kDefaultAlignment);

  // Sets a metadata key. A key set twice keeps its first position and the last value.
  // `general.alignment` is managed by the writer (from the constructor) and cannot be set here.
  Status set(const std::string& key, Value value);
  Status set_string(const std::string& key, std::string v) { return set(key, Value::from_string(std::move(v))); }
  Status set_u32(const std::string& key, uint32_t v) { return set(key, Value::from_u32(v)); }
  Status set_i32(const std::string& key, int32_t v) { return set(key, Value::from_i32(v)); }
  Status set_u64(const std::string& key, uint64_t v) { return set(key, Value::from_u64(v)); }
  Status set_f32(const std::string& key, float v) { return set(key, Value::from_f32(v)); }
  Status set_bool(const std::string& key, bool v) { return set(key, Value::from_bool(v)); }
  // Copies every key of `f` except general.alignment (e.g. to rewrite a file with new tensors).
  Status copy_metadata(const GgufFile& f);

  // shape in GGUF order (shape[0] innermost). Errors: empty/duplicate name, > 4 dims, a zero dim,
  // shape[0] not a multiple of the block size, byte count not matching type x shape.
  Status add_tensor_copy(const std::string& name, DType type, std::vector<uint64_t> shape,
                         std::span<const uint8_t> bytes);
  Status add_tensor_view(const std::string& name, DType type, std::vector<uint64_t> shape,
                         std::span<const uint8_t> bytes);  // not copied: must outlive write()
  Status add_tensor_producer(const std::string& name, DType type, std::vector<uint64_t> shape,
                             TensorProducer producer);

  // Writes the file atomically. May be called more than once (producers are called each time).
  Status write(const std::string& path) const;
  // The same bytes in memory (tests, fuzz seeds, small files).
  Result<std::vector<uint8_t>> write_to_memory() const;

  size_t n_tensors() const { return tensors_.size(); }

 private:
  struct Pending {
    std::string name;
    DType type;
    std::vector<uint64_t> shape;
    uint64_t n_bytes;
    uint64_t offset;                 // within the data section
    std::vector<uint8_t> owned;      // add_tensor_copy
    std::span<const uint8_t> view;   // add_tensor_copy (into owned) / add_tensor_view
    TensorProducer producer;         // add_tensor_producer
  };
  Status check_tensor(const std::string& name, DType type, const std::vector<uint64_t>& shape,
                      uint64_t* n_bytes) const;
  void append_tensor(Pending p);
  Status emit(ByteSink& out) const;

  uint32_t alignment_;
  std::vector<std::string> keys_;
  std::vector<Value> values_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<Pending> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  uint64_t data_size_ = 0;
};

// llama.cpp's general.file_type (llama_ftype) for a file whose matrices are all `type`: K-quants as
// their _S mixes (the mixes closest to a single type; a mix's own value comes from its writer);
// nullopt for types without one.
std::optional<uint32_t> file_type_of(DType type);

}  // namespace splash::gguf
