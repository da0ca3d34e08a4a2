// The MTP head drafter (spec/mtp/) on tiny-qwen3-next-mtp (a hybrid with an MTP head, random
// weights) and tiny-qwen3-next-moe-mtp (its MoE variant: the MTP layer's MLP is the MoE block):
// the drafting logits against the independent numpy reference (tests/reference/mtp.py),
// incrementally observed rows and a rollback included; greedy speculative decoding with it equal to
// plain decoding token for token in generate() and in batched engine lanes (the target's recurrent
// state rolled back after every rejected proposal); --spec mtp / auto picking or refusing it.
// Acceptance is not tested: random MTP weights rarely agree with the target.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include "engine/generate.h"
#include "gtest/gtest.h"
#include "model/architecture.h"
#include "scheduler_test_util.h"
#include "spec/make_source.h"
#include "spec/mtp/mtp_drafter.h"
#include "spec/mtp/mtp_model.h"
#include "testmodel/test_model.h"

namespace splash {
namespace {

using sched_test::load_model;

std::string temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("splash_mtp_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("splash_mtp_" + std::to_string(getpid())), ec);
  }
} cleanup;

bool have_hybrid() { return find_architecture("qwen3_next") != nullptr; }

// fused: a plain safetensors MoE with transformers 5 / Qwen3.5-MoE fused experts (gate_up_proj).
std::string write_preset(const std::string& preset, uint64_t seed, bool gguf = false, const std::string& arch = "",
                         bool fused = false) {
  auto spec = test_model_preset(preset);
  EXPECT_TRUE(spec.ok()) << spec.error_message();
  spec->seed = seed;
  if (gguf) spec->format = TestModelFormat::kGguf;
  if (!arch.empty()) spec->arch = arch;
  spec->hf_fused_experts = fused;
  const std::string path = temp_dir() + "/" + preset + "_" + spec->arch + "_" + std::to_string(seed) +
                           (fused ? "_fused" : "") + (spec->format == TestModelFormat::kGguf ? ".gguf" : "");
  if (!std::filesystem::exists(path)) {
    EXPECT_TRUE(write_test_model(*spec, path).ok());
  }
  return path;
}

bool have_numpy() {
  return std::filesystem::exists("/usr/bin/python3") &&
         std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

// tests/reference/mtp.py: proposals and [k, n_vocab] logits after `tokens`.
bool reference_draft(const std::string& model, const std::vector<int32_t>& tokens, int k, std::vector<int32_t>& props,
                     std::vector<float>& logits, int64_t n_vocab) {
  std::string csv;
  for (int32_t t : tokens) {
    if (!csv.empty()) csv += ',';
    csv += std::to_string(t);
  }
  const std::string out = temp_dir() + "/ref.f32", txt = temp_dir() + "/ref.txt";
  const std::string cmd = str_cat("/usr/bin/python3 ", SPLASH_SOURCE_DIR, "/tests/reference/mtp.py --model ", model,
                                  " --tokens ", csv, " --n-draft ", k, " --out ", out, " > ", txt);
  if (std::system(cmd.c_str()) != 0) return false;
  std::ifstream f(out, std::ios::binary);
  logits.assign(static_cast<size_t>(k * n_vocab), 0.0f);
  f.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!f) return false;
  std::ifstream t(txt);
  std::string line;
  std::getline(t, line);
  props.clear();
  size_t p = 0;
  while (p < line.size()) {
    const size_t c = line.find(',', p);
    props.push_back(std::stoi(line.substr(p, c == std::string::npos ? std::string::npos : c - p)));
    if (c == std::string::npos) break;
    p = c + 1;
  }
  return static_cast<int>(props.size()) == k;
}

// The target's last-layer rows of `tokens` (a fresh sequence).
std::vector<float> target_hidden(const Model& model, const std::vector<int32_t>& tokens) {
  auto kv = KvPagePool::create(model.kv_cache_config(KvFormat::kF32, 64));
  EXPECT_TRUE(kv.ok());
  ThreadPool threads(2);
  SequenceState seq;
  SequenceRun run{&seq, tokens, LogitRows::kLast};
  ForwardOptions fo;
  fo.hidden_layers = {static_cast<int>(model.config().n_layer) - 1};
  auto out = model.forward({&run, 1}, *kv, threads, fo);
  EXPECT_TRUE(out.ok()) << out.error_message();
  release_sequence(*kv, seq);
  return out.ok() ? out->hidden : std::vector<float>{};
}

// Drafting logits of MtpModel::step after `tokens` (rows 0..n-2 in one pass, then chained), the
// way the drafter computes them.
std::vector<float> model_draft_logits(const MtpModel& mtp, const std::vector<int32_t>& tokens, int k) {
  const Model& target = mtp.target();
  const int64_t d = target.config().n_embd, nv = target.config().n_vocab;
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<float> hidden = target_hidden(target, tokens);
  mtp.target_final_norm(hidden.data(), n);
  ThreadPool pool(2);
  MtpState st;
  std::vector<float> out(static_cast<size_t>((n - 1) * d)), logits(static_cast<size_t>(k * nv));
  EXPECT_TRUE(mtp.step(st, tokens.data() + 1, hidden.data(), n - 1, 0, pool, out.data(), logits.data()).ok());
  std::vector<float> g(out.end() - d, out.end());
  for (int j = 1; j < k; ++j) {
    const float* prev = logits.data() + (j - 1) * nv;
    const int32_t tok = static_cast<int32_t>(std::max_element(prev, prev + nv) - prev);
    EXPECT_TRUE(mtp.step(st, &tok, g.data(), 1, n - 2 + j, pool, g.data(), logits.data() + j * nv).ok());
  }
  return logits;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return a.size() == b.size() ? m : 1e30f;
}

// Observes `tokens` from position `from` with their hidden rows [from, from + n_rows).
Status observe(Drafter& d, const std::vector<int32_t>& all, int64_t from_token, const std::vector<float>& hidden,
               int64_t hidden_pos, int64_t n_rows, int64_t n_embd) {
  DraftObservation obs;
  obs.tokens = std::span<const int32_t>(all).subspan(static_cast<size_t>(from_token));
  obs.hidden = hidden.data() + hidden_pos * n_embd;
  obs.n_hidden_rows = n_rows;
  obs.hidden_position = hidden_pos;
  obs.hidden_width = n_embd;
  return d.observe(obs);
}

constexpr float kLogitTol = 1e-4f;  // float32 kernels vs float64 numpy; measured ~1e-6

// Both hybrids name their MTP tensors alike; the MoE preset's MTP layer has the MoE block (GGUF
// stacked ffn_*_exps, safetensors one tensor per expert or, Qwen3.5-MoE style, fused experts).
struct MtpCase {
  const char* preset;
  const char* arch;
  bool gguf;
  bool fused;
  const char* name;
};
void PrintTo(const MtpCase& c, std::ostream* os) { *os << c.name; }

class MtpReference : public ::testing::TestWithParam<MtpCase> {};

TEST_P(MtpReference, LogitsAndProposalsMatchNumpyReference) {
  const MtpCase& tc = GetParam();
  const std::string arch = tc.arch;
  const bool gguf = tc.gguf;
  if (find_architecture(arch) == nullptr) GTEST_SKIP() << arch << " not in this build";
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  const std::string path = write_preset(tc.preset, 3, gguf, arch, tc.fused);
  auto m = load_model(path);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->model.config().n_layer, 4u) << "GGUF block_count counts the nextn block; the model has 4 layers";
  EXPECT_EQ(m->model.config().n_mtp_layers, 1u);
  const bool moe = m->model.config().n_expert > 0;
  EXPECT_EQ(moe, std::string(tc.preset).find("moe") != std::string::npos);
  const int64_t d = m->model.config().n_embd, nv = m->model.config().n_vocab;
  auto mtp = MtpModel::load(m->files, m->model);
  ASSERT_TRUE(mtp.ok()) << mtp.error_message();
  ThreadPool pool(2);
  auto src = make_mtp_source(m->files, m->model, pool);
  ASSERT_TRUE(src.ok()) << src.error_message();
  auto drafter = (*src)->make();
  ASSERT_EQ(drafter->hidden_layers(), std::vector<int>{static_cast<int>(m->model.config().n_layer) - 1});

