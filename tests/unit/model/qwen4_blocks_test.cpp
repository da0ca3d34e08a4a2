// The qwen4_exp (Flash-Next) blocks against the independent numpy reference (tests/reference/
// qwen4_exp.py), on random f32 weights and inputs at the tiny fixture config's shapes
// (qwen4_blocks_ref.py writes inputs, weights and float64 results as f32 .npy files).
//
// Tolerance: max |C++ - reference| / max |reference| <= 1e-5. The reference runs in float64 on the
// same f32 values; the C++ rounds every product and sum to f32 (unit roundoff 6e-8) through at most
// three chained projections of width <= 256, RMS norms, softmax and the delta rule: measured
// 1.4e-7 to 3.6e-7 here, so 1e-5 leaves a 30x margin for other kernel tiers and thread counts. A
// wrong gain, tap, stream or selected block moves outputs by 1e-2 or more (dense vs sparse rows: 0.3).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "model/blocks/gated_deltanet_block.h"
#include "model/blocks/hyper_connection.h"
#include "model/blocks/mtp_input.h"
#include "model/blocks/ple_layer.h"
#include "model/blocks/qsa_attention.h"
#include "model_test_util.h"

namespace splash {
namespace {

using model_test::have_numpy_reference;
using model_test::read_npy_f32;
using model_test::rel_max_err;
using model_test::TempDir;

constexpr double kTol = 1e-5;
constexpr int64_t kT = 24, kH = 64, kHc = 4, kBank = kHc * kH;

struct Arr {
  std::vector<float> v;
  int64_t rows = 0, cols = 0;
  const float* data() const { return v.data(); }
  int64_t size() const { return rows * cols; }
};

// Runs qwen4_blocks_ref.py once per process into a temporary directory, removed at exit.
struct Reference {
  std::unique_ptr<TempDir> dir;
  bool ok = false;
  std::map<std::string, Arr> arrays;
};

Reference& reference() {
  static Reference ref = [] {
    Reference r;
    if (!have_numpy_reference()) return r;
    r.dir = std::make_unique<TempDir>("qwen4_blocks");
    const std::string cmd =
        std::string("/usr/bin/python3 ") + SPLASH_SOURCE_DIR + "/tests/unit/model/qwen4_blocks_ref.py " + r.dir->path();
    r.ok = std::system(cmd.c_str()) == 0;
    return r;
  }();
  return ref;
}

class Qwen4Blocks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_numpy_reference()) GTEST_SKIP() << "no /usr/bin/python3 with numpy";
    ASSERT_TRUE(reference().ok) << "qwen4_blocks_ref.py failed";
  }

  // The array `name`, read once; a missing file or a shape other than [rows, cols] fails the test.
  static const Arr& arr(const std::string& name, int64_t rows, int64_t cols) {
    std::map<std::string, Arr>& arrays = reference().arrays;
    auto it = arrays.find(name);
    if (it == arrays.end()) {
      Arr a;
      a.v = read_npy_f32(reference().dir->path() + "/" + name + ".npy", a.rows, a.cols);
      it = arrays.emplace(name, std::move(a)).first;
    }
    EXPECT_EQ(it->second.rows, rows) << name;
    EXPECT_EQ(it->second.cols, cols) << name;
    SPLASH_CHECK(it->second.size() == rows * cols);
    return it->second;
  }
  static std::vector<float> vec(const std::string& name, int64_t n) { return arr(name, 1, n).v; }
  static PackedWeights mat(const std::string& name, int64_t rows, int64_t cols) {
    auto p = pack_weights(DType::kF32, arr(name, rows, cols).data(), rows, cols);
    SPLASH_CHECK(p.ok());
    return std::move(p).value();
  }
  static double err(const std::vector<float>& got, const Arr& want) {
    SPLASH_CHECK(static_cast<int64_t>(got.size()) >= want.size());
    return rel_max_err(got.data(), want.data(), want.size());
  }

  // The error against the reference, in the XML report and on stdout (the figures the tolerance rests on).
  static void note_error(double e) {
    ::testing::Test::RecordProperty("rel_err", std::to_string(e));
    std::printf("  rel_err vs numpy reference: %.3g\n", e);
  }

  ThreadPool threads_{2};
  const IsaLevel isa_ = IsaLevel::kAvx512;  // clamped to the CPU
};

