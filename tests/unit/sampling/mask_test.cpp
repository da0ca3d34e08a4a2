// row_apply_mask against the plain per-token rule, on random masks with all-zero, all-one and mixed
// words and rows that end inside a word.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sampling/row_kernels.h"

namespace splash {
namespace {

TEST(RowApplyMask, EqualsThePerTokenRule) {
  std::mt19937_64 rng(17);
  for (size_t n : {1u, 3u, 63u, 64u, 65u, 130u, 1000u, 151936u}) {
    std::vector<float> logits(n), expect(n);
    std::normal_distribution<float> value(0.0f, 3.0f);
    for (float& v : logits) v = value(rng);
    std::vector<uint64_t> mask((n + 63) / 64);
    for (size_t w = 0; w < mask.size(); ++w) {
      const int kind = static_cast<int>(rng() % 3);
      mask[w] = kind == 0 ? 0 : kind == 1 ? ~uint64_t{0} : rng();
    }
    for (size_t i = 0; i < n; ++i) {
      expect[i] = ((mask[i / 64] >> (i % 64)) & 1) ? logits[i] : -INFINITY;
    }
    row_apply_mask(logits, mask.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(logits[i], expect[i]) << "n " << n << " i " << i;
  }
}

}  // namespace
}  // namespace splash
