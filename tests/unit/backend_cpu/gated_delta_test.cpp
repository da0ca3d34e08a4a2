// Gated delta rule kernels: the chunked form against the token-by-token recurrence (the scalar
// recurrence is the reference), every ISA against the scalar one, a hand-computed case, and the
// causal conv against a direct formula including state carried across calls.
#include "backend/cpu/gated_delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace splash {
namespace {

std::vector<IsaLevel> levels() {
  std::vector<IsaLevel> out{IsaLevel::kScalar};
  if (best_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  return out;
}

// Inputs of one head over n tokens, laid out as the block does ([n, dim] rows at a stride).
struct Inputs {
  int64_t n;
  int dk, dv;
  std::vector<float> q, k, v, g, beta;
  Inputs(int64_t n_, int dk_, int dv_, uint32_t seed, float g_min) : n(n_), dk(dk_), dv(dv_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    q.resize(static_cast<size_t>(n * dk));
    k.resize(q.size());
    v.resize(static_cast<size_t>(n * dv));
    for (float& x : q) x = nd(rng);
    for (float& x : k) x = nd(rng);
    for (float& x : v) x = nd(rng);
    for (int64_t t = 0; t < n; ++t) {  // l2-normalized like the block, q scaled by 1/sqrt(dk)
      l2_normalize_rows(q.data() + t * dk, dk, 1, dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)));
      l2_normalize_rows(k.data() + t * dk, dk, 1, dk, 1e-6f, 1.0f);
      g.push_back(g_min * u(rng));
      beta.push_back(0.05f + 0.9f * u(rng));
    }
  }
  DeltaRuleHead head(float* out) const {
    DeltaRuleHead h;
    h.q = q.data();
    h.k = k.data();
    h.v = v.data();
    h.g = g.data();
    h.beta = beta.data();
    h.out = out;
    h.q_stride = h.k_stride = dk;
    h.v_stride = h.out_stride = dv;
    h.gb_stride = 1;
    h.n = n;
    h.dk = dk;
    h.dv = dv;
    return h;
  }
};

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / den;
}

TEST(GatedDelta, OneTokenFromZeroStateByHand) {
  // S = 0: S' = k (beta v)^T, o = S'^T q = beta (q.k) v.
  const float q[2] = {0.6f, 0.8f}, k[2] = {1.0f, 0.0f}, v[3] = {1.0f, -2.0f, 0.5f}, g = -0.3f, beta = 0.5f;
  float out[3], state[6] = {};
  DeltaRuleHead h;
  h.q = q;
  h.k = k;
  h.v = v;
  h.g = &g;
  h.beta = &beta;
  h.out = out;
  h.q_stride = h.k_stride = 2;
  h.v_stride = h.out_stride = 3;
  h.n = 1;
  h.dk = 2;
  h.dv = 3;
  for (IsaLevel l : levels()) {
    std::fill(state, state + 6, 0.0f);
    gated_delta_recurrent(h, state, l);
    for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(out[j], 0.5f * 0.6f * v[j]);
    for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(state[j], 0.5f * v[j]);  // row of k[0] = 1
    for (int j = 3; j < 6; ++j) EXPECT_EQ(state[j], 0.0f);
    std::vector<float> scratch;
    std::fill(state, state + 6, 0.0f);
    gated_delta_chunked(h, state, 64, scratch, l);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(out[j], 0.5f * 0.6f * v[j], 1e-6f);
  }
}

TEST(GatedDelta, ChunkedEqualsRecurrence) {
  // Shapes with SIMD tails (20, 12), chunk boundaries crossed (n 150 > 2 x 64), strong and weak decay.
  struct Shape {
    int64_t n;
    int dk, dv, chunk;
    float g_min;
  };
  for (const Shape& s : {Shape{150, 32, 32, 64, -1.0f}, Shape{150, 20, 12, 64, -6.0f}, Shape{37, 128, 128, 16, -0.05f},
                         Shape{5, 16, 24, 64, -2.0f}}) {
    const Inputs in(s.n, s.dk, s.dv, 11 + static_cast<uint32_t>(s.n), s.g_min);
    // A non-zero starting state, as in the middle of a sequence.
    std::vector<float> s0(static_cast<size_t>(s.dk * s.dv));
    for (size_t i = 0; i < s0.size(); ++i) s0[i] = 0.1f * std::sin(0.37f * static_cast<float>(i));
    std::vector<float> ref_out(static_cast<size_t>(s.n * s.dv)), ref_state = s0;
    gated_delta_recurrent(in.head(ref_out.data()), ref_state.data(), IsaLevel::kScalar);
    for (IsaLevel l : levels()) {
      std::vector<float> out(ref_out.size()), state = s0, scratch;
      gated_delta_chunked(in.head(out.data()), state.data(), s.chunk, scratch, l);
      EXPECT_LT(rel_err(out, ref_out), 2e-5) << "n " << s.n << " dk " << s.dk << " " << isa_level_name(l);
      EXPECT_LT(rel_err(state, ref_state), 2e-5) << "n " << s.n << " dk " << s.dk << " " << isa_level_name(l);
      std::vector<float> rout(ref_out.size()), rstate = s0;
      gated_delta_recurrent(in.head(rout.data()), rstate.data(), l);
      EXPECT_LT(rel_err(rout, ref_out), 1e-5) << isa_level_name(l);
      EXPECT_LT(rel_err(rstate, ref_state), 1e-5) << isa_level_name(l);
    }
  }
}

TEST(GatedDelta, DecayAndBetaMatter) {
  // Guards the test above against a kernel that ignores g or beta: changing either changes o.
  const Inputs in(20, 16, 16, 5, -1.0f);
  std::vector<float> a(20 * 16), b(a.size()), s1(256, 0.0f), s2(256, 0.0f);
  gated_delta_recurrent(in.head(a.data()), s1.data(), IsaLevel::kScalar);
  Inputs other = in;
  for (float& g : other.g) g *= 0.5f;
  gated_delta_recurrent(other.head(b.data()), s2.data(), IsaLevel::kScalar);
  EXPECT_GT(rel_err(a, b), 1e-3);
}

TEST(CausalConv, MatchesFormulaAndCarriesState) {
  const int K = 4;
  const int64_t C = 13, n = 9;
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * C)), w(static_cast<size_t>(C * K));
  for (float& v : x) v = nd(rng);
  for (float& v : w) v = nd(rng);
  // Direct: zero history, out[t, c] = silu(sum_j w[c, j] x[t - (K-1) + j, c]).
  std::vector<float> want(x.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int j = 0; j < K; ++j) {
        const int64_t src = t - (K - 1) + j;
        if (src >= 0) s += static_cast<double>(w[c * K + j]) * x[src * C + c];
      }
      want[t * C + c] = static_cast<float>(s / (1.0 + std::exp(-s)));
    }
  std::vector<float> state(static_cast<size_t>((K - 1) * C), 0.0f), out(x.size());
  causal_conv_silu(x.data(), C, state.data(), w.data(), K, n, C, out.data());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5f) << i;
  for (int64_t r = 0; r < K - 1; ++r)  // state = the last K-1 inputs
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(state[r * C + c], x[(n - (K - 1) + r) * C + c]);
  // Split into calls of 1, 2 and 6 tokens: same outputs.
  std::fill(state.begin(), state.end(), 0.0f);
  int64_t t0 = 0;
  for (int64_t len : {1, 2, 6}) {
    causal_conv_silu(x.data() + t0 * C, C, state.data(), w.data(), K, len, C, out.data() + t0 * C);
    t0 += len;
  }
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5f) << i;
}

}  // namespace
}  // namespace splash