  const int k = 5;
  std::vector<int32_t> tokens = {1, 17, 42, 9, 100, 3, 250, 77, 12};
  const std::vector<int32_t> extra = {33, 5, 301, 64};
  std::vector<int32_t> longer = tokens;
  longer.insert(longer.end(), extra.begin(), extra.end());

  // Round 1: the prompt with the hidden rows of all its tokens (as a prefill hands them over).
  std::vector<int32_t> ref_props;
  std::vector<float> ref_logits;
  ASSERT_TRUE(reference_draft(path, tokens, k, ref_props, ref_logits, nv));
  const float diff1 = max_abs_diff(model_draft_logits(**mtp, tokens, k), ref_logits);
  EXPECT_LT(diff1, kLogitTol);
  std::printf("mtp logits vs numpy (%s): max |diff| %.2e (round 1)\n", tc.name, diff1);
  const std::vector<float> h_long = target_hidden(m->model, longer);
  ASSERT_TRUE(observe(*drafter, tokens, 0, h_long, 0, static_cast<int64_t>(tokens.size()), d).ok());
  auto p1 = drafter->propose(k);
  ASSERT_TRUE(p1.ok()) << p1.error_message();
  EXPECT_EQ(*p1, ref_props) << "round 1";
  // Asking again without new tokens gives the same proposals (the chained rows were dropped).
  auto p1b = drafter->propose(k);
  ASSERT_TRUE(p1b.ok());
  EXPECT_EQ(*p1b, ref_props) << "repeated propose";