const HyperConnectionShape kShape{kH, kHc, 1e-6f};

// ---------------------------------------------------------------------------------------------
// hyper-connections

TEST_F(Qwen4Blocks, HyperConnectionMixInjectAndAddMatchReference) {
  HyperConnectionWeights w;
  w.norm = vec("hc_norm", kBank);
  w.down = mat("hc_down", 8, kBank);
  w.up = mat("hc_up", kBank, 8);
  w.inject = mat("hc_inject", kHc, kBank);
  const Arr& bank = arr("hc_bank", kT, kBank);
  std::vector<float> m(kT * kH), inject(kT * kHc);
  HyperConnectionScratch scratch;
  hc_mix(w, kShape, bank.data(), kT, m.data(), inject.data(), scratch, threads_, isa_);
  const double e_m = err(m, arr("hc_m", kT, kH)), e_inj = err(inject, arr("hc_inject_out", kT, kHc));
  EXPECT_LE(e_m, kTol);
  EXPECT_LE(e_inj, kTol);
  std::vector<float> added = bank.v;
  hc_add(added.data(), arr("hc_y", kT, kH).data(), inject.data(), kT, kShape);
  const double e_add = err(added, arr("hc_added", kT, kBank));
  EXPECT_LE(e_add, kTol);
  note_error(std::max({e_m, e_inj, e_add}));

  // One row at a time (decode) gives the same mix.
  std::vector<float> m1(kH), inj1(kHc);
  for (int64_t r = 0; r < kT; ++r) {
    hc_mix(w, kShape, bank.data() + r * kBank, 1, m1.data(), inj1.data(), scratch, threads_, isa_);
    EXPECT_LE(rel_max_err(m1.data(), m.data() + r * kH, kH), 1e-6) << r;
  }
}

TEST_F(Qwen4Blocks, FinalMixerHasNoInjectAndMatchesReference) {
  HyperConnectionWeights w;
  w.norm = vec("mixer_norm", kBank);
  w.down = mat("mixer_down", 8, kBank);
  w.up = mat("mixer_up", kBank, 8);
  ASSERT_FALSE(w.has_inject());
  std::vector<float> m(kT * kH);
  HyperConnectionScratch scratch;
  hc_mix(w, kShape, arr("hc_bank", kT, kBank).data(), kT, m.data(), nullptr, scratch, threads_, isa_);
  EXPECT_LE(err(m, arr("mixer_m", kT, kH)), kTol);
}

// ---------------------------------------------------------------------------------------------
// QSA attention

struct Qsa {
  QsaShape shape{kH, 4, 2, 32, 4, 16, 4, 2, 1e-6f};  // budget 8 tokens = 2 blocks of 4
  QsaWeights w;
  RopeTable rope, index_rope;
};

