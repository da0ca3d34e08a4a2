// Speculative decoding in generate(): greedy output token-for-token equal to plain decoding for every
// drafter (prompt lookup, a draft model: Q4 copy of the target and an unrelated model, a random
// drafter proposing garbage, an oracle with and without wrong proposals), on llama, qwen3 and a hybrid
// (recurrent state rolled back) tiny model and on stories15M; stop strings and max_tokens inside an
// accepted block end the output exactly where plain decoding ends it.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "engine/generate.h"
#include "model/architecture.h"
#include "gtest/gtest.h"
#include "scheduler_test_util.h"
#include "spec/draft_model.h"
#include "spec/prompt_lookup.h"
#include "spec_test_drafters.h"
#include "testmodel/test_model.h"

namespace splash {
namespace {

using sched_test::load_model;
using spec_test::TestSource;

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("splash_spec_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("splash_spec_" + std::to_string(getpid())), ec);
  }
} cleanup;

std::string write_model(const std::string& preset, uint64_t seed, DType type) {
  auto spec = test_model_preset(preset);
  EXPECT_TRUE(spec.ok()) << spec.error_message();
  spec->seed = seed;
  spec->gguf_type = type;
  const std::string path = temp_path(str_cat(preset, "_", seed, "_", dtype_name(type), ".gguf"));
  if (!std::filesystem::exists(path)) {
    EXPECT_TRUE(write_test_model(*spec, path).ok());
  }
  return path;
}

struct GenRun {
  GenerateStats stats;
  std::string text;
};

GenRun run(const sched_test::LoadedModel& m, const std::vector<int32_t>& prompt, GenerateOptions o,
        const DrafterSource* src) {
  o.drafter = src;
  GenRun r;
  auto s = generate(m.model, *m.tokenizer, prompt, o, [&](std::string_view t) { r.text += t; });
  EXPECT_TRUE(s.ok()) << s.error_message();
  if (s.ok()) r.stats = std::move(*s);
  return r;
}

GenerateOptions greedy(int64_t n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  o.kv_format = KvFormat::kF32;
  o.threads = 2;
  return o;
}

void expect_same(const GenRun& plain, const GenRun& spec, const std::string& what) {
  EXPECT_EQ(plain.stats.tokens, spec.stats.tokens) << what;
  EXPECT_EQ(plain.text, spec.text) << what;
  EXPECT_EQ(plain.stats.finish, spec.stats.finish) << what;
  EXPECT_EQ(plain.stats.stop_index, spec.stats.stop_index) << what;
  EXPECT_LE(spec.stats.accepted_draft_tokens, spec.stats.drafted_tokens) << what;
}

bool arch_available(const std::string& preset) {
  auto spec = test_model_preset(preset);
  return spec.ok() && find_architecture(spec->arch) != nullptr;
}

std::vector<int32_t> repeating_prompt(const Tokenizer& tok) {
  std::vector<int32_t> p = {tok.bos_id()};
  for (int32_t id : tok.encode("the cat sat on the mat. the dog sat on the log. the cat sat on", false, false))
    p.push_back(id);
  return p;
}

class SpecGenerate : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!arch_available(GetParam())) GTEST_SKIP() << GetParam() << ": architecture not in this build";
  }
};

// The first seed (of a few) whose tiny model, greedy from the repeating prompt, ends the way `want`
// says: 40 tokens without an end-of-generation token, or one inside [5, 35] tokens.
enum class Ending { kLength, kEosInside };
std::unique_ptr<sched_test::LoadedModel> model_ending(const std::string& preset, Ending want, uint64_t* seed_out = nullptr) {
  if (!arch_available(preset)) return nullptr;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    auto m = load_model(write_model(preset, seed, DType::kF32));
    if (!m) return nullptr;
    GenerateOptions o;
    o.max_tokens = 40;
    o.sampling.temperature = 0;
    o.kv_format = KvFormat::kF32;
    o.threads = 2;
    auto s = generate(m->model, *m->tokenizer, repeating_prompt(*m->tokenizer), o, nullptr);
    if (!s.ok()) return nullptr;
    const bool ok = want == Ending::kLength ? s->n_generated == 40
                                            : sched_test::ended_at_eos(*s) && s->n_generated >= 5 && s->n_generated <= 35;
    if (ok) {
      if (seed_out) *seed_out = seed;
      return m;
    }
  }
  return nullptr;
}

