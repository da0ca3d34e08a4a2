// SafeTensorsModel: a checkpoint made of one or more safetensors shards, looked up as one.
#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "formats/safetensors.h"

namespace splash {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

// Shard names come from a downloaded JSON file: only plain file names in the same directory.
bool is_plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

}  // namespace

Result<SafeTensorsModel> SafeTensorsModel::open(const std::string& path) {
  std::error_code ec;
  SafeTensorsModel m;
  if (!fs::is_directory(path, ec)) {
    SPLASH_TRY(auto f, SafeTensorsFile::open(path));
    m.shards_.push_back(std::make_unique<SafeTensorsFile>(std::move(f)));
    for (const auto& t : m.shards_[0]->tensors()) m.by_name_.emplace(t.name, std::make_pair(size_t{0}, &t));
  } else {
    fs::path dir(path);
    fs::path index_path = dir / kIndexName;
    if (!fs::exists(index_path, ec)) {
      fs::path single = dir / kSingleName;
      if (!fs::exists(single, ec))
        return make_error(path, ": no ", kIndexName, " or ", kSingleName, " in this directory");
      return open(single.string());
    }
    std::string ipath = index_path.string();
    SPLASH_TRY(auto text, read_text_file(ipath));
    json root;
    try {
      root = json::parse(text);
    } catch (const json::exception& e) {
      return make_error(ipath, ": not valid JSON: ", e.what());
    }
    if (!root.is_object()) return make_error(ipath, ": not a JSON object");
    auto wm = root.find("weight_map");
    if (wm == root.end()) return make_error(ipath, ": missing field 'weight_map'");
    if (!wm->is_object()) return make_error(ipath, ": field 'weight_map' is not an object");

    std::map<std::string, size_t> shard_index;  // file name -> position in shards_
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string())
        return make_error(ipath, ": weight_map['", name, "'] is not a string");
      const auto& fname = file.get_ref<const std::string&>();
      if (!is_plain_file_name(fname))
        return make_error(ipath, ": weight_map['", name, "'] = '", fname, "' is not a file name in this directory");
      auto it = shard_index.find(fname);
      if (it == shard_index.end()) {
        std::string spath = (dir / fname).string();
        if (!fs::exists(spath, ec))
          return make_error(ipath, ": shard '", fname, "' (holding tensor '", name, "') is missing");
        SPLASH_TRY(auto f, SafeTensorsFile::open(spath));
        m.shards_.push_back(std::make_unique<SafeTensorsFile>(std::move(f)));
        it = shard_index.emplace(fname, m.shards_.size() - 1).first;
      }
      const SafeTensorsFile& shard = *m.shards_[it->second];
      const SafeTensor* t = shard.find(name);
      if (t == nullptr)
        return make_error(ipath, ": tensor '", name, "' is listed in weight_map but absent from shard ", shard.path());
      m.by_name_.emplace(t->name, std::make_pair(it->second, t));
    }
    if (m.shards_.empty()) return make_error(ipath, ": weight_map is empty");
  }
  m.sorted_.reserve(m.by_name_.size());
  for (const auto& [name, where] : m.by_name_) m.sorted_.push_back(where.second);
  std::sort(m.sorted_.begin(), m.sorted_.end(),
            [](const SafeTensor* a, const SafeTensor* b) { return a->name < b->name; });
  return m;
}

const SafeTensor* SafeTensorsModel::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.second;
}

const std::map<std::string, std::string>& SafeTensorsModel::metadata() const {
  static const std::map<std::string, std::string> kEmpty;
  return shards_.empty() ? kEmpty : shards_[0]->metadata();
}

std::string SafeTensorsModel::shard_path_of(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? std::string() : shards_[it->second.first]->path();
}

}  // namespace splash