class Qwen4Qsa : public Qwen4Blocks {
 protected:
  void SetUp() override {
    Qwen4Blocks::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const QsaShape& s = q_.shape;
    q_.w.q = mat("qsa_wq", 2 * s.n_head * s.head_dim, kH);
    q_.w.k = mat("qsa_wk", s.n_kv_head * s.head_dim, kH);
    q_.w.v = mat("qsa_wv", s.n_kv_head * s.head_dim, kH);
    q_.w.o = mat("qsa_wo", kH, s.n_head * s.head_dim);
    q_.w.q_norm = vec("qsa_q_norm", s.head_dim);
    q_.w.k_norm = vec("qsa_k_norm", s.head_dim);
    q_.w.index_qk = mat("qsa_idx_qk", (s.index_heads + 1) * s.index_dim, kH);
    q_.w.index_q_norm = vec("qsa_idx_q_norm", s.index_dim);
    q_.w.index_k_norm = vec("qsa_idx_k_norm", s.index_dim);
    // partial_rotary_factor 0.25 of head_dim 32: 8 rotated dims, in the indexer's 16 dims too.
    auto rope = RopeTable::create({.head_dim = 32, .n_rot = 8, .theta = 1e7}, 0, 4096);
    auto index_rope = RopeTable::create({.head_dim = 16, .n_rot = 8, .theta = 1e7}, 0, 4096);
    ASSERT_TRUE(rope.ok() && index_rope.ok());
    q_.rope = std::move(rope).value();
    q_.index_rope = std::move(index_rope).value();
  }

  // A sequence of one QSA layer: its KV pages (f32, so the pages hold the reference's values) and
  // its indexer state.
  struct Seq {
    KvPagePool pool;
    KvPageTable table;
    QsaIndexerCache cache;
    QsaScratch scratch;
    explicit Seq(KvFormat format = KvFormat::kF32) {
      auto p = KvPagePool::create({.n_layer = 1, .n_kv_head = 2, .head_dim = 32, .n_pages = 2, .format = format});
      SPLASH_CHECK(p.ok());
      pool = std::move(p).value();
    }
    ~Seq() { pool.release(table); }
  };

  // Runs rows [r0, r0 + sum(chunks)) of x through seq in chunks of the given sizes into out [kT, kH].
  void run(Seq& seq, const std::vector<int64_t>& chunks, std::vector<float>& out, int64_t r0 = 0,
           ThreadPool* threads = nullptr) {
    const Arr& x = arr("qsa_x", kT, kH);
    out.resize(kT * kH);
    int64_t r = r0;
    for (const int64_t c : chunks) {
      ASSERT_TRUE(seq.pool.append(seq.table, c).ok());
      qsa_attention(q_.w, q_.shape, q_.rope, q_.index_rope, {&seq.pool, &seq.table, 0}, seq.cache, x.data() + r * kH, c,
                    out.data() + r * kH, seq.scratch, threads ? *threads : threads_, isa_);
      r += c;
    }
  }

  Qsa q_;
};

TEST_F(Qwen4Qsa, PrefillMatchesReferenceInBothRegimes) {
  Seq seq;
  std::vector<float> out;
  run(seq, {kT}, out);
  const Arr& want = arr("qsa_out", kT, kH);
  const Arr& dense = arr("qsa_dense", kT, kH);
  const double e = err(out, want);
  EXPECT_LE(e, kTol);
  note_error(e);
  EXPECT_EQ(seq.cache.n_tokens, kT);
  EXPECT_EQ(static_cast<int64_t>(seq.cache.block_keys.size()), kT / 4 * 16);

  // Positions 0..10 see at most 2 complete blocks: dense (the paged kernel). From position 11 on,
  // 3+ blocks compete for 2 (the gathered selection).
  const int64_t dense_rows = 2 * 4 + 3;
  EXPECT_LE(rel_max_err(out.data(), dense.data(), dense_rows * kH), kTol);
  for (int64_t r = dense_rows; r < kT; ++r)
    EXPECT_GT(rel_max_err(out.data() + r * kH, dense.data() + r * kH, kH), 100 * kTol)
        << "row " << r << " should be sparse";

  // Some query's own complete block is left out, and it then does not see itself (transformers).
  int dropped_own = 0;
  const int64_t nb_all = kT / 4;
  std::vector<float> scores(kT * nb_all), products;
  qsa_index_scores(q_.shape, seq.scratch.iq.data(), kT, seq.cache.block_keys.data(), nb_all, scores.data(), products,
                   threads_);
  std::vector<int32_t> sel;
  for (int64_t p = 0; p < kT; ++p) {
    qsa_select(q_.shape, scores.data() + p * nb_all, p, sel);
    const int64_t nb = (p + 1) / 4;
    EXPECT_EQ(static_cast<int64_t>(sel.size()), std::min<int64_t>(nb, 2) * 4 + (p + 1 - nb * 4)) << p;
    ASSERT_TRUE(std::is_sorted(sel.begin(), sel.end()));
    if ((p + 1) % 4 == 0 && std::find(sel.begin(), sel.end(), static_cast<int32_t>(p)) == sel.end()) ++dropped_own;
  }
  EXPECT_GE(dropped_own, 1);
}