// A stop string of one ASCII character of `text` at or after `at` (never half a UTF-8 character).
std::string ascii_stop(const std::string& text, size_t at) {
  for (size_t i = at; i < text.size(); ++i)
    if (static_cast<unsigned char>(text[i]) < 0x80 && text[i] != ' ') return text.substr(i, 1);
  return "";
}

TEST_P(SpecGenerate, GreedyIdenticalForEveryDrafter) {
  const std::string preset = GetParam();
  uint64_t seed = 0;
  auto m = model_ending(preset, Ending::kLength, &seed);
  ASSERT_TRUE(m) << "no seed gives 40 tokens";
  const auto prompt = repeating_prompt(*m->tokenizer);
  const int32_t n_vocab = static_cast<int32_t>(m->model.config().n_vocab);
  const GenRun plain = run(*m, prompt, greedy(40), nullptr);
  ASSERT_EQ(plain.stats.n_generated, 40);

  std::vector<int32_t> full = prompt;
  full.insert(full.end(), plain.stats.tokens.begin(), plain.stats.tokens.end());
  SpecOptions so;
  PromptLookupSource lookup(so);
  TestSource oracle(TestSource::kOracle, full, 0, n_vocab);
  TestSource flaky(TestSource::kOracle, full, 3, n_vocab);
  TestSource random(TestSource::kRandom, {}, 0, n_vocab);
  std::vector<std::pair<std::string, const DrafterSource*>> sources = {
      {"lookup", &lookup}, {"oracle", &oracle}, {"flaky oracle", &flaky}, {"random", &random}};
  std::unique_ptr<DraftModelSource> q4, other;
  if (m->model.recurrent_state_floats() == 0) {
    auto q = DraftModelSource::load(write_model(preset, seed, DType::kQ4_0), m->model, 1, 2);
    ASSERT_TRUE(q.ok()) << q.error_message();
    q4 = std::move(*q);
    auto o = DraftModelSource::load(write_model(preset, seed + 100, DType::kF32), m->model, 1, 2);
    ASSERT_TRUE(o.ok()) << o.error_message();
    other = std::move(*o);
    sources.emplace_back("draft q4", q4.get());
    sources.emplace_back("draft other", other.get());
  }
  for (int block : {2, 4, 8}) {
    for (const auto& [name, src] : sources) {
      GenerateOptions o = greedy(40);
      o.spec_block = block;
      // The oracle's step count is checked against acceptance alone: with the time rule a slow
      // verify step (the hybrid's state copies under the sanitizers) may legitimately pause it.
      o.spec_time_rule = name != "oracle";
      const GenRun spec = run(*m, prompt, o, src);
      expect_same(plain, spec, str_cat(preset, " ", name, " block ", block));
      if (name == "oracle") {
        EXPECT_EQ(spec.stats.accepted_draft_tokens, spec.stats.drafted_tokens);
        EXPECT_LT(spec.stats.n_decode_steps, 40 / (block - 1) + 2) << "oracle drafts must be accepted in blocks";
      }
      if (name == "random") {
        EXPECT_GT(spec.stats.drafted_tokens, 0);
      }
    }
  }
}

