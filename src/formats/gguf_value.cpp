// GGUF metadata values: construction, names and the typed accessors of GgufFile.
#include <limits>

#include "formats/gguf.h"

namespace splash::gguf {

namespace {

bool unsigned_kind(ValueType t) {
  return t == ValueType::kU8 || t == ValueType::kU16 || t == ValueType::kU32 || t == ValueType::kU64;
}
bool signed_kind(ValueType t) {
  return t == ValueType::kI8 || t == ValueType::kI16 || t == ValueType::kI32 || t == ValueType::kI64;
}

// Range of each integer type, to check that writer inputs fit their declared on-disk type.
bool fits_unsigned(ValueType t, uint64_t v) {
  switch (t) {
    case ValueType::kU8: return v <= 0xff;
    case ValueType::kU16: return v <= 0xffff;
    case ValueType::kU32: return v <= 0xffffffffu;
    case ValueType::kU64: return true;
    case ValueType::kBool: return v <= 1;
    default: return false;
  }
}
bool fits_signed(ValueType t, int64_t v) {
  switch (t) {
    case ValueType::kI8: return v >= -128 && v <= 127;
    case ValueType::kI16: return v >= -32768 && v <= 32767;
    case ValueType::kI32: return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case ValueType::kI64: return true;
    default: return false;
  }
}

// An integer value of either signedness widened to a common form for range checks.
struct AnyInt {
  bool negative;
  uint64_t magnitude_or_value;  // the value itself when non-negative
  int64_t signed_value;
};

std::optional<AnyInt> as_int(const Value& v) {
  if (unsigned_kind(v.type)) return AnyInt{false, v.u, 0};
  if (signed_kind(v.type)) return AnyInt{v.i < 0, static_cast<uint64_t>(v.i), v.i};
  return std::nullopt;
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::kU8: return "u8";
    case ValueType::kI8: return "i8";
    case ValueType::kU16: return "u16";
    case ValueType::kI16: return "i16";
    case ValueType::kU32: return "u32";
    case ValueType::kI32: return "i32";
    case ValueType::kF32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kU64: return "u64";
    case ValueType::kI64: return "i64";
    case ValueType::kF64: return "f64";
  }
  return "unknown";
}

bool is_valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kF64); }

size_t Value::array_size() const {
  if (type != ValueType::kArray) return 0;
  return arr_u.size() + arr_i.size() + arr_f.size() + arr_str.size() + arr_nested.size();
}

// --- constructors

Value Value::from_u8(uint8_t v) { Value x; x.type = ValueType::kU8; x.u = v; return x; }
Value Value::from_i8(int8_t v) { Value x; x.type = ValueType::kI8; x.i = v; return x; }
Value Value::from_u16(uint16_t v) { Value x; x.type = ValueType::kU16; x.u = v; return x; }
Value Value::from_i16(int16_t v) { Value x; x.type = ValueType::kI16; x.i = v; return x; }
Value Value::from_u32(uint32_t v) { Value x; x.type = ValueType::kU32; x.u = v; return x; }
Value Value::from_i32(int32_t v) { Value x; x.type = ValueType::kI32; x.i = v; return x; }
Value Value::from_u64(uint64_t v) { Value x; x.type = ValueType::kU64; x.u = v; return x; }
Value Value::from_i64(int64_t v) { Value x; x.type = ValueType::kI64; x.i = v; return x; }
Value Value::from_f32(float v) { Value x; x.type = ValueType::kF32; x.f = v; return x; }
Value Value::from_f64(double v) { Value x; x.type = ValueType::kF64; x.f = v; return x; }
Value Value::from_bool(bool v) { Value x; x.type = ValueType::kBool; x.u = v ? 1 : 0; return x; }
Value Value::from_string(std::string v) { Value x; x.type = ValueType::kString; x.str = std::move(v); return x; }

Value Value::array_of_uints(ValueType elem, std::vector<uint64_t> v) {
  SPLASH_CHECK_MSG(unsigned_kind(elem), "array_of_uints needs an unsigned element type");
  for (uint64_t e : v) SPLASH_CHECK_MSG(fits_unsigned(elem, e), "array element out of range for its type");
  Value x;
  x.type = ValueType::kArray;
  x.elem_type = elem;
  x.arr_u = std::move(v);
  return x;
}

Value Value::array_of_ints(ValueType elem, std::vector<int64_t> v) {
  SPLASH_CHECK_MSG(signed_kind(elem), "array_of_ints needs a signed element type");
  for (int64_t e : v) SPLASH_CHECK_MSG(fits_signed(elem, e), "array element out of range for its type");
  Value x;
  x.type = ValueType::kArray;
  x.elem_type = elem;
  x.arr_i = std::move(v);
  return x;
}

Value Value::array_of_floats(ValueType elem, std::vector<double> v) {
  SPLASH_CHECK_MSG(elem == ValueType::kF32 || elem == ValueType::kF64, "array_of_floats needs f32 or f64");
  Value x;
  x.type = ValueType::kArray;
  x.elem_type = elem;
  x.arr_f = std::move(v);
  if (elem == ValueType::kF32)  // what is read back is the f32 value: store that, so round trips compare equal
    for (double& d : x.arr_f) d = static_cast<float>(d);
  return x;
}