TEST_F(Qwen4Qsa, DecodeAfterPrefillEqualsOnePrefill) {
  Seq whole, steps;
  std::vector<float> all, stepped;
  run(whole, {kT}, all);
  std::vector<int64_t> chunks{9};  // dense rows and sparse rows in one chunk, then one token at a time
  chunks.resize(chunks.size() + (kT - 9), 1);
  ThreadPool four(4);  // a decode step's 2 KV heads split further: one task per query head
  run(steps, chunks, stepped, 0, &four);
  EXPECT_LE(err(stepped, arr("qsa_out", kT, kH)), kTol);
  EXPECT_LE(rel_max_err(stepped.data(), all.data(), kT * kH), 1e-5);
  EXPECT_EQ(steps.cache.block_keys, whole.cache.block_keys);
  EXPECT_EQ(steps.cache.index_keys, whole.cache.index_keys);
}

TEST_F(Qwen4Qsa, TruncateThenRerunEqualsAnUninterruptedRun) {
  Seq seq;
  std::vector<float> out;
  run(seq, {21}, out);                    // 5 complete blocks
  qsa_truncate(q_.shape, seq.cache, 13);  // back inside block 3: blocks 3 and 4 must go
  seq.pool.truncate(seq.table, 13);
  EXPECT_EQ(static_cast<int64_t>(seq.cache.block_keys.size()), 3 * 16);
  std::fill(out.begin() + 13 * kH, out.end(), 0.0f);
  run(seq, {4, 1, 6}, out, 13);
  EXPECT_LE(err(out, arr("qsa_out", kT, kH)), kTol);
}

TEST_F(Qwen4Qsa, QuantizedPagesStayCloseToReference) {
  // The engine's KV pages are int8 (per token and head, max / 127) or bf16: the same selection (the
  // indexer keys stay f32) and attention over rounded K/V. The rounding (bf16 2^-9 relative, int8
  // 1/254 of the row max) moves the output by about its own size: measured 2.0e-3 (bf16) and 6.1e-3
  // (int8), against limits of 1e-2 and 3e-2.
  for (const auto& [format, tol] : {std::pair{KvFormat::kBF16, 1e-2}, std::pair{KvFormat::kInt8, 3e-2}}) {
    Seq seq(format);
    std::vector<float> out;
    std::vector<int64_t> chunks{9};
    chunks.resize(chunks.size() + (kT - 9), 1);
    run(seq, chunks, out);
    const double e = err(out, arr("qsa_out", kT, kH));
    std::printf("  %s pages: rel_err %.3g\n", kv_format_name(format), e);
    EXPECT_LE(e, tol) << kv_format_name(format);
  }
}