TEST_P(SpecGenerate, StopStringAndLengthInsideAnAcceptedBlock) {
  const std::string preset = GetParam();
  auto m = model_ending(preset, Ending::kLength);
  ASSERT_TRUE(m);
  const auto prompt = repeating_prompt(*m->tokenizer);
  const int32_t n_vocab = static_cast<int32_t>(m->model.config().n_vocab);
  const GenRun ref = run(*m, prompt, greedy(30), nullptr);
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), ref.stats.tokens.begin(), ref.stats.tokens.end());
  TestSource oracle(TestSource::kOracle, full, 0, n_vocab);
  for (int64_t n : {1, 2, 9, 11, 13})
    expect_same(run(*m, prompt, greedy(n), nullptr), run(*m, prompt, greedy(n), &oracle), str_cat("max_tokens ", n));
  for (size_t at : {ref.text.size() / 3, ref.text.size() / 2}) {
    GenerateOptions o = greedy(30);
    const std::string stop = ascii_stop(ref.text, at);
    if (stop.empty()) continue;
    o.stop = {stop};
    const GenRun plain = run(*m, prompt, o, nullptr);
    EXPECT_TRUE(sched_test::ended_at_stop_string(plain.stats));
    expect_same(plain, run(*m, prompt, o, &oracle), "stop '" + stop + "'");
  }
}

// An always-right drafter that takes 30 ms per proposal: far slower than a tiny model's plain step,
// so with the time rule drafting pauses after its first measured steps; with spec_time_rule = false
// acceptance alone decides and it drafts every step. The output is plain decoding's either way.
class SlowOracleSource final : public DrafterSource {
 public:
  SlowOracleSource(std::vector<int32_t> full, int32_t n_vocab) : full_(std::move(full)), n_vocab_(n_vocab) {}
  std::string_view method() const override { return "slow oracle"; }
  std::unique_ptr<Drafter> make() const override { return std::make_unique<Slow>(full_, n_vocab_); }

 private:
  struct Slow final : Drafter {
    Slow(std::vector<int32_t> full, int32_t n_vocab) : inner(std::move(full), 0, n_vocab) {}
    std::string_view method() const override { return "slow oracle"; }
    Status observe(const DraftObservation& obs) override { return inner.observe(obs); }
    void rollback(int64_t n) override { inner.rollback(n); }
    Result<std::vector<int32_t>> propose(int max_tokens) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return inner.propose(max_tokens);
    }
    spec_test::OracleDrafter inner;
  };
  std::vector<int32_t> full_;
  int32_t n_vocab_;
};

TEST_P(SpecGenerate, TimeRuleOptionPausesASlowDrafterOnlyWhenOn) {
  const std::string preset = GetParam();
  auto m = model_ending(preset, Ending::kLength);
  ASSERT_TRUE(m);
  const auto prompt = repeating_prompt(*m->tokenizer);
  const GenRun plain = run(*m, prompt, greedy(24), nullptr);
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), plain.stats.tokens.begin(), plain.stats.tokens.end());
  SlowOracleSource slow(full, static_cast<int32_t>(m->model.config().n_vocab));
  GenerateOptions o = greedy(24);
  o.spec_block = 2;
  o.spec_time_rule = false;
  const GenRun off = run(*m, prompt, o, &slow);
  expect_same(plain, off, "time rule off");
  EXPECT_EQ(off.stats.accepted_draft_tokens, off.stats.drafted_tokens);
  EXPECT_GE(off.stats.drafted_tokens, 10) << "acceptance alone keeps an always-right drafter on";
  o.spec_time_rule = true;
  const GenRun on = run(*m, prompt, o, &slow);
  expect_same(plain, on, "time rule on");
  EXPECT_LT(on.stats.drafted_tokens, off.stats.drafted_tokens) << "drafting slower than plain decoding pauses";
}

