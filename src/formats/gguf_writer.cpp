#include "formats/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace splash::gguf {

namespace {

// Buffers small writes (header fields) and passes large chunks straight through to the fd.
class FileSink final : public ByteSink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(kBuf); }
  Status write(std::span<const uint8_t> bytes) override {
    if (buf_.size() + bytes.size() > kBuf) SPLASH_TRY_STATUS(flush());
    if (bytes.size() >= kBuf) return write_all(bytes);
    buf_.insert(buf_.end(), bytes.begin(), bytes.end());
    return {};
  }
  Status flush() {
    Status s = write_all(buf_);
    buf_.clear();
    return s;
  }

 private:
  static constexpr size_t kBuf = 1 << 20;
  Status write_all(std::span<const uint8_t> bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return make_error(path_, ": write failed: ", std::strerror(errno));
      }
      done += static_cast<size_t>(n);
    }
    return {};
  }
  int fd_;
  std::string path_;
  std::vector<uint8_t> buf_;
};

class MemorySink final : public ByteSink {
 public:
  Status write(std::span<const uint8_t> bytes) override {
    out.insert(out.end(), bytes.begin(), bytes.end());
    return {};
  }
  std::vector<uint8_t> out;
};

// Counts what a producer writes and forwards it; a producer that writes too much or too little is a
// bug in the caller's converter, reported as an error naming the tensor.
class CountingSink final : public ByteSink {
 public:
  CountingSink(ByteSink& inner, uint64_t limit, const std::string& name) : inner_(inner), limit_(limit), name_(name) {}
  Status write(std::span<const uint8_t> bytes) override {
    if (bytes.size() > limit_ - count_)
      return make_error("gguf writer: tensor '", name_, "' producer wrote more than its ", limit_, " bytes");
    count_ += bytes.size();
    return inner_.write(bytes);
  }
  uint64_t count() const { return count_; }

 private:
  ByteSink& inner_;
  uint64_t limit_;
  uint64_t count_ = 0;
  const std::string& name_;
};

// Header encoding helpers.
class Enc {
 public:
  explicit Enc(ByteSink& s) : s_(s) {}
  template <class T>
  Status put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    return s_.write(tmp);
  }
  Status str(const std::string& v) {
    SPLASH_TRY_STATUS(put<uint64_t>(v.size()));
    return s_.write({reinterpret_cast<const uint8_t*>(v.data()), v.size()});
  }
  Status zeros(uint64_t n) {
    static constexpr uint8_t kZeros[64] = {};
    while (n > 0) {
      uint64_t k = n < sizeof(kZeros) ? n : sizeof(kZeros);
      SPLASH_TRY_STATUS(s_.write({kZeros, static_cast<size_t>(k)}));
      n -= k;
    }
    return {};
  }
  Status scalar(ValueType t, uint64_t u, int64_t i, double f, const std::string& s) {
    switch (t) {
      case ValueType::kU8: return put<uint8_t>(static_cast<uint8_t>(u));
      case ValueType::kI8: return put<int8_t>(static_cast<int8_t>(i));
      case ValueType::kU16: return put<uint16_t>(static_cast<uint16_t>(u));
      case ValueType::kI16: return put<int16_t>(static_cast<int16_t>(i));
      case ValueType::kU32: return put<uint32_t>(static_cast<uint32_t>(u));
      case ValueType::kI32: return put<int32_t>(static_cast<int32_t>(i));
      case ValueType::kU64: return put<uint64_t>(u);
      case ValueType::kI64: return put<int64_t>(i);
      case ValueType::kF32: return put<float>(static_cast<float>(f));
      case ValueType::kF64: return put<double>(f);
      case ValueType::kBool: return put<uint8_t>(u ? 1 : 0);
      case ValueType::kString: return str(s);
      case ValueType::kArray: break;
    }
    SPLASH_CHECK_MSG(false, "scalar() called with an array type");
    return {};
  }
  Status array(const Value& v) {
    SPLASH_TRY_STATUS(put<uint32_t>(static_cast<uint32_t>(v.elem_type)));
    SPLASH_TRY_STATUS(put<uint64_t>(v.array_size()));
    static const std::string kEmpty;
    switch (v.elem_type) {
      case ValueType::kArray:
        for (const Value& e : v.arr_nested) SPLASH_TRY_STATUS(array(e));
        return {};
      case ValueType::kString:
        for (const std::string& e : v.arr_str) SPLASH_TRY_STATUS(str(e));
        return {};
      case ValueType::kF32: case ValueType::kF64:
        for (double e : v.arr_f) SPLASH_TRY_STATUS(scalar(v.elem_type, 0, 0, e, kEmpty));
        return {};
      case ValueType::kI8: case ValueType::kI16: case ValueType::kI32: case ValueType::kI64:
        for (int64_t e : v.arr_i) SPLASH_TRY_STATUS(scalar(v.elem_type, 0, e, 0, kEmpty));
        return {};
      default:
        for (uint64_t e : v.arr_u) SPLASH_TRY_STATUS(scalar(v.elem_type, e, 0, 0, kEmpty));
        return {};
    }
  }
  Status value(const Value& v) {
    SPLASH_TRY_STATUS(put<uint32_t>(static_cast<uint32_t>(v.type)));
    if (v.is_array()) return array(v);
    return scalar(v.type, v.u, v.i, v.f, v.str);
  }

 private:
  ByteSink& s_;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  SPLASH_CHECK_MSG(alignment != 0 && (alignment & (alignment - 1)) == 0, "GGUF alignment must be a power of two");
  if (alignment_ != kDefaultAlignment) {
    // The key through a named string: GCC 12 reports a false -Warray-bounds on push_back of a
    // 17-character literal here once <string> comes from a precompiled header.
    const std::string key = "general.alignment";
    keys_.push_back(key);
    values_.push_back(Value::from_u32(alignment_));
    key_index_.emplace(key, 0);
  }
}