TEST(Qwen4QsaSelect, TiesGoToTheLowerBlockAndTheTailIsAlwaysKept) {
  // 2 blocks of 2 tokens kept out of 4 complete ones; blocks 1 and 3 tie at the cut.
  const QsaShape s{.block = 2, .top_blocks = 2};
  const float scores[4] = {0.1f, 0.5f, 0.9f, 0.5f};
  std::vector<int32_t> sel;
  qsa_select(s, scores, 8, sel);  // position 8: 4 complete blocks + tail {8}
  EXPECT_EQ(sel, (std::vector<int32_t>{2, 3, 4, 5, 8}));
  qsa_select(s, scores, 7, sel);  // position 7: the same 4 blocks, no tail
  EXPECT_EQ(sel, (std::vector<int32_t>{2, 3, 4, 5}));
  qsa_select(s, scores, 4, sel);  // 2 complete blocks: dense
  EXPECT_EQ(sel, (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(Qwen4QsaSelect, ScoresAreTheReluSumOverIndexHeads) {
  // 2 index heads of 2 dims, 2 blocks: the second head's negative product counts as 0.
  const QsaShape s{.index_heads = 2, .index_dim = 2};
  const float q[4] = {1.0f, 0.0f, 0.0f, -1.0f};
  const float keys[4] = {0.5f, 1.0f, -2.0f, -3.0f};  // products: block 0 {0.5, -1}, block 1 {-2, 3}
  float scores[2];
  std::vector<float> products;
  ThreadPool pool(1);
  qsa_index_scores(s, q, 1, keys, 2, scores, products, pool);
  EXPECT_FLOAT_EQ(scores[0], 0.5f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(scores[1], 3.0f / std::sqrt(2.0f));
}

// ---------------------------------------------------------------------------------------------
// PLE layer

class Qwen4Ple : public Qwen4Blocks {
 protected:
  void SetUp() override {
    Qwen4Blocks::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    w_.key = mat("ple_key", kBank, 64);
    w_.value = mat("ple_value", kH, 64);
    w_.norm_key = vec("ple_norm_key", kBank);
    w_.norm_query = vec("ple_norm_query", kBank);
    w_.norm_conv = vec("ple_norm_conv", kBank);
    w_.conv = arr("ple_conv", kBank, 4).v;
  }

  std::vector<float> run(const std::vector<int64_t>& chunks, std::vector<float>& state) {
    const Arr& rows = arr("ple_rows", kT, 64);
    const Arr& bank = arr("ple_bank", kT, kBank);
    state.assign(static_cast<size_t>(shape_.state_floats()), 0.0f);
    std::vector<float> out(kT * kBank);
    PleLayerScratch scratch;
    int64_t r = 0;
    for (const int64_t c : chunks) {
      ple_layer(w_, shape_, rows.data() + r * 64, bank.data() + r * kBank, c, state.data(), out.data() + r * kBank,
                scratch, threads_, isa_);
      r += c;
    }
    EXPECT_EQ(r, kT);
    return out;
  }

  PleLayerShape shape_{kShape, 64, 4, 3};
  PleLayerWeights w_;
};

TEST_F(Qwen4Ple, PrefillMatchesReference) {
  ASSERT_EQ(shape_.state_rows(), 9);
  std::vector<float> state;
  const std::vector<float> out = run({kT}, state);
  const double e = err(out, arr("ple_out", kT, kBank));
  EXPECT_LE(e, kTol);
  EXPECT_LE(err(state, arr("ple_conv_state", 9, kBank)), kTol);
  note_error(e);
}

TEST_F(Qwen4Ple, DecodeStateEqualsPrefill) {
  std::vector<float> whole, stepped;
  const std::vector<float> all = run({kT}, whole);
  // Chunks shorter than the 9-row history (the state mixes old and new rows) and single tokens.
  const std::vector<float> steps = run({5, 2, 1, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1}, stepped);
  EXPECT_LE(err(steps, arr("ple_out", kT, kBank)), kTol);
  EXPECT_LE(rel_max_err(steps.data(), all.data(), kT * kBank), 1e-6);
  EXPECT_LE(rel_max_err(stepped.data(), whole.data(), 9 * kBank), 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Gated DeltaNet with the sigmoid output gate

TEST_F(Qwen4Blocks, GatedDeltaNetSigmoidGateMatchesReference) {
  ModelConfig c;
  c.n_embd = kH;
  c.rms_eps = 1e-6f;
  c.linear_n_key_heads = 2;
  c.linear_key_head_dim = 16;
  c.linear_n_value_heads = 4;
  c.linear_value_head_dim = 16;
  c.linear_conv_kernel = 4;
  const int64_t C = 2 * 2 * 16 + 4 * 16, vd = 64, nv = 4;
  // The split projections (q k v | z | b | a) fused into one matrix, as load_gated_deltanet does.
  std::vector<float> in;
  for (const auto& [name, rows] :
       std::vector<std::pair<std::string, int64_t>>{{"gdn_qkv", C}, {"gdn_z", vd}, {"gdn_b", nv}, {"gdn_a", nv}}) {
    const Arr& a = arr(name, rows, kH);
    in.insert(in.end(), a.v.begin(), a.v.end());
  }
  GatedDeltaNetWeights w;
  w.norm.assign(kH, 1.0f);  // the reference's input is rms(x): the hyper-connection mix has no norm of its own
  Projection p;
  auto packed = pack_weights(DType::kF32, in.data(), C + vd + 2 * nv, kH);
  ASSERT_TRUE(packed.ok());
  p.w = std::move(packed).value();
  w.in.push_back(std::move(p));
  w.conv = arr("gdn_conv", C, 4).v;
  w.a = vec("gdn_a_neg_exp", nv);
  w.dt_bias = vec("gdn_dt_bias", nv);
  w.out_norm = vec("gdn_norm", 16);
  w.out.w = mat("gdn_out", kH, vd);

  // x rows through the block in the given chunks (more than 8 rows: chunked delta rule).
  const auto run = [&](bool sigmoid, const std::vector<int64_t>& chunks) {
    w.output_gate_sigmoid = sigmoid;
    std::vector<float> x = arr("gdn_x", kT, kH).v;
    std::vector<float> state(static_cast<size_t>(gdn_state_floats(c)), 0.0f);
    Workspace ws;
    ws.h.resize(kT * kH);
    ws.out.resize(kT * kH);
    int64_t r0 = 0;
    for (const int64_t n : chunks) {
      const RowRun run{nullptr, 0, n, r0, state.data()};
      LayerContext ctx;
      ctx.config = &c;
      ctx.threads = &threads_;
      ctx.isa = isa_;
      ctx.n_rows = n;
      ctx.x = x.data() + r0 * kH;
      ctx.runs = std::span<const RowRun>(&run, 1);
      ctx.ws = &ws;
      gated_deltanet_block(w, ctx);
      r0 += n;
    }
    return x;
  };
  const std::vector<float> sig = run(true, {kT});
  const double e = err(sig, arr("gdn_out_sigmoid", kT, kH));
  EXPECT_LE(e, kTol);
  note_error(e);
  std::vector<int64_t> ones(kT, 1);
  EXPECT_LE(err(run(true, ones), arr("gdn_out_sigmoid", kT, kH)), kTol);
  // The silu gate (Qwen3.5) is a different model on the same weights.
  const std::vector<float> silu = run(false, {kT});
  EXPECT_LE(err(silu, arr("gdn_out_silu", kT, kH)), kTol);
  EXPECT_GT(err(silu, arr("gdn_out_sigmoid", kT, kH)), 100 * kTol);
}

// ---------------------------------------------------------------------------------------------
// MTP input

TEST_F(Qwen4Blocks, MtpInputNormsTheWholeBank) {
  MtpInputWeights w;
  w.norm_embedding = vec("mtp_norm_e", kH);
  w.norm_hidden = vec("mtp_norm_h", kBank);
  w.fc_embedding = mat("mtp_fc_embedding", kH, kH);
  w.fc_hidden = mat("mtp_fc_hidden", kH, kH);
  std::vector<float> out(kT * kBank);
  MtpInputScratch scratch;
  mtp_input(w, kShape, arr("mtp_embedded", kT, kH).data(), arr("mtp_bank", kT, kBank).data(), kT, out.data(), scratch,
            threads_, isa_);
  EXPECT_LE(err(out, arr("mtp_input", kT, kBank)), kTol);
}

}  // namespace
}  // namespace splash
