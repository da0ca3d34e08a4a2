// The MoE block on hand-built f32 weights against a scalar double-precision version of its math,
// and the property the block exists for: a pass reads only the experts its rows selected. The
// experts no row selected are filled with NaN; any read of them would reach the output.
#include <cmath>
#include <limits>
#include <set>

#include "gtest/gtest.h"
#include "model/blocks/moe_block.h"

namespace splash {
namespace {

constexpr int64_t kDim = 64, kExperts = 6, kTopK = 2, kFf = 32, kSharedFf = 32;

struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  float next() {  // uniform in [-1, 1)
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(s >> 11) % (1 << 20)) / static_cast<float>(1 << 19) - 1.0f;
  }
  std::vector<float> fill(int64_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = scale * next();
    return v;
  }
};

// Owns the f32 buffers the MoeWeights views point into.
struct Fixture {
  ModelConfig config;
  std::vector<float> router, norm, shared_gate;
  std::vector<std::vector<float>> gate, up, down;    // [expert]
  std::vector<float> sh_gate, sh_up, sh_down;
  bool with_shared = false;

  explicit Fixture(bool shared, bool norm_topk = true) : with_shared(shared) {
    Rng rng;
    config.n_embd = kDim;
    config.n_expert = kExperts;
    config.n_expert_used = kTopK;
    config.n_ff_expert = kFf;
    config.n_ff_shared_expert = shared ? kSharedFf : 0;
    config.norm_topk_prob = norm_topk;
    config.rms_eps = 1e-6f;
    router = rng.fill(kExperts * kDim, 0.5f);
    norm = rng.fill(kDim, 0.1f);
    for (float& w : norm) w += 1.0f;
    for (int e = 0; e < kExperts; ++e) {
      gate.push_back(rng.fill(kFf * kDim, 0.2f));
      up.push_back(rng.fill(kFf * kDim, 0.2f));
      down.push_back(rng.fill(kDim * kFf, 0.2f));
    }
    sh_gate = rng.fill(kSharedFf * kDim, 0.2f);
    sh_up = rng.fill(kSharedFf * kDim, 0.2f);
    sh_down = rng.fill(kDim * kSharedFf, 0.2f);
    shared_gate = rng.fill(kDim, 0.3f);
  }

  static PackedWeights view(const std::vector<float>& w, int64_t rows, int64_t cols) {
    auto p = pack_weights(DType::kF32, w.data(), rows, cols);
    SPLASH_CHECK(p.ok());
    return std::move(p).value();
  }

  MoeWeights weights() const {
    MoeWeights w;
    w.norm = norm;
    w.router = view(router, kExperts, kDim);
    for (int e = 0; e < kExperts; ++e) {
      w.gate.push_back(view(gate[e], kFf, kDim));
      w.up.push_back(view(up[e], kFf, kDim));
      w.down.push_back(view(down[e], kDim, kFf));
    }
    if (with_shared) {
      Projection g, u;
      g.w = view(sh_gate, kSharedFf, kDim);
      u.w = view(sh_up, kSharedFf, kDim);
      w.shared.gate_up.push_back(std::move(g));
      w.shared.gate_up.push_back(std::move(u));
      w.shared.down.w = view(sh_down, kDim, kSharedFf);
      w.shared_gate = shared_gate;
    }
    return w;
  }

  // The block's math in double: returns x + moe(x) for rows x [n, dim]; `used` collects the
  // experts any row selected.
  std::vector<double> reference(const std::vector<float>& x, int64_t n, std::set<int>& used) const {
    std::vector<double> out(x.begin(), x.end());
    auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> h(kDim);
      double ss = 0;
      for (int64_t i = 0; i < kDim; ++i) ss += double(x[r * kDim + i]) * x[r * kDim + i];
      const double inv = 1.0 / std::sqrt(ss / kDim + config.rms_eps);
      for (int64_t i = 0; i < kDim; ++i) h[i] = x[r * kDim + i] * inv * norm[i];
      std::vector<double> p(kExperts);
      double mx = -1e300, sum = 0;
      for (int e = 0; e < kExperts; ++e) {
        for (int64_t i = 0; i < kDim; ++i) p[e] += router[e * kDim + i] * h[i];
        mx = std::max(mx, p[e]);
      }
      for (double& v : p) sum += (v = std::exp(v - mx));
      for (double& v : p) v /= sum;
      std::vector<int> order(kExperts);
      for (int e = 0; e < kExperts; ++e) order[e] = e;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
      double wsum = 0;
      for (int j = 0; j < kTopK; ++j) wsum += p[order[j]];
      auto mlp = [&](const std::vector<float>& g, const std::vector<float>& u, const std::vector<float>& dn, int64_t f,
                     double scale) {
        std::vector<double> a(f);
        for (int64_t k = 0; k < f; ++k) {
          double gv = 0, uv = 0;
          for (int64_t i = 0; i < kDim; ++i) {
            gv += g[k * kDim + i] * h[i];
            uv += u[k * kDim + i] * h[i];
          }
          a[k] = silu(gv) * uv;
        }
        for (int64_t i = 0; i < kDim; ++i) {
          double y = 0;
          for (int64_t k = 0; k < f; ++k) y += dn[i * f + k] * a[k];
          out[r * kDim + i] += scale * y;
        }
      };
      for (int j = 0; j < kTopK; ++j) {
        const int e = order[j];
        used.insert(e);
        mlp(gate[e], up[e], down[e], kFf, config.norm_topk_prob ? p[e] / wsum : p[e]);
      }
      if (with_shared) {
        double g = 0;
        for (int64_t i = 0; i < kDim; ++i) g += shared_gate[i] * h[i];
        mlp(sh_gate, sh_up, sh_down, kSharedFf, 1.0 / (1.0 + std::exp(-g)));
      }
    }
    return out;
  }
};

