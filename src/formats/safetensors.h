// safetensors reading: one file, or a checkpoint directory (single `model.safetensors` or shards
// listed by `model.safetensors.index.json`). Tensor data is used straight from the memory mapping.
//
// File layout: u64 little-endian header length N, N bytes of JSON, then the data section.
// JSON: {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}}
// with offsets relative to the start of the data section.
//
// Shapes are row-major as written by PyTorch/MLX: shape.back() is the contiguous dimension, so a
// linear weight is [out_features, in_features]. GGUF lists the same dimensions in reverse order
// (ne[0] is contiguous): a safetensors [4096, 11008] tensor is GGUF ne = {11008, 4096}.
//
// Thread-safety: all objects here are immutable after open() and safe to read from many threads.
// Ownership: SafeTensorsFile / SafeTensorsModel own their mappings; SafeTensor::data views stay
// valid as long as the owning object lives (moving the owner keeps them valid).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/result.h"

namespace splash {

// Largest JSON header we accept; real checkpoints with tens of thousands of tensors stay < 10 MiB.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100ull << 20;

struct SafeTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // row-major: shape.back() is contiguous; [] = scalar
  uint64_t n_elems = 0;         // product(shape)
  std::span<const uint8_t> data;  // [n_elems * dtype size] bytes inside the mapping
};

// safetensors dtype string ("F32", "BF16", "U32", "BOOL", ...) <-> DType; nullopt for other
// spellings (F8_E4M3 etc. are not supported) and for block-quantized DTypes.
std::optional<DType> safetensors_dtype_from_string(std::string_view s);
std::optional<std::string_view> safetensors_dtype_to_string(DType t);

// Converts a float tensor (F32, F16, BF16, F64) to f32 values, row-major; an error naming the
// tensor for other dtypes. For loaders and converters that need plain floats.
Result<std::vector<float>> safetensor_to_f32(const SafeTensor& t);

// The parsed header of one safetensors blob. Views point into the bytes that were parsed.
struct SafeTensorsHeader {
  std::vector<SafeTensor> tensors;  // ordered by data offset
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t data_offset = 0;                     // start of the data section in the blob
};

// Parses and validates a whole safetensors blob held in memory; `source` names it in errors.
// Never reads outside `bytes`. Used by SafeTensorsFile and by the fuzz target.
Result<SafeTensorsHeader> parse_safetensors(std::span<const uint8_t> bytes, const std::string& source);

// One memory-mapped .safetensors file.
class SafeTensorsFile {
 public:
  static Result<SafeTensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafeTensor>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafeTensor* find(std::string_view name) const;  // nullptr when absent

 private:
  MappedFile file_;
  SafeTensorsHeader header_;
  std::unordered_map<std::string_view, size_t> by_name_;  // keys view into header_.tensors names
};

// A checkpoint: one file, or a directory holding `model.safetensors.index.json` (shards listed
// in its weight_map, each opened once) or a single `model.safetensors`. One lookup over all shards.
// With an index, the model's tensors are exactly the weight_map entries: a listed tensor missing
// from its shard (or a missing shard) is an error; extra tensors in a shard are not visible.
class SafeTensorsModel {
 public:
  // `path` is a directory or a .safetensors file.
  static Result<SafeTensorsModel> open(const std::string& path);

  const SafeTensor* find(std::string_view name) const;  // nullptr when absent
  // All tensors, sorted by name.
  const std::vector<const SafeTensor*>& tensors() const { return sorted_; }
  size_t n_shards() const { return shards_.size(); }
  const SafeTensorsFile& shard(size_t i) const { return *shards_[i]; }
  // `__metadata__` of the first shard (HF writers put the same map in every shard).
  const std::map<std::string, std::string>& metadata() const;
  // Which shard file holds `name` ("" when absent).
  std::string shard_path_of(std::string_view name) const;

 private:
  std::vector<std::unique_ptr<SafeTensorsFile>> shards_;
  std::unordered_map<std::string_view, std::pair<size_t, const SafeTensor*>> by_name_;
  std::vector<const SafeTensor*> sorted_;
};

}  // namespace splash