TEST_P(SpecGenerate, EndOfGenerationInsideAnAcceptedBlock) {
  const std::string preset = GetParam();
  auto m = model_ending(preset, Ending::kEosInside);
  if (!m) GTEST_SKIP() << "no seed of " << preset << " ends with an end-of-generation token early";
  const auto prompt = repeating_prompt(*m->tokenizer);
  const int32_t n_vocab = static_cast<int32_t>(m->model.config().n_vocab);
  const GenRun plain = run(*m, prompt, greedy(40), nullptr);
  ASSERT_TRUE(sched_test::ended_at_eos(plain.stats));
  // The oracle proposes the output and then the end-of-generation token the target picks, and more
  // tokens after it: generation must end at it.
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), plain.stats.tokens.begin(), plain.stats.tokens.end());
  for (int32_t id = 0; id < n_vocab; ++id)
    if (m->tokenizer->is_eog(id)) {
      full.push_back(id);
      break;
    }
  full.insert(full.end(), {5, 6, 7, 8, 9, 10});
  TestSource oracle(TestSource::kOracle, full, 0, n_vocab);
  TestSource random(TestSource::kRandom, {}, 0, n_vocab);
  for (const DrafterSource* src : {static_cast<const DrafterSource*>(&oracle), static_cast<const DrafterSource*>(&random)})
    expect_same(plain, run(*m, prompt, greedy(40), src), str_cat(preset, " ", src->method()));
}

TEST_P(SpecGenerate, SamplingRunsWithDrafts) {
  const std::string preset = GetParam();
  auto m = model_ending(preset, Ending::kLength);
  ASSERT_TRUE(m);
  const auto prompt = repeating_prompt(*m->tokenizer);
  TestSource random(TestSource::kRandom, {}, 0, static_cast<int32_t>(m->model.config().n_vocab));
  SpecOptions so;
  PromptLookupSource lookup(so);
  for (const DrafterSource* src : {static_cast<const DrafterSource*>(&random), static_cast<const DrafterSource*>(&lookup)}) {
    GenerateOptions o = greedy(30);
    o.sampling.temperature = 0.9f;
    o.sampling.top_k = 40;
    o.sampling.repetition_penalty = 1.1f;
    o.sampling.seed = 5;
    const GenRun a = run(*m, prompt, o, src);
    const GenRun b = run(*m, prompt, o, src);
    EXPECT_EQ(a.stats.tokens, b.stats.tokens) << "seeded speculative sampling is reproducible";
    EXPECT_LE(a.stats.accepted_draft_tokens, a.stats.drafted_tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, SpecGenerate, ::testing::Values("tiny-llama", "tiny-qwen3", "tiny-qwen3-next"));

TEST(SpecGenerateStories, GreedyIdenticalWithQ4DraftAndLookup) {
  const char* home = std::getenv("HOME");
  const std::string dir = std::string(home ? home : "") + "/.cache/splash/demo";
  if (!std::filesystem::exists(dir + "/stories15M.bin") || !std::filesystem::exists(dir + "/stories15M-Q4_0.gguf"))
    GTEST_SKIP() << "demo model absent";
  auto m = load_model(dir + "/stories15M.bin");
  ASSERT_TRUE(m);
  const std::vector<int32_t> bos = {m->tokenizer->bos_id()};
  const GenRun plain = run(*m, bos, greedy(48), nullptr);
  auto q4 = DraftModelSource::load(dir + "/stories15M-Q4_0.gguf", m->model, 1, 2);
  ASSERT_TRUE(q4.ok()) << q4.error_message();
  SpecOptions so;
  PromptLookupSource lookup(so);
  const GenRun a = run(*m, bos, greedy(48), q4->get());
  expect_same(plain, a, "stories15M q4 draft");
  EXPECT_GT(a.stats.accepted_draft_tokens * 2, a.stats.drafted_tokens) << "the Q4 copy agrees most of the time";
  expect_same(plain, run(*m, bos, greedy(48), &lookup), "stories15M lookup");
}

}  // namespace
}  // namespace splash

namespace splash {
namespace {

// --- the engine: lanes verify in one batched forward; each lane's output equals plain decoding alone.

std::vector<int32_t> engine_tokens(Engine& engine, const std::vector<int32_t>& prompt, int64_t n, sched_test::Recorder& rec) {
  auto id = engine.submit(sched_test::greedy_request(prompt, n), rec.callback());
  EXPECT_TRUE(id.ok()) << id.error_message();
  return {};
}

class SpecEngine : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!arch_available(GetParam())) GTEST_SKIP() << GetParam() << ": architecture not in this build";
  }
};

