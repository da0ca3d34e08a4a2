#include "formats/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "formats/safetensors.h"

namespace splash {

namespace {

using nlohmann::ordered_json;

// A file under construction at `<path>.tmp-<pid>`; commit() renames it into place, the
// destructor removes it if commit() never ran (any error path).
class TmpFile final : public ByteSink {
 public:
  explicit TmpFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp-" + std::to_string(getpid())) {}
  ~TmpFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  TmpFile(const TmpFile&) = delete;
  TmpFile& operator=(const TmpFile&) = delete;

  Status create() {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return make_error(tmp_, ": cannot create: ", std::strerror(errno));
    return {};
  }
  Status write(std::span<const uint8_t> bytes) override {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return make_error(tmp_, ": write failed: ", std::strerror(errno));
      }
      done += static_cast<size_t>(n);
    }
    written_ += bytes.size();
    return {};
  }
  uint64_t written() const { return written_; }
  Status commit() {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return make_error(tmp_, ": close failed: ", std::strerror(errno));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      return make_error(path_, ": cannot rename into place: ", std::strerror(errno));
    committed_ = true;
    return {};
  }

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

Result<uint64_t> tensor_bytes(const std::string& path, const SafeTensorWrite& t) {
  if (!safetensors_dtype_to_string(t.dtype))
    return make_error(path, ": tensor '", t.name, "': dtype ", dtype_name(t.dtype), " cannot be stored in safetensors");
  uint64_t n = 1;
  for (uint64_t d : t.shape)
    if (__builtin_mul_overflow(n, d, &n)) return make_error(path, ": tensor '", t.name, "': shape overflows");
  auto bytes = dtype_bytes(t.dtype, n);
  if (!bytes) return make_error(path, ": tensor '", t.name, "': size overflows");
  if (!t.produce && t.data.size() != *bytes)
    return make_error(path, ": tensor '", t.name, "': ", t.data.size(), " data bytes given, shape needs ", *bytes);
  return *bytes;
}

}  // namespace

Status write_safetensors(const std::string& path, std::span<const SafeTensorWrite> tensors,
                         const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json md = ordered_json::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    header["__metadata__"] = std::move(md);
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || header.contains(t.name))
      return make_error(path, ": tensor name '", t.name, "' is reserved or given twice");
    SPLASH_TRY(uint64_t n, tensor_bytes(path, t));
    ordered_json e = ordered_json::object();
    e["dtype"] = std::string(*safetensors_dtype_to_string(t.dtype));
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + n};
    header[t.name] = std::move(e);
    sizes.push_back(n);
    offset += n;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(json.size()) >> (8 * i));

  TmpFile out(path);
  SPLASH_TRY_STATUS(out.create());
  SPLASH_TRY_STATUS(out.write({len, 8}));
  SPLASH_TRY_STATUS(out.write({reinterpret_cast<const uint8_t*>(json.data()), json.size()}));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    uint64_t before = out.written();
    if (t.produce) {
      SPLASH_TRY_STATUS(t.produce(out));
    } else {
      SPLASH_TRY_STATUS(out.write(t.data));
    }
    if (out.written() - before != sizes[i])
      return make_error(path, ": tensor '", t.name, "': producer wrote ", out.written() - before,
                        " bytes, expected ", sizes[i]);
  }
  return out.commit();
}

Result<std::vector<std::string>> write_safetensors_checkpoint(
    const std::string& dir, std::span<const SafeTensorWrite> tensors,
    const std::map<std::string, std::string>& metadata, uint64_t max_shard_bytes) {
  namespace fs = std::filesystem;
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  std::set<std::string_view> names_seen;
  for (const auto& t : tensors) {
    if (!names_seen.insert(t.name).second) return make_error(dir, ": tensor name '", t.name, "' given twice");
    SPLASH_TRY(uint64_t n, tensor_bytes(dir, t));
    sizes.push_back(n);
    total += n;
  }
  // Group consecutive tensors into shards [begin, end).
  std::vector<std::pair<size_t, size_t>> groups;
  uint64_t cur = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    bool start_new = groups.empty() || (max_shard_bytes > 0 && cur > 0 && cur + sizes[i] > max_shard_bytes);
    if (start_new) {
      groups.emplace_back(i, i);
      cur = 0;
    }
    groups.back().second = i + 1;
    cur += sizes[i];
  }
  if (groups.size() <= 1) {
    SPLASH_TRY_STATUS(write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, metadata));
    return std::vector<std::string>{"model.safetensors"};
  }
  std::vector<std::string> names;
  ordered_json weight_map = ordered_json::object();
  for (size_t g = 0; g < groups.size(); ++g) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", g + 1, groups.size());
    auto part = tensors.subspan(groups[g].first, groups[g].second - groups[g].first);
    SPLASH_TRY_STATUS(write_safetensors((fs::path(dir) / name).string(), part, metadata));
    for (const auto& t : part) weight_map[t.name] = name;
    names.emplace_back(name);
  }
  ordered_json index = ordered_json::object();
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = std::move(weight_map);
  std::string text = index.dump(2) + "\n";
  SPLASH_TRY_STATUS(write_file_atomic((fs::path(dir) / "model.safetensors.index.json").string(),
                                      {reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  names.emplace_back("model.safetensors.index.json");
  return names;
}

}  // namespace splash