Value Value::array_of_bools(std::vector<bool> v) {
  Value x;
  x.type = ValueType::kArray;
  x.elem_type = ValueType::kBool;
  x.arr_u.assign(v.begin(), v.end());
  return x;
}

Value Value::array_of_strings(std::vector<std::string> v) {
  Value x;
  x.type = ValueType::kArray;
  x.elem_type = ValueType::kString;
  x.arr_str = std::move(v);
  return x;
}

Value Value::array_of_arrays(std::vector<Value> v) {
  for (const Value& e : v) SPLASH_CHECK_MSG(e.is_array(), "array_of_arrays elements must be arrays");
  Value x;
  x.type = ValueType::kArray;
  x.elem_type = ValueType::kArray;
  x.arr_nested = std::move(v);
  return x;
}

// --- accessors

const Value* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(std::string(key));
  return it == key_index_.end() ? nullptr : &values_[it->second];
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<const Value*> GgufFile::require(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return make_error(source_, ": metadata key '", key, "' is missing");
  return v;
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  if (v->type != ValueType::kString)
    return make_error(source_, ": metadata key '", key, "' has type ", value_type_name(v->type), ", expected string");
  return v->str;
}

namespace {

template <class T>
Result<T> int_as(const std::string& source, std::string_view key, const Value& v) {
  auto ai = as_int(v);
  if (!ai)
    return make_error(source, ": metadata key '", key, "' has type ", value_type_name(v.type),
                      ", expected an integer");
  if (ai->negative) {
    if (!std::numeric_limits<T>::is_signed || ai->signed_value < static_cast<int64_t>(std::numeric_limits<T>::min()))
      return make_error(source, ": metadata key '", key, "' value ", ai->signed_value, " is out of range");
    return static_cast<T>(ai->signed_value);
  }
  if (ai->magnitude_or_value > static_cast<uint64_t>(std::numeric_limits<T>::max()))
    return make_error(source, ": metadata key '", key, "' value ", ai->magnitude_or_value, " is out of range");
  return static_cast<T>(ai->magnitude_or_value);
}

}  // namespace

Result<uint32_t> GgufFile::get_u32(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  return int_as<uint32_t>(source_, key, *v);
}
Result<int32_t> GgufFile::get_i32(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  return int_as<int32_t>(source_, key, *v);
}
Result<uint64_t> GgufFile::get_u64(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  return int_as<uint64_t>(source_, key, *v);
}
Result<int64_t> GgufFile::get_i64(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  return int_as<int64_t>(source_, key, *v);
}

Result<float> GgufFile::get_f32(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  if (v->type == ValueType::kF32 || v->type == ValueType::kF64) return static_cast<float>(v->f);
  if (unsigned_kind(v->type)) return static_cast<float>(v->u);
  if (signed_kind(v->type)) return static_cast<float>(v->i);
  return make_error(source_, ": metadata key '", key, "' has type ", value_type_name(v->type), ", expected a number");
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  if (v->type != ValueType::kBool)
    return make_error(source_, ": metadata key '", key, "' has type ", value_type_name(v->type), ", expected bool");
  return v->u != 0;
}

Result<std::span<const std::string>> GgufFile::get_string_array(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  if (!v->is_array() || v->elem_type != ValueType::kString)
    return make_error(source_, ": metadata key '", key, "' has type ", value_type_name(v->type),
                      v->is_array() ? str_cat(" of ", value_type_name(v->elem_type)) : std::string(),
                      ", expected array of string");
  return std::span<const std::string>(v->arr_str);
}

Result<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  if (v->is_array()) {
    std::vector<float> out;
    if (v->elem_type == ValueType::kF32 || v->elem_type == ValueType::kF64) {
      out.assign(v->arr_f.begin(), v->arr_f.end());
      return out;
    }
    if (unsigned_kind(v->elem_type)) {
      for (uint64_t e : v->arr_u) out.push_back(static_cast<float>(e));
      return out;
    }
    if (signed_kind(v->elem_type)) {
      for (int64_t e : v->arr_i) out.push_back(static_cast<float>(e));
      return out;
    }
  }
  return make_error(source_, ": metadata key '", key, "' has type ", value_type_name(v->type),
                    v->is_array() ? str_cat(" of ", value_type_name(v->elem_type)) : std::string(),
                    ", expected a numeric array");
}

Result<std::vector<int32_t>> GgufFile::get_i32_array(std::string_view key) const {
  SPLASH_TRY(const Value* v, require(key));
  if (!v->is_array() || !(unsigned_kind(v->elem_type) || signed_kind(v->elem_type)))
    return make_error(source_, ": metadata key '", key, "' has type ", value_type_name(v->type),
                      v->is_array() ? str_cat(" of ", value_type_name(v->elem_type)) : std::string(),
                      ", expected an integer array");
  std::vector<int32_t> out;
  out.reserve(v->array_size());
  for (uint64_t e : v->arr_u) {
    if (e > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      return make_error(source_, ": metadata key '", key, "' element ", out.size(), " (", e, ") exceeds i32");
    out.push_back(static_cast<int32_t>(e));
  }
  for (int64_t e : v->arr_i) {
    if (!fits_signed(ValueType::kI32, e))
      return make_error(source_, ": metadata key '", key, "' element ", out.size(), " (", e, ") exceeds i32");
    out.push_back(static_cast<int32_t>(e));
  }
  return out;
}

}  // namespace splash::gguf