TEST_P(SpecEngine, BatchedLanesEqualPlainDecodingAlone) {
  const std::string preset = GetParam();
  uint64_t seed = 0;
  auto m = model_ending(preset, Ending::kLength, &seed);
  ASSERT_TRUE(m);
  const Tokenizer& tok = *m->tokenizer;
  const int32_t n_vocab = static_cast<int32_t>(m->model.config().n_vocab);
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"the cat sat on the mat. the cat sat on", "a b c a b c a b", "one two three four", "x"}) {
    std::vector<int32_t> p = {tok.bos_id()};
    for (int32_t id : tok.encode(text, false, false)) p.push_back(id);
    prompts.push_back(p);
  }
  std::vector<GenRun> plain;
  for (const auto& p : prompts) plain.push_back(run(*m, p, greedy(24), nullptr));

  SpecOptions so;
  PromptLookupSource lookup(so);
  TestSource random(TestSource::kRandom, {}, 0, n_vocab);
  std::vector<std::pair<std::string, const DrafterSource*>> sources = {{"lookup", &lookup}, {"random", &random}};
  std::unique_ptr<DraftModelSource> q4;
  if (m->model.recurrent_state_floats() == 0) {
    auto q = DraftModelSource::load(write_model(preset, seed, DType::kQ4_0), m->model, 4, 2);
    ASSERT_TRUE(q.ok()) << q.error_message();
    q4 = std::move(*q);
    sources.emplace_back("draft q4", q4.get());
  }
  for (const auto& [name, src] : sources) {
    EngineOptions eo = sched_test::test_options(4);
    eo.drafter = src;
    eo.spec_block = 6;
    auto engine = Engine::create(m->model, tok, eo);
    ASSERT_TRUE(engine.ok()) << engine.error_message();
    std::vector<std::unique_ptr<sched_test::Recorder>> recs;
    for (const auto& p : prompts) {
      recs.push_back(std::make_unique<sched_test::Recorder>());
      engine_tokens(**engine, p, 24, *recs.back());
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(recs[i]->wait_done());
      EXPECT_EQ(recs[i]->tokens(), plain[i].stats.tokens) << name << " prompt " << i;
      EXPECT_EQ(recs[i]->text(), plain[i].text) << name << " prompt " << i;
    }
    const EngineStatus st = (*engine)->status();
    EXPECT_EQ(st.metrics.draft_method, src->method());
    EXPECT_GT(st.metrics.drafted_tokens, 0) << name;
    EXPECT_LE(st.metrics.accepted_draft_tokens, st.metrics.drafted_tokens) << name;
    EXPECT_EQ(st.kv.pages_active, 0) << "no lane keeps pages (rejected rows were rolled back)";
  }
}

TEST_P(SpecEngine, SeededSamplingWithDraftsRepeats) {
  auto m = model_ending(GetParam(), Ending::kLength);
  ASSERT_TRUE(m);
  TestSource random(TestSource::kRandom, {}, 0, static_cast<int32_t>(m->model.config().n_vocab));
  std::vector<std::vector<int32_t>> outs;
  for (int rep = 0; rep < 2; ++rep) {
    EngineOptions eo = sched_test::test_options(2);
    eo.drafter = &random;
    auto engine = Engine::create(m->model, *m->tokenizer, eo);
    ASSERT_TRUE(engine.ok());
    sched_test::Recorder rec;
    EngineRequest r = sched_test::greedy_request(repeating_prompt(*m->tokenizer), 20);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 9;
    ASSERT_TRUE((*engine)->submit(r, rec.callback()).ok());
    ASSERT_TRUE(rec.wait_done());
    outs.push_back(rec.tokens());
  }
  EXPECT_EQ(outs[0], outs[1]);
}

INSTANTIATE_TEST_SUITE_P(Archs, SpecEngine, ::testing::Values("tiny-llama", "tiny-qwen3", "tiny-qwen3-next"));

}  // namespace
}  // namespace splash
