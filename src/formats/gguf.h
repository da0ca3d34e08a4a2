// GGUF reader (versions 2 and 3, little-endian). The file is memory-mapped and validated in full
// before anything is handed out: every count, length, type id, shape and tensor range is checked
// against the bytes actually present, so a hostile or truncated file yields an Error naming the file
// and the field, never a crash or an out-of-bounds view.
//
// Ownership: a GgufFile opened with `open` owns its mapping; TensorInfo::data points into it and stays
// valid as long as the GgufFile (moving it keeps the pointers valid). A GgufFile made with `parse`
// does not own the bytes: the caller keeps them alive. A GgufFile is immutable after construction
// and safe to read from many threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/result.h"

namespace splash::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as the little-endian u32 of its 4 bytes
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;         // GGML_MAX_DIMS
inline constexpr int kMaxArrayDepth = 8;   // nested arrays deeper than this are rejected (stack safety)

// Metadata value types, numbered as in the GGUF specification.
enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
std::string_view value_type_name(ValueType t);
bool is_valid_value_type(uint32_t t);

// One metadata value. Scalars live in the field matching their kind (unsigned ints and bool in `u`,
// signed ints in `i`, floats in `f`, strings in `str`); `type` keeps the exact on-disk type so a
// rewrite is byte-identical. Arrays keep their elements in one typed vector chosen by `elem_type`
// (the same grouping as scalars), so a 250K-entry token list costs one std::string per entry.
struct Value {
  ValueType type = ValueType::kU8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  std::string str;

  ValueType elem_type = ValueType::kU8;  // arrays only
  std::vector<uint64_t> arr_u;           // elem_type u8/u16/u32/u64/bool
  std::vector<int64_t> arr_i;            // elem_type i8/i16/i32/i64
  std::vector<double> arr_f;             // elem_type f32/f64
  std::vector<std::string> arr_str;      // elem_type string
  std::vector<Value> arr_nested;         // elem_type array

  bool is_array() const { return type == ValueType::kArray; }
  size_t array_size() const;

  // Constructors for the writer and for tests.
  static Value from_u8(uint8_t v);
  static Value from_i8(int8_t v);
  static Value from_u16(uint16_t v);
  static Value from_i16(int16_t v);
  static Value from_u32(uint32_t v);
  static Value from_i32(int32_t v);
  static Value from_u64(uint64_t v);
  static Value from_i64(int64_t v);
  static Value from_f32(float v);
  static Value from_f64(double v);
  static Value from_bool(bool v);
  static Value from_string(std::string v);
  // Numeric arrays: `elem` picks the on-disk element type; values must fit it (checked).
  static Value array_of_uints(ValueType elem, std::vector<uint64_t> v);
  static Value array_of_ints(ValueType elem, std::vector<int64_t> v);
  static Value array_of_floats(ValueType elem, std::vector<double> v);
  static Value array_of_bools(std::vector<bool> v);
  static Value array_of_strings(std::vector<std::string> v);
  static Value array_of_arrays(std::vector<Value> v);  // every element must be an array

  bool operator==(const Value& other) const = default;
};

struct TensorInfo {
  std::string name;
  DType type = DType::kF32;
  // GGUF order: shape[0] is the innermost (contiguous) dimension. [ne0, ne1, ...], 0..4 entries.
  std::vector<uint64_t> shape;
  uint64_t offset = 0;   // from the start of the data section (a multiple of the alignment)
  uint64_t n_bytes = 0;  // exact payload size for `type` and `shape`
  uint64_t n_elems = 0;
  const uint8_t* data = nullptr;  // [n_bytes], inside the mapping

  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(n_bytes)}; }
  uint64_t row_len() const { return shape.empty() ? 1 : shape[0]; }
  uint64_t n_rows() const { return row_len() == 0 ? 0 : n_elems / row_len(); }
};

class GgufFile {
 public:
  GgufFile() = default;
  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Maps and validates `path`. The file is never copied.
  static Result<GgufFile> open(const std::string& path);
  // Validates in-memory bytes; `source` names them in error messages. `data` must outlive the result.
  static Result<GgufFile> parse(std::span<const uint8_t> data, std::string source);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the tensor data section
  const std::string& source() const { return source_; }

  // --- metadata
  const std::vector<std::string>& keys() const { return keys_; }  // file order
  size_t n_metadata() const { return keys_.size(); }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors: integers of any on-disk integer type are accepted when the value fits the
  // requested type; an error names the file, the key and the actual type otherwise.
  Result<std::string> get_string(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;  // accepts f32, f64 and integers
  Result<bool> get_bool(std::string_view key) const;
  // The returned span views the file's storage and lives as long as the GgufFile.
  Result<std::span<const std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;    // float or integer arrays
  Result<std::vector<int32_t>> get_i32_array(std::string_view key) const;  // integer arrays that fit

  // --- tensors (file order)
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  friend class Parser;
  Result<const Value*> require(std::string_view key) const;

  MappedFile file_;  // empty for parse()
  std::string source_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  std::vector<Value> values_;  // parallel to keys_
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace splash::gguf