Status GgufWriter::set(const std::string& key, Value value) {
  if (key.empty()) return make_error("gguf writer: empty metadata key");
  if (key == "general.alignment")
    return make_error("gguf writer: general.alignment is set through the GgufWriter constructor");
  auto it = key_index_.find(key);
  if (it != key_index_.end()) {
    values_[it->second] = std::move(value);
    return {};
  }
  key_index_.emplace(key, keys_.size());
  keys_.push_back(key);
  values_.push_back(std::move(value));
  return {};
}

Status GgufWriter::copy_metadata(const GgufFile& f) {
  for (const std::string& k : f.keys()) {
    if (k == "general.alignment") continue;
    SPLASH_TRY_STATUS(set(k, *f.find(k)));
  }
  return {};
}

Status GgufWriter::check_tensor(const std::string& name, DType type, const std::vector<uint64_t>& shape,
                                uint64_t* n_bytes) const {
  if (name.empty()) return make_error("gguf writer: empty tensor name");
  if (tensor_index_.count(name)) return make_error("gguf writer: duplicate tensor '", name, "'");
  if (!dtype_to_gguf(type))
    return make_error("gguf writer: tensor '", name, "' has type ", dtype_name(type), " which GGUF cannot store");
  if (shape.size() > static_cast<size_t>(kMaxDims))
    return make_error("gguf writer: tensor '", name, "' has ", shape.size(), " dims (at most ", kMaxDims, ")");
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d == 0 || d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n)
      return make_error("gguf writer: tensor '", name, "' has a zero or overflowing dimension");
    n *= d;
  }
  const uint64_t row = shape.empty() ? 1 : shape[0];
  if (row % dtype_traits(type).block_elems != 0)
    return make_error("gguf writer: tensor '", name, "' row length ", row, " is not a multiple of the ",
                      dtype_name(type), " block size ", dtype_traits(type).block_elems);
  auto nb = dtype_bytes(type, n);
  if (!nb) return make_error("gguf writer: tensor '", name, "' byte size overflows");
  *n_bytes = *nb;
  return {};
}

void GgufWriter::append_tensor(Pending p) {
  p.offset = align_up(data_size_, alignment_);
  data_size_ = p.offset + p.n_bytes;
  tensor_index_.emplace(p.name, tensors_.size());
  tensors_.push_back(std::move(p));
}

Status GgufWriter::add_tensor_copy(const std::string& name, DType type, std::vector<uint64_t> shape,
                                   std::span<const uint8_t> bytes) {
  uint64_t nb = 0;
  SPLASH_TRY_STATUS(check_tensor(name, type, shape, &nb));
  if (bytes.size() != nb)
    return make_error("gguf writer: tensor '", name, "' has ", bytes.size(), " bytes, its type and shape need ", nb);
  Pending p{name, type, std::move(shape), nb, 0, std::vector<uint8_t>(bytes.begin(), bytes.end()), {}, {}};
  p.view = p.owned;  // the vector's buffer does not move when Pending is moved
  append_tensor(std::move(p));
  return {};
}

