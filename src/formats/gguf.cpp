// GGUF parsing and validation. Layout (all little-endian):
//   u32 magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
//   n_kv x { string key, u32 value_type, value },
//   n_tensors x { string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset },
//   padding to `general.alignment`, tensor data (each tensor at data_start + offset).
// A string is u64 length + bytes; an array is u32 element type + u64 count + elements.
#include "formats/gguf.h"

#include <algorithm>
#include <limits>

#include "core/byte_reader.h"

namespace splash::gguf {

namespace {

// Smallest encoded size of one element of each type; used to reject counts that could not fit in
// the bytes left before allocating anything for them.
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    case ValueType::kString: return 8;
    case ValueType::kArray: return 12;
  }
  return 1;
}

bool is_unsigned_kind(ValueType t) {
  return t == ValueType::kU8 || t == ValueType::kU16 || t == ValueType::kU32 || t == ValueType::kU64 ||
         t == ValueType::kBool;
}
bool is_signed_kind(ValueType t) {
  return t == ValueType::kI8 || t == ValueType::kI16 || t == ValueType::kI32 || t == ValueType::kI64;
}
bool is_float_kind(ValueType t) { return t == ValueType::kF32 || t == ValueType::kF64; }

}  // namespace

// Reads the file into a GgufFile; a class (not free functions) so that it can fill private fields.
class Parser {
 public:
  Parser(std::span<const uint8_t> data, const std::string& source) : data_(data), r_(data, source), src_(source) {}

  Status run(GgufFile& out) {
    SPLASH_TRY_STATUS(read_header(out));
    SPLASH_TRY_STATUS(read_metadata(out));
    SPLASH_TRY_STATUS(read_alignment(out));
    SPLASH_TRY_STATUS(read_tensor_infos(out));
    return place_tensors(out);
  }

 private:
  Status read_header(GgufFile& out) {
    SPLASH_TRY(uint32_t magic, r_.read<uint32_t>("magic"));
    if (magic != kMagic)
      return make_error(src_, ": not a GGUF file (magic is 0x", std::hex, magic, ", expected 0x", kMagic,
                        " \"GGUF\")");
    SPLASH_TRY(uint32_t version, r_.read<uint32_t>("version"));
    // A big-endian file stores small versions as 0x0?000000: recognise it instead of saying "version 50331648".
    if ((version & 0xffffu) == 0 && version != 0)
      return make_error(src_, ": big-endian GGUF (version field 0x", std::hex, version,
                        ") is not supported; convert the model on a little-endian machine");
    if (version == 1)
      return make_error(src_, ": GGUF version 1 is not supported (only 2 and 3); re-convert the model with a "
                              "current converter");
    if (version != 2 && version != 3)
      return make_error(src_, ": unsupported GGUF version ", version, " (supported: 2, 3)");
    out.version_ = version;
    SPLASH_TRY(n_tensors_, r_.read<uint64_t>("tensor count"));
    SPLASH_TRY(n_kv_, r_.read<uint64_t>("metadata count"));
    // Each KV takes at least 13 bytes and each tensor info at least 24: refuse counts the file cannot hold.
    if (n_kv_ > r_.remaining() / 13)
      return make_error(src_, ": metadata count ", n_kv_, " cannot fit in the ", r_.remaining(),
                        " bytes left");
    if (n_tensors_ > r_.remaining() / 24)
      return make_error(src_, ": tensor count ", n_tensors_, " cannot fit in the ", r_.remaining(),
                        " bytes left");
    return {};
  }

  Result<std::string> read_gguf_string(const char* what) {
    SPLASH_TRY(uint64_t len, r_.read<uint64_t>(what));
    if (len > r_.remaining())
      return make_error(src_, ": ", what, " length ", len, " at offset ", r_.offset() - 8, " exceeds the ",
                        r_.remaining(), " bytes left");
    return r_.read_string(len, what);
  }

  Result<ValueType> read_type(const std::string& key, const char* what) {
    SPLASH_TRY(uint32_t t, r_.read<uint32_t>(what));
    if (!is_valid_value_type(t))
      return make_error(src_, ": metadata key '", key, "' has unknown ", what, " ", t);
    return static_cast<ValueType>(t);
  }

