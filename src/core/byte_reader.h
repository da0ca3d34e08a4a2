// Bounds-checked little-endian cursor over untrusted bytes (model files, tokenizer files, cache
// records). Every read checks the remaining length first; a short read is an error naming `what`.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "core/result.h"

namespace splash {

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> data, std::string source) : data_(data), source_(std::move(source)) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  const std::string& source() const { return source_; }

  template <class T>
  Result<T> read(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return short_read(what, sizeof(T));
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::span<const uint8_t>> read_bytes(uint64_t n, const char* what) {
    if (remaining() < n) return short_read(what, n);
    auto s = data_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  Result<std::string> read_string(uint64_t n, const char* what) {
    SPLASH_TRY(auto s, read_bytes(n, what));
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  }

  Status seek(uint64_t offset, const char* what) {
    if (offset > data_.size())
      return make_error(source_, ": ", what, " offset ", offset, " is past the end (", data_.size(), " bytes)");
    pos_ = static_cast<size_t>(offset);
    return {};
  }

 private:
  Error short_read(const char* what, uint64_t n) const {
    return make_error(source_, ": truncated while reading ", what, " at offset ", pos_, " (need ", n,
                      " bytes, ", remaining(), " left)");
  }

  std::span<const uint8_t> data_;
  std::string source_;
  size_t pos_ = 0;
};

}  // namespace splash