Status GgufWriter::add_tensor_view(const std::string& name, DType type, std::vector<uint64_t> shape,
                                   std::span<const uint8_t> bytes) {
  uint64_t nb = 0;
  SPLASH_TRY_STATUS(check_tensor(name, type, shape, &nb));
  if (bytes.size() != nb)
    return make_error("gguf writer: tensor '", name, "' has ", bytes.size(), " bytes, its type and shape need ", nb);
  append_tensor(Pending{name, type, std::move(shape), nb, 0, {}, bytes, {}});
  return {};
}

Status GgufWriter::add_tensor_producer(const std::string& name, DType type, std::vector<uint64_t> shape,
                                       TensorProducer producer) {
  uint64_t nb = 0;
  SPLASH_TRY_STATUS(check_tensor(name, type, shape, &nb));
  if (!producer) return make_error("gguf writer: tensor '", name, "' has no producer");
  append_tensor(Pending{name, type, std::move(shape), nb, 0, {}, {}, std::move(producer)});
  return {};
}

Status GgufWriter::emit(ByteSink& out) const {
  Enc e(out);
  uint64_t pos = 0;  // bytes of header written, for the padding before the data section
  struct Counter final : ByteSink {
    ByteSink& inner;
    uint64_t& pos;
    Counter(ByteSink& i, uint64_t& p) : inner(i), pos(p) {}
    Status write(std::span<const uint8_t> b) override {
      pos += b.size();
      return inner.write(b);
    }
  } counter(out, pos);
  Enc h(counter);
  SPLASH_TRY_STATUS(h.put<uint32_t>(kMagic));
  SPLASH_TRY_STATUS(h.put<uint32_t>(3));
  SPLASH_TRY_STATUS(h.put<uint64_t>(tensors_.size()));
  SPLASH_TRY_STATUS(h.put<uint64_t>(keys_.size()));
  for (size_t k = 0; k < keys_.size(); ++k) {
    SPLASH_TRY_STATUS(h.str(keys_[k]));
    SPLASH_TRY_STATUS(h.value(values_[k]));
  }
  for (const Pending& t : tensors_) {
    SPLASH_TRY_STATUS(h.str(t.name));
    SPLASH_TRY_STATUS(h.put<uint32_t>(static_cast<uint32_t>(t.shape.size())));
    for (uint64_t d : t.shape) SPLASH_TRY_STATUS(h.put<uint64_t>(d));
    SPLASH_TRY_STATUS(h.put<uint32_t>(*dtype_to_gguf(t.type)));
    SPLASH_TRY_STATUS(h.put<uint64_t>(t.offset));
  }
  SPLASH_TRY_STATUS(e.zeros(align_up(pos, alignment_) - pos));
  uint64_t data_pos = 0;
  for (const Pending& t : tensors_) {
    SPLASH_TRY_STATUS(e.zeros(t.offset - data_pos));
    if (t.producer) {
      CountingSink cs(out, t.n_bytes, t.name);
      SPLASH_TRY_STATUS(t.producer(cs));
      if (cs.count() != t.n_bytes)
        return make_error("gguf writer: tensor '", t.name, "' producer wrote ", cs.count(), " of its ", t.n_bytes,
                          " bytes");
    } else {
      SPLASH_TRY_STATUS(out.write(t.view));
    }
    data_pos = t.offset + t.n_bytes;
  }
  return {};
}

Result<std::vector<uint8_t>> GgufWriter::write_to_memory() const {
  MemorySink sink;
  SPLASH_TRY_STATUS(emit(sink));
  return std::move(sink.out);
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(tmp, ": cannot create: ", std::strerror(errno));
  FileSink sink(fd, tmp);
  Status s = emit(sink);
  if (s.ok()) s = sink.flush();
  if (s.ok() && ::fsync(fd) != 0) s = make_error(tmp, ": fsync failed: ", std::strerror(errno));
  if (::close(fd) != 0 && s.ok()) s = make_error(tmp, ": close failed: ", std::strerror(errno));
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = make_error(path, ": cannot rename into place: ", std::strerror(errno));
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

std::optional<uint32_t> file_type_of(DType type) {
  switch (type) {  // LLAMA_FTYPE_MOSTLY_*
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 11;  // Q3_K_S
    case DType::kQ4_K: return 14;  // Q4_K_S
    case DType::kQ5_K: return 16;  // Q5_K_S
    case DType::kQ6_K: return 18;
    case DType::kBF16: return 32;
    default: return std::nullopt;
  }
}

}  // namespace splash::gguf