  // Reads one scalar of type t into v (v.type already set by the caller).
  Status read_scalar(ValueType t, const std::string& key, Value& v) {
    switch (t) {
      case ValueType::kU8: { SPLASH_TRY(auto x, r_.read<uint8_t>("u8 value")); v.u = x; return {}; }
      case ValueType::kI8: { SPLASH_TRY(auto x, r_.read<int8_t>("i8 value")); v.i = x; return {}; }
      case ValueType::kU16: { SPLASH_TRY(auto x, r_.read<uint16_t>("u16 value")); v.u = x; return {}; }
      case ValueType::kI16: { SPLASH_TRY(auto x, r_.read<int16_t>("i16 value")); v.i = x; return {}; }
      case ValueType::kU32: { SPLASH_TRY(auto x, r_.read<uint32_t>("u32 value")); v.u = x; return {}; }
      case ValueType::kI32: { SPLASH_TRY(auto x, r_.read<int32_t>("i32 value")); v.i = x; return {}; }
      case ValueType::kU64: { SPLASH_TRY(auto x, r_.read<uint64_t>("u64 value")); v.u = x; return {}; }
      case ValueType::kI64: { SPLASH_TRY(auto x, r_.read<int64_t>("i64 value")); v.i = x; return {}; }
      case ValueType::kF32: { SPLASH_TRY(auto x, r_.read<float>("f32 value")); v.f = x; return {}; }
      case ValueType::kF64: { SPLASH_TRY(auto x, r_.read<double>("f64 value")); v.f = x; return {}; }
      case ValueType::kBool: {
        SPLASH_TRY(auto x, r_.read<uint8_t>("bool value"));
        if (x > 1) return make_error(src_, ": metadata key '", key, "' has bool value ", int(x), " (not 0 or 1)");
        v.u = x;
        return {};
      }
      case ValueType::kString: { SPLASH_TRY(v.str, read_gguf_string("string value")); return {}; }
      case ValueType::kArray: break;
    }
    SPLASH_CHECK_MSG(false, "read_scalar called with an array type");
    return {};
  }