  // Round 2: more committed tokens, with the hidden rows a verify pass gives (from the previous last
  // token up to, not including, the newest).
  ASSERT_TRUE(reference_draft(path, longer, k, ref_props, ref_logits, nv));
  const float diff2 = max_abs_diff(model_draft_logits(**mtp, longer, k), ref_logits);
  EXPECT_LT(diff2, kLogitTol);
  const int64_t n1 = static_cast<int64_t>(tokens.size());
  ASSERT_TRUE(observe(*drafter, longer, n1, h_long, n1, static_cast<int64_t>(extra.size()) - 1, d).ok());
  auto p2 = drafter->propose(k);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(*p2, ref_props) << "round 2 (incremental rows)";

  // Rollback to the first prompt, then the same tokens again: round 2's proposals again.
  drafter->rollback(n1);
  auto p3 = drafter->propose(k);
  ASSERT_TRUE(p3.ok());
  EXPECT_TRUE(p3->empty()) << "the last committed row's hidden state went with the rollback";
  ASSERT_TRUE(observe(*drafter, longer, n1, h_long, n1 - 1, static_cast<int64_t>(extra.size()), d).ok());
  auto p4 = drafter->propose(k);
  ASSERT_TRUE(p4.ok());
  EXPECT_EQ(*p4, ref_props) << "after rollback";
}

INSTANTIATE_TEST_SUITE_P(
    ArchFormats, MtpReference,
    ::testing::Values(MtpCase{"tiny-qwen3-next-mtp", "qwen3_next", false, false, "qwen3_next_safetensors"},
                      MtpCase{"tiny-qwen3-next-mtp", "qwen3_next", true, false, "qwen3_next_gguf"},
                      MtpCase{"tiny-qwen3-next-mtp", "qwen3_5", false, false, "qwen3_5_safetensors"},
                      MtpCase{"tiny-qwen3-next-mtp", "qwen3_5", true, false, "qwen3_5_gguf"},
                      MtpCase{"tiny-qwen3-next-moe-mtp", "qwen3_next", false, false, "qwen3_next_moe_safetensors"},
                      MtpCase{"tiny-qwen3-next-moe-mtp", "qwen3_next", true, false, "qwen3_next_moe_gguf"},
                      MtpCase{"tiny-qwen3-next-moe-mtp", "qwen3_5", false, true, "qwen3_5_moe_fused_safetensors"},
                      MtpCase{"tiny-qwen3-next-moe-mtp", "qwen3_5", true, false, "qwen3_5_moe_gguf"}),
    [](const ::testing::TestParamInfo<MtpCase>& i) { return std::string(i.param.name); });