// Runs the block over rows x (in place) with a fresh workspace.
void run_block(const Fixture& fx, const MoeWeights& w, std::vector<float>& x, int64_t n, ThreadPool& threads) {
  Workspace ws;
  ws.h.resize(n * kDim);
  ws.out.resize(n * kDim);
  LayerContext ctx;
  ctx.config = &fx.config;
  ctx.threads = &threads;
  ctx.n_rows = n;
  ctx.x = x.data();
  ctx.ws = &ws;
  moe_block(w, ctx);
}

double max_err(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) e = std::max(e, std::fabs(got[i] - want[i]));
  return e;
}

void poison(std::vector<float>& v) { std::fill(v.begin(), v.end(), std::numeric_limits<float>::quiet_NaN()); }

class MoeBlock : public ::testing::TestWithParam<int> {};  // rows in the pass: 1 = decode

TEST_P(MoeBlock, MatchesScalarMathAndReadsOnlySelectedExperts) {
  const int64_t n = GetParam();
  ThreadPool threads(2);
  for (bool shared : {false, true}) {
    for (bool norm_topk : {true, false}) {
      Fixture fx(shared, norm_topk);
      Rng rng{12345u + static_cast<uint64_t>(n)};
      const std::vector<float> x0 = rng.fill(n * kDim, 1.0f);
      std::set<int> used;
      const std::vector<double> want = fx.reference(x0, n, used);
      ASSERT_LT(static_cast<int64_t>(used.size()), kExperts) << "every expert selected: nothing to poison";

      // Unselected experts poisoned: the result must still be finite and right.
      for (int e = 0; e < kExperts; ++e) {
        if (used.count(e)) continue;
        poison(fx.gate[e]);
        poison(fx.up[e]);
        poison(fx.down[e]);
      }
      std::vector<float> x = x0;
      run_block(fx, fx.weights(), x, n, threads);
      for (float v : x) ASSERT_TRUE(std::isfinite(v)) << "an unselected expert was read (shared " << shared << ")";
      EXPECT_LT(max_err(x, want), 2e-5) << "shared " << shared << " norm_topk " << norm_topk;

      // Control: poisoning one selected expert must show, or the test above proves nothing.
      poison(fx.down[*used.begin()]);
      x = x0;
      run_block(fx, fx.weights(), x, n, threads);
      bool any_nan = false;
      for (float v : x) any_nan |= std::isnan(v);
      EXPECT_TRUE(any_nan) << "a selected expert's weights did not reach the output";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, MoeBlock, ::testing::Values(1, 3));

TEST(MoeBlock, PassesAboveTheBatchedRowsRunExpertByExpertToTheSameMath) {
  // Up to kMoeBatchedMaxRows rows the selected experts run as two batched task sets; above it each
  // expert runs over its rows on its own (prefill). Both must give the block's math.
  const int64_t n = kMoeBatchedMaxRows + 5;
  ThreadPool threads(2);
  for (bool shared : {false, true}) {
    Fixture fx(shared);
    Rng rng{777u};
    const std::vector<float> x0 = rng.fill(n * kDim, 1.0f);
    std::set<int> used;
    const std::vector<double> want = fx.reference(x0, n, used);
    std::vector<float> x = x0;
    run_block(fx, fx.weights(), x, n, threads);
    EXPECT_LT(max_err(x, want), 2e-5) << "shared " << shared;
  }
}

TEST(MoeRoute, SoftmaxTopKTiesAndNormalization) {
  // Experts 1 and 3 tie for second place: the lower index wins.
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 1.0f, -1.0f};
  int32_t expert[2];
  float weight[2];
  std::vector<float> l = logits;
  moe_route(l.data(), 5, 2, true, expert, weight);
  EXPECT_EQ(expert[0], 2);
  EXPECT_EQ(expert[1], 1);
  const double e2 = std::exp(2.0), e1 = std::exp(1.0);
  EXPECT_NEAR(weight[0], e2 / (e2 + e1), 1e-6);
  EXPECT_NEAR(weight[0] + weight[1], 1.0, 1e-6);
  l = logits;
  moe_route(l.data(), 5, 2, false, expert, weight);
  double z = 0;
  for (float v : logits) z += std::exp(double(v));
  EXPECT_NEAR(weight[0], e2 / z, 1e-6);  // plain softmax probabilities without renormalization
  EXPECT_NEAR(weight[1], e1 / z, 1e-6);
}

}  // namespace
}  // namespace splash
