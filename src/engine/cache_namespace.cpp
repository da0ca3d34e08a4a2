#include "engine/cache_namespace.h"

#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cache/block_store.h"
#include "cache/prefix_cache.h"

namespace splash {

std::string engine_cache_namespace(const Model& model, const std::string& weights_identity, KvFormat format) {
  const ModelConfig& c = model.config();
  return make_cache_namespace(
      c.architecture,
      str_cat("vocab=", c.n_vocab, ",embd=", c.n_embd, ",layers=", c.n_layer, ",heads=", c.n_head, ",kv_heads=",
              c.n_head_kv, ",head_dim=", c.head_dim, ",ff=", c.n_ff, ",experts=", c.n_expert, ",rope=", c.rope_theta,
              ",linear_layers=", c.layer_kinds.size()),
      weights_identity, model.kv_cache_config(format, 1));
}

std::string weights_identity(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> parts;  // name -> size:mtime
  auto add = [&](const fs::path& p, const std::string& name) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    parts.emplace_back(name, str_cat(st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec));
  };
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) add(e.path(), e.path().filename().string());
  } else {
    add(path, fs::path(path).filename().string());
  }
  if (parts.empty()) return "";
  std::sort(parts.begin(), parts.end());
  std::string all;
  for (const auto& [n, v] : parts) all += n + "=" + v + ";";
  const BlockKey k = namespace_key(all);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, k.hi, k.lo);
  return buf;
}

}  // namespace splash
