// The prefix cache's namespace for one served model (spec 5.1, 5.6): everything that makes KV bytes
// comparable. The engine's PrefixCache and the disk tier (cache/disk/, built before the engine by
// `splash serve`) must hash the same description, or nothing on disk would chain to the root.
#pragma once

#include <string>

#include "backend/cpu/attention_kv.h"
#include "model/model.h"

namespace splash {

// make_cache_namespace() (cache/prefix_cache.h) of the model's layout, `weights_identity` and the
// KV geometry in `format`.
std::string engine_cache_namespace(const Model& model, const std::string& weights_identity, KvFormat format);

// A stable identity of the weights at `path` for the namespace: size and modification time of the
// file, or of every file in the folder (sorted by name), hashed. Empty when the path cannot be read.
std::string weights_identity(const std::string& path);

}  // namespace splash
