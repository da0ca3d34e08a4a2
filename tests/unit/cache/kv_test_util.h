// Helpers of the prefix-cache tests (prefix_cache_test.cpp, prefix_cache_disk_test.cpp): token
// sequences and the KV a model would leave for them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "cache/kv_pages.h"

namespace splash::kv_test {

// Token ids 0..n-1 shifted by `salt` (different salts share no block).
inline std::vector<int32_t> seq_tokens(int64_t n, int32_t salt = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), salt);
  return t;
}

// A sequence's KV as the model would leave it: positions reserved, each row's values a function of
// (position, its token) so equal prefixes give equal bytes.
inline KvPageTable prefill(KvPagePool& pool, std::span<const int32_t> tokens) {
  KvPageTable t;
  EXPECT_TRUE(pool.append(t, static_cast<int64_t>(tokens.size())).ok());
  const int width = pool.config().n_kv_head * pool.config().head_dim;
  std::vector<float> k(static_cast<size_t>(width)), v(static_cast<size_t>(width));
  for (size_t p = 0; p < tokens.size(); ++p) {
    for (int j = 0; j < width; ++j) {
      k[static_cast<size_t>(j)] = static_cast<float>(tokens[p]) + 0.5f * static_cast<float>(p) + 0.001f * static_cast<float>(j);
      v[static_cast<size_t>(j)] = -k[static_cast<size_t>(j)];
    }
    for (int il = 0; il < pool.config().n_layer; ++il) pool.write(t, il, static_cast<int64_t>(p), 1, k.data(), v.data());
  }
  return t;
}

}  // namespace splash::kv_test
