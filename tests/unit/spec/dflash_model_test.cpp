// The C++ DFlash drafter against the training code's own forward (tools/dflash/dflash_torch.py):
// tests/data/dflash/{plain,window} hold tiny random drafters, a target table/head and drafting rounds
// with the logits torch computed in float64 from scratch each round (tools/dflash/make_fixture.py).
// Here the rows arrive incrementally, as the engine hands them over, so the context K/V cache and
// its cropping are checked too. SPLASH_DFLASH_FIXTURE=<dir> points the test at a freshly generated
// fixture (the dflash_reference ctest does that).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "formats/safetensors.h"
#include "spec/dflash/dflash_config.h"
#include "spec/dflash/dflash_drafter.h"
#include "spec/dflash/dflash_model.h"

namespace splash {
namespace {

std::string fixture_dir() {
  const char* env = std::getenv("SPLASH_DFLASH_FIXTURE");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(SPLASH_SOURCE_DIR) + "/tests/data/dflash";
}

std::vector<float> f32(const SafeTensorsFile& f, const std::string& name) {
  const SafeTensor* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  return *safetensor_to_f32(*t);
}

struct Fixture {
  DFlashModel model;
  PackedWeights embed, head;
  std::vector<float> hidden;        // [n_pos, width]
  std::vector<int32_t> rounds;      // [n_rounds, 3]
  std::vector<std::vector<float>> logits;
  std::vector<float> embed_f, head_f;
};

Fixture load_fixture(const std::string& variant, IsaLevel isa = IsaLevel::kAvx512) {
  const std::string dir = fixture_dir() + "/" + variant;
  Fixture fx;
  DFlashLoadOptions lo;
  lo.isa = isa;
  fx.model = *DFlashModel::load(dir + "/drafter", lo);
  auto target = *SafeTensorsFile::open(dir + "/target.safetensors");
  fx.embed_f = f32(target, "embed");
  fx.head_f = f32(target, "head");
  const int64_t d = fx.model.config().n_embd;
  const int64_t v = static_cast<int64_t>(fx.embed_f.size()) / d;
  fx.embed = *pack_weights(DType::kF32, fx.embed_f.data(), v, d, isa, "embed");
  fx.head = *pack_weights(DType::kF32, fx.head_f.data(), v, d, isa, "head");
  auto rounds = *SafeTensorsFile::open(dir + "/rounds.safetensors");
  fx.hidden = f32(rounds, "hidden");
  const SafeTensor* r = rounds.find("rounds");
  EXPECT_NE(r, nullptr);
  fx.rounds.resize(r->n_elems);
  std::memcpy(fx.rounds.data(), r->data.data(), r->data.size());
  for (size_t i = 0; i < fx.rounds.size() / 3; ++i) fx.logits.push_back(f32(rounds, "logits." + std::to_string(i)));
  return fx;
}

// Largest |a - b| relative to the largest |b| of the row set.
double max_rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return err / scale;
}

void check_rounds(const std::string& variant, IsaLevel isa) {
  Fixture fx = load_fixture(variant, isa);
  ThreadPool pool(2);
  DFlashContext ctx;
  DFlashScratch scratch;
  const int64_t width = fx.model.config().context_width();
  ASSERT_EQ(fx.hidden.size() % width, 0u);
  for (size_t r = 0; r < fx.logits.size(); ++r) {
    const int32_t first = fx.rounds[3 * r], end = fx.rounds[3 * r + 1], anchor = fx.rounds[3 * r + 2];
    fx.model.add_context(ctx, fx.hidden.data() + first * width, end - first, first, pool, scratch);
    std::vector<int32_t> tokens;
    ASSERT_TRUE(fx.model.draft(ctx, anchor, end, fx.embed, fx.head, pool, scratch, &tokens).ok());
    ASSERT_EQ(scratch.logits.size(), fx.logits[r].size());
    // f32 kernels (F32 weights) against a float64 forward: measured ~1e-6 of the largest logit.
    EXPECT_LT(max_rel_err(scratch.logits, fx.logits[r]), 5e-5) << variant << " round " << r;
    const int64_t n_vocab = fx.head.rows();
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* row = fx.logits[r].data() + t * n_vocab;
      EXPECT_EQ(tokens[t], std::max_element(row, row + n_vocab) - row) << variant << " round " << r << " row " << t;
    }
  }
}

TEST(DFlashModel, MatchesTorchForwardRoundByRound) { check_rounds("plain", IsaLevel::kAvx512); }
TEST(DFlashModel, MatchesTorchForwardScalarKernels) { check_rounds("plain", IsaLevel::kScalar); }
TEST(DFlashModel, SlidingWindowMatchesTorch) { check_rounds("window", IsaLevel::kAvx512); }

