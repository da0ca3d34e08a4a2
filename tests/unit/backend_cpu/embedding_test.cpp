#include "backend/cpu/embedding.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/half.h"

namespace splash {
namespace {

TEST(Embedding, F32AndBf16RowsAreCopiedExactly) {
  const int64_t vocab = 5, dim = 64;
  std::vector<float> f(static_cast<size_t>(vocab * dim));
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i) * 0.25f - 30.0f;
  std::vector<uint16_t> b(f.size());
  for (size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
  auto wf = pack_weights(DType::kF32, f.data(), vocab, dim);
  auto wb = pack_weights(DType::kBF16, b.data(), vocab, dim);
  ASSERT_TRUE(wf.ok() && wb.ok());
  const std::vector<int32_t> tok{4, 0, 4, 2};
  std::vector<float> of(tok.size() * dim), ob(of.size());
  ASSERT_TRUE(embedding_lookup(*wf, tok.data(), 4, of.data()).ok());
  ASSERT_TRUE(embedding_lookup(*wb, tok.data(), 4, ob.data()).ok());
  for (size_t i = 0; i < tok.size(); ++i) {
    for (int64_t d = 0; d < dim; ++d) {
      const float want = f[static_cast<size_t>(tok[i] * dim + d)];
      EXPECT_EQ(of[i * dim + d], want);
      EXPECT_EQ(ob[i * dim + d], bf16_to_f32(f32_to_bf16(want)));
    }
  }
}

TEST(Embedding, Q8_0BlocksDecodeToScaleTimesCode) {
  // Hand-built GGML Q8_0 blocks: 34 bytes = fp16 scale + 32 int8 codes.
  const int64_t vocab = 3, dim = 64;
  std::vector<uint8_t> raw(static_cast<size_t>(vocab * (dim / 32) * 34));
  std::vector<float> want(static_cast<size_t>(vocab * dim));
  for (int64_t r = 0; r < vocab; ++r) {
    for (int64_t blk = 0; blk < dim / 32; ++blk) {
      uint8_t* p = raw.data() + (r * (dim / 32) + blk) * 34;
      const float d = 0.5f * static_cast<float>(r + 1) + 0.25f * static_cast<float>(blk);
      const uint16_t h = f32_to_f16(d);
      std::memcpy(p, &h, 2);
      for (int k = 0; k < 32; ++k) {
        const int8_t q = static_cast<int8_t>((k * 7 + r * 3 + blk) % 255 - 127);
        p[2 + k] = static_cast<uint8_t>(q);
        want[static_cast<size_t>(r * dim + blk * 32 + k)] = f16_to_f32(h) * q;
      }
    }
  }
  auto w = pack_weights(DType::kQ8_0, raw.data(), vocab, dim);
  ASSERT_TRUE(w.ok()) << w.error_message();
  const std::vector<int32_t> tok{2, 1};
  std::vector<float> out(2 * dim);
  ASSERT_TRUE(embedding_lookup(*w, tok.data(), 2, out.data()).ok());
  for (int64_t d = 0; d < dim; ++d) {
    EXPECT_FLOAT_EQ(out[d], want[static_cast<size_t>(2 * dim + d)]);
    EXPECT_FLOAT_EQ(out[dim + d], want[static_cast<size_t>(dim + d)]);
  }
}

TEST(Embedding, OutOfRangeTokenIsAnError) {
  std::vector<float> f(4 * 32, 1.0f);
  auto w = pack_weights(DType::kF32, f.data(), 4, 32);
  ASSERT_TRUE(w.ok());
  std::vector<float> out(2 * 32);
  for (int32_t bad : {4, -1, 1 << 30}) {
    const int32_t tok[2] = {1, bad};
    auto st = embedding_lookup(*w, tok, 2, out.data());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error_message().find(std::to_string(bad)), std::string::npos) << st.error_message();
  }
}

}  // namespace
}  // namespace splash