// A prompt longer than one pass of rows (256): observed at once and in uneven pieces, the drafter
// proposes what one MtpModel::step over all rows gives.
TEST(MtpDrafter, ChunkedRowsEqualOnePass) {
  if (!have_hybrid()) GTEST_SKIP() << "qwen3_next not in this build";
  auto m = load_model(write_preset("tiny-qwen3-next-mtp", 4));
  ASSERT_TRUE(m);
  const int64_t d = m->model.config().n_embd, nv = m->model.config().n_vocab;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 600; ++i) tokens.push_back(static_cast<int32_t>((i * 7919 + 13) % nv));
  auto mtp = MtpModel::load(m->files, m->model);
  ASSERT_TRUE(mtp.ok()) << mtp.error_message();
  const int k = 4;
  const std::vector<float> logits = model_draft_logits(**mtp, tokens, k);
  std::vector<int32_t> want;
  for (int j = 0; j < k; ++j) want.push_back(static_cast<int32_t>(
      std::max_element(logits.begin() + j * nv, logits.begin() + (j + 1) * nv) - (logits.begin() + j * nv)));
  const std::vector<float> hidden = target_hidden(m->model, tokens);
  ThreadPool pool(2);
  auto src = make_mtp_source(m->files, m->model, pool);
  ASSERT_TRUE(src.ok());
  auto whole = (*src)->make();
  ASSERT_TRUE(observe(*whole, tokens, 0, hidden, 0, static_cast<int64_t>(tokens.size()), d).ok());
  auto a = whole->propose(k);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, want);
  // Pieces as chunked prefill hands them over: all tokens first, rows in three parts.
  auto pieces = (*src)->make();
  ASSERT_TRUE(observe(*pieces, tokens, 0, hidden, 0, 37, d).ok());
  ASSERT_TRUE(observe(*pieces, tokens, static_cast<int64_t>(tokens.size()), hidden, 37, 300, d).ok());
  ASSERT_TRUE(observe(*pieces, tokens, static_cast<int64_t>(tokens.size()), hidden, 337,
                      static_cast<int64_t>(tokens.size()) - 337, d).ok());
  auto b = pieces->propose(k);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, want);
}

struct GenRun {
  GenerateStats stats;
  std::string text;
};

GenRun generate_with(const sched_test::LoadedModel& m, const std::vector<int32_t>& prompt, int64_t n, int block,
                     const DrafterSource* src) {
  GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  o.kv_format = KvFormat::kF32;
  o.threads = 2;
  o.drafter = src;
  o.spec_block = block;
  GenRun r;
  auto s = generate(m.model, *m.tokenizer, prompt, o, [&](std::string_view t) { r.text += t; });
  EXPECT_TRUE(s.ok()) << s.error_message();
  if (s.ok()) r.stats = std::move(*s);
  return r;
}

std::vector<int32_t> prompt_of(const Tokenizer& tok, const char* text) {
  std::vector<int32_t> p;
  if (tok.bos_id() >= 0) p.push_back(tok.bos_id());
  for (int32_t id : tok.encode(text, false, false)) p.push_back(id);
  return p;
}