  Status read_array(const std::string& key, Value& v, int depth) {
    if (depth > kMaxArrayDepth)
      return make_error(src_, ": metadata key '", key, "' nests arrays deeper than ", kMaxArrayDepth);
    SPLASH_TRY(v.elem_type, read_type(key, "array element type"));
    SPLASH_TRY(uint64_t n, r_.read<uint64_t>("array length"));
    if (n > r_.remaining() / min_encoded_size(v.elem_type))
      return make_error(src_, ": metadata key '", key, "' array length ", n, " of ", value_type_name(v.elem_type),
                        " cannot fit in the ", r_.remaining(), " bytes left");
    const ValueType et = v.elem_type;
    const size_t count = static_cast<size_t>(n);
    if (et == ValueType::kArray) {
      v.arr_nested.resize(count);
      for (auto& e : v.arr_nested) {
        e.type = ValueType::kArray;
        SPLASH_TRY_STATUS(read_array(key, e, depth + 1));
      }
      return {};
    }
    Value tmp;
    if (is_unsigned_kind(et)) v.arr_u.reserve(count);
    else if (is_signed_kind(et)) v.arr_i.reserve(count);
    else if (is_float_kind(et)) v.arr_f.reserve(count);
    else v.arr_str.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      SPLASH_TRY_STATUS(read_scalar(et, key, tmp));
      if (is_unsigned_kind(et)) v.arr_u.push_back(tmp.u);
      else if (is_signed_kind(et)) v.arr_i.push_back(tmp.i);
      else if (is_float_kind(et)) v.arr_f.push_back(tmp.f);
      else v.arr_str.push_back(std::move(tmp.str));
    }
    return {};
  }

  Status read_metadata(GgufFile& out) {
    out.keys_.reserve(static_cast<size_t>(n_kv_));
    out.values_.reserve(static_cast<size_t>(n_kv_));
    for (uint64_t k = 0; k < n_kv_; ++k) {
      SPLASH_TRY(std::string key, read_gguf_string("metadata key"));
      if (out.key_index_.count(key))
        return make_error(src_, ": duplicate metadata key '", key, "'");
      Value v;
      SPLASH_TRY(v.type, read_type(key, "value type"));
      if (v.type == ValueType::kArray) {
        SPLASH_TRY_STATUS(read_array(key, v, 1));
      } else {
        SPLASH_TRY_STATUS(read_scalar(v.type, key, v));
      }
      out.key_index_.emplace(key, out.keys_.size());
      out.keys_.push_back(std::move(key));
      out.values_.push_back(std::move(v));
    }
    return {};
  }

  Status read_alignment(GgufFile& out) {
    const Value* a = out.find("general.alignment");
    if (!a) return {};
    if (!is_unsigned_kind(a->type) && !is_signed_kind(a->type))
      return make_error(src_, ": general.alignment has type ", value_type_name(a->type), ", expected u32");
    const bool neg = is_signed_kind(a->type) && a->i < 0;
    const uint64_t al = is_signed_kind(a->type) ? static_cast<uint64_t>(a->i) : a->u;
    if (neg || al == 0 || al > (1u << 30) || (al & (al - 1)) != 0)
      return make_error(src_, ": general.alignment is ", neg ? std::to_string(a->i) : std::to_string(al),
                        "; it must be a power of two (1 .. 2^30)");
    out.alignment_ = static_cast<uint32_t>(al);
    return {};
  }

  Status read_tensor_infos(GgufFile& out) {
    out.tensors_.reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t k = 0; k < n_tensors_; ++k) {
      TensorInfo t;
      SPLASH_TRY(t.name, read_gguf_string("tensor name"));
      if (out.tensor_index_.count(t.name))
        return make_error(src_, ": duplicate tensor name '", t.name, "'");
      SPLASH_TRY(uint32_t n_dims, r_.read<uint32_t>("tensor n_dims"));
      if (n_dims > static_cast<uint32_t>(kMaxDims))
        return make_error(src_, ": tensor '", t.name, "' has ", n_dims, " dimensions (at most ", kMaxDims, ")");
      uint64_t n_elems = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        SPLASH_TRY(uint64_t dim, r_.read<uint64_t>("tensor dimension"));
        if (dim == 0) return make_error(src_, ": tensor '", t.name, "' has dimension ", d, " equal to 0");
        if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n_elems)
          return make_error(src_, ": tensor '", t.name, "' shape overflows (dimension ", d, " is ", dim, ")");
        n_elems *= dim;
        t.shape.push_back(dim);
      }
      t.n_elems = n_elems;
      SPLASH_TRY(uint32_t type_id, r_.read<uint32_t>("tensor type"));
      auto type = dtype_from_gguf(type_id);
      if (!type)
        return make_error(src_, ": tensor '", t.name, "' has unknown or unsupported ggml type id ", type_id);
      t.type = *type;
      const auto& tr = dtype_traits(t.type);
      if (t.row_len() % tr.block_elems != 0)
        return make_error(src_, ": tensor '", t.name, "' of type ", tr.name, " has row length ", t.row_len(),
                          ", not a multiple of the block size ", tr.block_elems);
      auto nb = dtype_bytes(t.type, n_elems);
      if (!nb) return make_error(src_, ": tensor '", t.name, "' byte size overflows");
      t.n_bytes = *nb;
      SPLASH_TRY(t.offset, r_.read<uint64_t>("tensor offset"));
      out.tensor_index_.emplace(t.name, out.tensors_.size());
      out.tensors_.push_back(std::move(t));
    }
    return {};
  }

  Status place_tensors(GgufFile& out) {
    const uint64_t al = out.alignment_;
    const uint64_t end_of_infos = r_.offset();
    const uint64_t data_start = (end_of_infos + al - 1) / al * al;
    out.data_offset_ = data_start;
    if (out.tensors_.empty()) return {};
    if (data_start > data_.size())
      return make_error(src_, ": data section would start at ", data_start, " past the end of the file (",
                        data_.size(), " bytes)");
    const uint64_t data_size = data_.size() - data_start;
    std::vector<size_t> order(out.tensors_.size());
    for (size_t k = 0; k < order.size(); ++k) {
      TensorInfo& t = out.tensors_[k];
      order[k] = k;
      if (t.offset % al != 0)
        return make_error(src_, ": tensor '", t.name, "' offset ", t.offset, " is not a multiple of the alignment ",
                          al);
      if (t.offset > data_size || t.n_bytes > data_size - t.offset)
        return make_error(src_, ": tensor '", t.name, "' [", t.offset, ", +", t.n_bytes,
                          ") lies outside the data section (", data_size, " bytes; file truncated?)");
      t.data = data_.data() + data_start + t.offset;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return out.tensors_[a].offset < out.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = out.tensors_[order[k - 1]];
      const TensorInfo& cur = out.tensors_[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset)
        return make_error(src_, ": tensors '", prev.name, "' and '", cur.name, "' overlap");
    }
    return {};
  }

  std::span<const uint8_t> data_;
  ByteReader r_;
  const std::string& src_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> data, std::string source) {
  GgufFile f;
  f.source_ = std::move(source);
  Parser p(data, f.source_);
  SPLASH_TRY_STATUS(p.run(f));
  return f;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  SPLASH_TRY(MappedFile mf, MappedFile::open(path));
  SPLASH_TRY(GgufFile f, parse(mf.bytes(), path));
  f.file_ = std::move(mf);  // the mapping's address does not change on move: data pointers stay valid
  return f;
}

}  // namespace splash::gguf