// The test can fail: feeding a context row at a wrong position (the off-by-one the anchor invites)
// changes the logits well beyond the tolerance.
TEST(DFlashModel, ShiftedContextPositionsDisagree) {
  Fixture fx = load_fixture("plain");
  ThreadPool pool(1);
  DFlashContext ctx;
  DFlashScratch scratch;
  const int64_t width = fx.model.config().context_width();
  const int32_t end = fx.rounds[1], anchor = fx.rounds[2];
  fx.model.add_context(ctx, fx.hidden.data() + width, end, 1, pool, scratch);  // rows of 0..end-1 at 1..end
  ASSERT_TRUE(fx.model.draft(ctx, anchor, end + 1, fx.embed, fx.head, pool, scratch).ok());
  EXPECT_GT(max_rel_err(scratch.logits, fx.logits[0]), 1e-2);
}

// Rejected proposals never reach the drafter: after a round, re-adding rows from an earlier
// position replaces the later ones (crop to the committed length) and the result is as if fresh.
TEST(DFlashModel, RewritingRowsEqualsFreshContext) {
  Fixture fx = load_fixture("plain");
  ThreadPool pool(1);
  DFlashScratch scratch;
  const int64_t width = fx.model.config().context_width();
  const int r = 3;
  const int32_t end = fx.rounds[3 * r + 1], anchor = fx.rounds[3 * r + 2];
  DFlashContext ctx;
  std::vector<float> junk(static_cast<size_t>(4 * width), 3.0f);
  fx.model.add_context(ctx, fx.hidden.data(), 6, 0, pool, scratch);
  fx.model.add_context(ctx, junk.data(), 4, 6, pool, scratch);  // rows later replaced
  fx.model.add_context(ctx, fx.hidden.data() + 6 * width, end - 6, 6, pool, scratch);
  ASSERT_TRUE(fx.model.draft(ctx, anchor, end, fx.embed, fx.head, pool, scratch).ok());
  EXPECT_LT(max_rel_err(scratch.logits, fx.logits[r]), 5e-5);
}

// The drafter's next two proposals are the argmax of the round's reference logits.
void expect_reference_argmax(Drafter& drafter, const std::vector<float>& logits, int64_t n_vocab, size_t round) {
  auto props = drafter.propose(2);
  ASSERT_TRUE(props.ok());
  ASSERT_EQ(props->size(), 2u) << "round " << round;
  for (size_t t = 0; t < props->size(); ++t) {
    const float* row = logits.data() + t * n_vocab;
    EXPECT_EQ((*props)[t], std::max_element(row, row + n_vocab) - row) << "round " << round;
  }
}

// The Drafter adapter: observe committed tokens + hidden rows, propose greedy tokens = argmax of the
// reference logits; nothing to propose without context.
TEST(DFlashDrafter, ProposesArgmaxOfReference) {
  Fixture fx = load_fixture("plain");
  ThreadPool pool(1);
  auto shared = std::make_shared<DFlashModel>(std::move(fx.model));
  auto source = make_dflash_source(shared, fx.embed, fx.head, pool);
  EXPECT_EQ(source->method(), "dflash");
  EXPECT_GT(source->memory_bytes(), 0u);
  auto drafter = source->make();
  EXPECT_EQ(drafter->hidden_layers(), (std::vector<int>{0, 2}));
  EXPECT_TRUE(drafter->propose(3)->empty());
  const int64_t width = shared->config().context_width();
  const int64_t n_vocab = fx.head.rows();
  for (size_t r = 0; r < fx.logits.size(); ++r) {
    const int32_t first = fx.rounds[3 * r], end = fx.rounds[3 * r + 1], anchor = fx.rounds[3 * r + 2];
    // Committed tokens [first .. end]: the fixture's anchors are arbitrary, so the committed token
    // at `end` (the anchor) is the round's anchor and the others are fillers.
    std::vector<int32_t> toks(static_cast<size_t>(end + 1 - (r == 0 ? 0 : first + 1)), 1);
    toks.back() = anchor;
    DraftObservation obs;
    obs.tokens = toks;
    obs.hidden = fx.hidden.data() + first * width;
    obs.n_hidden_rows = end - first;
    obs.hidden_position = first;
    obs.hidden_width = width;
    ASSERT_TRUE(drafter->observe(obs).ok()) << drafter->observe(obs).error_message();
    expect_reference_argmax(*drafter, fx.logits[r], n_vocab, r);
  }
  DraftObservation bad;
  std::vector<int32_t> one{1};
  bad.tokens = one;
  std::vector<float> row(static_cast<size_t>(width) + 1, 0.0f);
  bad.hidden = row.data();
  bad.n_hidden_rows = 1;
  bad.hidden_position = 0;
  bad.hidden_width = width + 1;
  EXPECT_FALSE(drafter->observe(bad).ok());
}