TEST(MtpDrafter, GreedyGenerateEqualsPlainDecoding) {
  if (!have_hybrid()) GTEST_SKIP() << "qwen3_next not in this build";
  for (const auto& [preset, gguf] : {std::pair{"tiny-qwen3-next-mtp", false}, std::pair{"tiny-qwen3-next-mtp", true},
                                     std::pair{"tiny-qwen3-next-moe-mtp", false},
                                     std::pair{"tiny-qwen3-next-moe-mtp", true}}) {
    SCOPED_TRACE(preset);
    auto m = load_model(write_preset(preset, 1, gguf));
    ASSERT_TRUE(m);
    ASSERT_GT(m->model.recurrent_state_floats(), 0) << "a hybrid: rejected rows roll the recurrent state back";
    ThreadPool pool(2);
    auto src = make_mtp_source(m->files, m->model, pool);
    ASSERT_TRUE(src.ok()) << src.error_message();
    for (const char* text : {"the cat sat on the mat. the cat sat on", "x"}) {
      const auto prompt = prompt_of(*m->tokenizer, text);
      const GenRun plain = generate_with(*m, prompt, 32, 1, nullptr);
      for (int block : {2, 4, 8}) {
        const GenRun spec = generate_with(*m, prompt, 32, block, src->get());
        EXPECT_EQ(spec.stats.tokens, plain.stats.tokens) << (gguf ? "GGUF " : "") << text << " block " << block;
        EXPECT_EQ(spec.text, plain.text) << (gguf ? "GGUF " : "") << text << " block " << block;
        EXPECT_EQ(spec.stats.finish, plain.stats.finish);
        EXPECT_EQ(spec.stats.stop_index, plain.stats.stop_index);
        if (plain.stats.n_generated > 2) {
          EXPECT_GT(spec.stats.drafted_tokens, 0) << "the MTP head proposes";
        }
        EXPECT_LE(spec.stats.accepted_draft_tokens, spec.stats.drafted_tokens);
      }
    }
  }
}

class MtpEngineLanes : public ::testing::TestWithParam<const char*> {};

