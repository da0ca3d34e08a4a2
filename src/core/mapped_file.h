// Read-only memory mapping of a whole file. Weights are used straight from the mapping, never copied.
// Move-only; the mapping lives as long as the object. Thread-safe to read from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/result.h"

namespace splash {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only. An empty file maps to an empty span.
  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string: configs, tokenizer.json, templates.
Result<std::string> read_text_file(const std::string& path);
// Writes atomically: to `path.tmp-<pid>` then rename, so readers never see a partial file.
Status write_file_atomic(const std::string& path, std::span<const uint8_t> data);

}  // namespace splash
