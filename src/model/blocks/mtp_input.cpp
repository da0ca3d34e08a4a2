#include "model/blocks/mtp_input.h"

#include "backend/cpu/norm.h"
#include "core/check.h"
#include "model/blocks/block_util.h"

namespace splash {

void mtp_input(const MtpInputWeights& w, const HyperConnectionShape& s, const float* embedded, const float* bank,
               int64_t n, float* out, MtpInputScratch& scratch, ThreadPool& pool, IsaLevel isa) {
  const int64_t H = s.n_embd, B = s.bank();
  SPLASH_CHECK(static_cast<int64_t>(w.norm_embedding.size()) == H && static_cast<int64_t>(w.norm_hidden.size()) == B);
  SPLASH_CHECK(w.fc_embedding.rows() == H && w.fc_embedding.cols() == H && w.fc_hidden.rows() == H &&
               w.fc_hidden.cols() == H);
  if (n == 0) return;
  grow(scratch.en, n * H);
  grow(scratch.e, n * H);
  grow(scratch.hn, n * B);
  rms_norm(embedded, w.norm_embedding.data(), s.eps, scratch.en.data(), n, H, isa);
  matmul(w.fc_embedding, scratch.en.data(), scratch.e.data(), n, pool);
  rms_norm(bank, w.norm_hidden.data(), s.eps, scratch.hn.data(), n, B, isa);
  matmul(w.fc_hidden, scratch.hn.data(), out, n * s.hc, pool);  // the streams as n hc rows of n_embd
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < s.hc; ++k)
      for (int64_t j = 0; j < H; ++j) out[r * B + k * H + j] += scratch.e[static_cast<size_t>(r * H + j)];
}

}  // namespace splash