TEST_P(MtpEngineLanes, EqualPlainDecodingAlone) {
  if (!have_hybrid()) GTEST_SKIP() << "qwen3_next not in this build";
  auto m = load_model(write_preset(GetParam(), 1));
  ASSERT_TRUE(m);
  ThreadPool pool(2);
  auto src = make_mtp_source(m->files, m->model, pool);
  ASSERT_TRUE(src.ok()) << src.error_message();
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"the cat sat on the mat. the cat sat on", "a b c a b c a b", "one two three four", "x"})
    prompts.push_back(prompt_of(*m->tokenizer, text));
  std::vector<GenRun> plain;
  for (const auto& p : prompts) plain.push_back(generate_with(*m, p, 24, 1, nullptr));
  EngineOptions eo = sched_test::test_options(4);
  eo.drafter = src->get();
  eo.spec_block = 6;
  auto engine = Engine::create(m->model, *m->tokenizer, eo);
  ASSERT_TRUE(engine.ok()) << engine.error_message();
  std::vector<std::unique_ptr<sched_test::Recorder>> recs;
  for (const auto& p : prompts) {
    recs.push_back(std::make_unique<sched_test::Recorder>());
    ASSERT_TRUE((*engine)->submit(sched_test::greedy_request(p, 24), recs.back()->callback()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(recs[i]->wait_done());
    EXPECT_EQ(recs[i]->tokens(), plain[i].stats.tokens) << "prompt " << i;
    EXPECT_EQ(recs[i]->text(), plain[i].text) << "prompt " << i;
  }
  const EngineStatus st = (*engine)->status();
  EXPECT_EQ(st.metrics.draft_method, "mtp");
  EXPECT_GT(st.metrics.drafted_tokens, 0);
  EXPECT_LE(st.metrics.accepted_draft_tokens, st.metrics.drafted_tokens);
  EXPECT_EQ(st.kv.pages_active, 0);
}

INSTANTIATE_TEST_SUITE_P(Presets, MtpEngineLanes, ::testing::Values("tiny-qwen3-next-mtp", "tiny-qwen3-next-moe-mtp"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// A MoE head's step_bytes() is what one step reads: fc, attention, router, n_expert_used experts
// and the shared expert with its gate (F32 safetensors: 4 bytes a weight); weight_bytes() (the
// memory plan's figure) holds all n_expert experts.
TEST(MtpDrafter, MoeHeadCountsEveryExpertHeldAndThoseAStepReads) {
  if (!have_hybrid()) GTEST_SKIP() << "qwen3_next not in this build";
  auto m = load_model(write_preset("tiny-qwen3-next-moe-mtp", 1));
  ASSERT_TRUE(m);
  const ModelConfig& c = m->model.config();
  ASSERT_GT(c.n_expert_used, 0u);
  ASSERT_LT(c.n_expert_used, c.n_expert);
  ASSERT_GT(c.n_ff_shared_expert, 0u);
  auto mtp = MtpModel::load(m->files, m->model);
  ASSERT_TRUE(mtp.ok()) << mtp.error_message();
  const uint64_t d = c.n_embd, q = uint64_t{c.n_head} * c.head_dim, kv = uint64_t{c.n_head_kv} * c.head_dim;
  const uint64_t attn = (2 * q + 2 * kv) * d + d * q;  // gated q: [q | gate] rows
  const uint64_t expert = 3 * uint64_t{c.n_ff_expert} * d;
  const uint64_t moe = uint64_t{c.n_expert} * d + c.n_expert_used * expert + 3 * uint64_t{c.n_ff_shared_expert} * d + d;
  EXPECT_EQ((*mtp)->step_bytes(), 4 * (2 * d * d + attn + moe));
  EXPECT_EQ((*mtp)->weight_bytes(), 4 * (2 * d * d + attn + moe + (c.n_expert - c.n_expert_used) * expert));
}

TEST(MtpDrafter, SpecMethodPicksOrRefusesTheHead) {
  if (!have_hybrid()) GTEST_SKIP() << "qwen3_next not in this build";
  const std::string with = write_preset("tiny-qwen3-next-mtp", 1);
  auto m = load_model(with);
  ASSERT_TRUE(m);
  SpecOptions so;
  so.method = SpecMethod::kAuto;
  auto a = make_drafter_source(so, with, m->files, m->model, 1, 1);
  ASSERT_TRUE(a.ok()) << a.error_message();
  ASSERT_TRUE(*a);
  EXPECT_EQ((*a)->method(), "mtp") << "auto picks the model's MTP head";
  EXPECT_GT((*a)->memory_bytes(), 0u);
  so.method = SpecMethod::kMtp;
  so.draft_model = "/nonexistent";
  auto b = make_drafter_source(so, with, m->files, m->model, 1, 1);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error_message().find("--draft-model"), std::string::npos) << b.error_message();

  // A hybrid without an MTP head: --spec mtp says so; auto falls back to prompt lookup.
  const std::string without = write_preset("tiny-qwen3-next", 1);
  auto plain = load_model(without);
  ASSERT_TRUE(plain);
  so.draft_model.clear();
  auto c = make_drafter_source(so, without, plain->files, plain->model, 1, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error_message().find("--spec mtp"), std::string::npos) << c.error_message();
  EXPECT_NE(c.error_message().find("no MTP head"), std::string::npos) << c.error_message();
  so.method = SpecMethod::kAuto;
  auto e = make_drafter_source(so, without, plain->files, plain->model, 1, 1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->method(), "lookup");
}

TEST(MtpDrafter, MissingTensorIsNamed) {
  if (!have_hybrid()) GTEST_SKIP() << "qwen3_next not in this build";
  // A config that declares an MTP layer over files without its tensors.
  const std::string with = write_preset("tiny-qwen3-next-mtp", 2);
  const std::string broken = temp_dir() + "/broken";
  std::filesystem::create_directories(broken);
  for (const auto& e : std::filesystem::directory_iterator(with))
    std::filesystem::copy_file(e.path(), broken + "/" + e.path().filename().string(),
                               std::filesystem::copy_options::overwrite_existing);
  auto spec = test_model_preset("tiny-qwen3-next");
  spec->format = TestModelFormat::kSafetensors;
  spec->seed = 2;
  const std::string no_mtp = temp_dir() + "/no_mtp";
  ASSERT_TRUE(write_test_model(*spec, no_mtp).ok());
  std::filesystem::copy_file(no_mtp + "/model.safetensors", broken + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  auto m = load_model(broken);
  ASSERT_TRUE(m) << "the target loads without its MTP tensors";
  EXPECT_EQ(m->model.config().n_mtp_layers, 1u);
  auto mtp = MtpModel::load(m->files, m->model);
  ASSERT_FALSE(mtp.ok());
  EXPECT_NE(mtp.error_message().find("mtp.fc.weight"), std::string::npos) << mtp.error_message();
}

}  // namespace
}  // namespace splash