// Rows handed over one per step (a decode step while DraftBudget pauses drafting) wait in the
// drafter and enter its context in one pass at the next propose(): the proposals equal the reference's.
TEST(DFlashDrafter, RowsObservedOneAtATimeProposeTheSame) {
  Fixture fx = load_fixture("plain");
  ThreadPool pool(1);
  auto shared = std::make_shared<DFlashModel>(std::move(fx.model));
  auto drafter = make_dflash_source(shared, fx.embed, fx.head, pool)->make();
  const int64_t width = shared->config().context_width();
  const int64_t n_vocab = fx.head.rows();
  for (size_t r = 0; r < fx.logits.size(); ++r) {
    const int32_t first = fx.rounds[3 * r], end = fx.rounds[3 * r + 1], anchor = fx.rounds[3 * r + 2];
    std::vector<int32_t> toks(static_cast<size_t>(end + 1 - (r == 0 ? 0 : first + 1)), 1);
    toks.back() = anchor;
    for (int32_t p = first; p < end; ++p) {
      DraftObservation obs;
      if (p == first) obs.tokens = toks;
      obs.hidden = fx.hidden.data() + p * width;
      obs.n_hidden_rows = 1;
      obs.hidden_position = p;
      obs.hidden_width = width;
      const Status st = drafter->observe(obs);
      ASSERT_TRUE(st.ok()) << st.error_message();
    }
    expect_reference_argmax(*drafter, fx.logits[r], n_vocab, r);
  }
}

// --- config ---------------------------------------------------------------------------------------

std::string read(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(DFlashConfig, ParsesFixtureAndPublishedLayout) {
  auto c = parse_dflash_config(read(fixture_dir() + "/plain/drafter/config.json"), "config.json");
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->block_size, 4);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_EQ(c->mask_token_id, 49);
  EXPECT_EQ(c->target_layer_ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(c->sliding_window, 0);
  // The published z-lab layout: block_size inside dflash_config, rope_theta at the top.
  auto p = parse_dflash_config(R"({"architectures":["DFlashDraftModel"],"hidden_size":4096,"num_hidden_layers":1,
      "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"intermediate_size":12288,"vocab_size":151936,
      "rms_norm_eps":1e-6,"rope_theta":1000000,"max_position_embeddings":40960,"num_target_layers":36,
      "dflash_config":{"block_size":16,"mask_token_id":151669,"target_layer_ids":[1,9,17,25,33]}})",
                               "published");
  ASSERT_TRUE(p.ok()) << p.error_message();
  EXPECT_EQ(p->block_size, 16);
  EXPECT_EQ(p->context_width(), 5 * 4096);
  EXPECT_DOUBLE_EQ(p->rope_theta, 1000000.0);
  ModelConfig target;
  target.n_embd = 4096;
  target.n_layer = 36;
  target.n_vocab = 151936;
  EXPECT_TRUE(check_dflash_target(*p, target, "d").ok());
  target.n_layer = 28;
  EXPECT_FALSE(check_dflash_target(*p, target, "d").ok());
}

TEST(DFlashConfig, RefusesWhatItCannotRun) {
  const std::string base = R"("hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,
      "vocab_size":10,"dflash_config":{"mask_token_id":9,"target_layer_ids":[0]})";
  auto parse = [&](const std::string& extra, const std::string& arch = "DFlashDraftModel") {
    return parse_dflash_config("{\"architectures\":[\"" + arch + "\"]," + base + extra + "}", "c");
  };
  EXPECT_TRUE(parse("").ok());
  EXPECT_FALSE(parse("", "DFlash2DraftModel").ok());
  EXPECT_FALSE(parse("", "Qwen3ForCausalLM").ok());
  EXPECT_FALSE(parse(R"(,"is_causal":true)").ok());
  EXPECT_FALSE(parse(R"(,"layer_types":["sliding_attention"],"sliding_window":4)").ok());  // causal by default
  EXPECT_TRUE(parse(R"(,"layer_types":["sliding_attention"],"sliding_window":4,"is_causal":false)").ok());
  EXPECT_FALSE(parse(R"(,"attention_bias":true)").ok());
  EXPECT_FALSE(parse(R"(,"rope_scaling":{"type":"linear","factor":2})").ok());
  EXPECT_FALSE(parse(R"(,"block_size":1)").ok());
  auto missing = parse_dflash_config(R"({"architectures":["DFlashDraftModel"],"hidden_size":8})", "c");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error_message().find("num_hidden_layers"), std::string::npos);
}

TEST(DFlashModel, MissingTensorIsNamed) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("dflash_missing_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  fs::copy_file(fixture_dir() + "/plain/drafter/config.json", tmp / "config.json", fs::copy_options::overwrite_existing);
  fs::copy_file(fixture_dir() + "/plain/target.safetensors", tmp / "model.safetensors",
                fs::copy_options::overwrite_existing);
  auto m = DFlashModel::load(tmp.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error_message().find("fc.weight"), std::string::npos) << m.error_message();
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace splash

namespace splash {
namespace {

TEST(DFlashDrafter, FindsPairedDrafterBesideTheModel) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("dflash_pair_" + std::to_string(::getpid()));
  fs::create_directories(tmp / "stories15M-dflash");
  std::ofstream(tmp / "stories15M-dflash" / "config.json") << "{}";
  std::ofstream(tmp / "stories15M-Q4_0.gguf") << "x";
  EXPECT_EQ(find_dflash_drafter((tmp / "stories15M-Q4_0.gguf").string()), (tmp / "stories15M-dflash").string());
  EXPECT_EQ(find_dflash_drafter((tmp / "stories15M.bin").string()), (tmp / "stories15M-dflash").string());
  EXPECT_EQ(find_dflash_drafter((tmp / "other-F32.gguf").string()), std::nullopt);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace splash
