#include "tokenizer/tokenizer_export.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "tokenizer/pretokenizers.h"

namespace splash {

namespace {

using gguf::Value;
using gguf::ValueType;
using ordered_json = nlohmann::ordered_json;

// GGUF token types: added tokens become control (special) or user-defined (matched as text).
std::vector<TokenType> export_types(const TokenizerSpec& spec) {
  std::vector<TokenType> types = spec.types.empty() ? std::vector<TokenType>(spec.tokens.size(), TokenType::kNormal) : spec.types;
  for (const AddedToken& a : spec.added)
    if (types[a.id] == TokenType::kNormal) types[a.id] = a.special ? TokenType::kControl : TokenType::kUserDefined;
  return types;
}

std::string token_or_empty(const TokenizerSpec& spec, int32_t id) {
  return id >= 0 && id < static_cast<int32_t>(spec.tokens.size()) ? spec.tokens[id] : std::string();
}

constexpr const char* kVocabPlaceholder = "@@splash-vocab@@";
constexpr const char* kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// BOS / EOS around each sequence, as Llama-2's tokenizer.json adds them (readers that ignore
// tokenizer_config.json's add_bos_token still get <s>).
ordered_json template_processing(const TokenizerSpec& spec) {
  const bool bos = spec.add_bos && spec.bos_id >= 0, eos = spec.add_eos && spec.eos_id >= 0;
  if (!bos && !eos) return nullptr;
  ordered_json single = ordered_json::array(), pair = ordered_json::array(), specials = ordered_json::object();
  auto special = [&](int32_t id, ordered_json& seq, int type_id) {
    const std::string s = token_or_empty(spec, id);
    seq.push_back({{"SpecialToken", {{"id", s}, {"type_id", type_id}}}});
    specials[s] = {{"id", s}, {"ids", {id}}, {"tokens", {s}}};
  };
  auto sequence = [](const char* name, ordered_json& seq, int type_id) {
    seq.push_back({{"Sequence", {{"id", name}, {"type_id", type_id}}}});
  };
  if (bos) special(spec.bos_id, single, 0);
  sequence("A", single, 0);
  if (eos) special(spec.eos_id, single, 0);
  if (bos) special(spec.bos_id, pair, 0);
  sequence("A", pair, 0);
  if (eos) special(spec.eos_id, pair, 0);
  if (bos) special(spec.bos_id, pair, 1);
  sequence("B", pair, 1);
  if (eos) special(spec.eos_id, pair, 1);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

}  // namespace

Result<std::vector<std::pair<std::string, gguf::Value>>> tokenizer_gguf_metadata(const Tokenizer& tokenizer) {
  const TokenizerSpec spec = tokenizer.to_spec();
  std::vector<std::pair<std::string, Value>> kv;
  const bool spm = spec.kind == TokenizerKind::kSentencePiece;
  kv.emplace_back("tokenizer.ggml.model", Value::from_string(spm ? "llama" : "gpt2"));
  if (!spm) {
    if (spec.splits.size() != 1)
      return make_error(spec.source, ": a GGUF vocabulary names one pre-tokenizer; this tokenizer has ", spec.splits.size(), " split rules");
    auto name = pretokenizer_gguf_name(spec.splits[0].pattern);
    if (!name)
      return make_error(spec.source, ": its pre-tokenizer regex has no GGUF (llama.cpp) name; known: ", pretokenizer_gguf_names());
    kv.emplace_back("tokenizer.ggml.pre", Value::from_string(*name));
    // llama.cpp's gpt2 vocabularies have no switch for these; writing the file anyway would encode differently.
    if (spec.byte_level_prefix_space)
      return make_error(spec.source, ": ByteLevel add_prefix_space has no GGUF equivalent");
    if (spec.ignore_merges) return make_error(spec.source, ": BPE ignore_merges has no GGUF equivalent");
  }
  kv.emplace_back("tokenizer.ggml.tokens", Value::array_of_strings(spec.tokens));
  if (spm || !spec.scores.empty()) {
    std::vector<double> scores(spec.tokens.size(), 0.0);
    for (size_t i = 0; i < spec.scores.size(); ++i) scores[i] = spec.scores[i];
    kv.emplace_back("tokenizer.ggml.scores", Value::array_of_floats(ValueType::kF32, std::move(scores)));
  }
  std::vector<int64_t> types;
  for (TokenType t : export_types(spec)) types.push_back(static_cast<int64_t>(t));
  kv.emplace_back("tokenizer.ggml.token_type", Value::array_of_ints(ValueType::kI32, std::move(types)));
  if (!spm) {
    std::vector<std::string> merges;
    merges.reserve(spec.merges.size());
    for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
    kv.emplace_back("tokenizer.ggml.merges", Value::array_of_strings(std::move(merges)));
  }
  auto add_id = [&](const char* key, int32_t id) {
    if (id >= 0) kv.emplace_back(key, Value::from_u32(static_cast<uint32_t>(id)));
  };
  add_id("tokenizer.ggml.bos_token_id", spec.bos_id);
  add_id("tokenizer.ggml.eos_token_id", spec.eos_id);
  add_id("tokenizer.ggml.unknown_token_id", spec.unk_id);
  add_id("tokenizer.ggml.padding_token_id", spec.pad_id);
  kv.emplace_back("tokenizer.ggml.add_bos_token", Value::from_bool(spec.add_bos));
  kv.emplace_back("tokenizer.ggml.add_eos_token", Value::from_bool(spec.add_eos));
  if (spm) kv.emplace_back("tokenizer.ggml.add_space_prefix", Value::from_bool(spec.add_space_prefix));
  if (!spec.chat_template.empty()) kv.emplace_back("tokenizer.chat_template", Value::from_string(spec.chat_template));
  return kv;
}

namespace {

Result<HfTokenizerFiles> hf_files(const Tokenizer& tokenizer) {
  const TokenizerSpec spec = tokenizer.to_spec();
  const bool spm = spec.kind == TokenizerKind::kSentencePiece;
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;

  std::vector<bool> is_added(spec.tokens.size(), false);
  ordered_json added = ordered_json::array();
  std::vector<AddedToken> sorted = spec.added;
  std::sort(sorted.begin(), sorted.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (const AddedToken& a : sorted) {
    is_added[a.id] = true;
    added.push_back({{"id", a.id}, {"content", a.content}, {"single_word", a.single_word}, {"lstrip", a.lstrip},
                     {"rstrip", a.rstrip}, {"normalized", a.normalized}, {"special", a.special}});
  }
  j["added_tokens"] = added;

  ordered_json merges = ordered_json::array();
  // ordered_json looks keys up linearly; the vocabulary (up to ~250K entries) is written by hand in id
  // order and spliced in for a placeholder. The first id of a string wins, as in Tokenizer::build.
  std::vector<int32_t> vocab_ids;
  std::unordered_set<std::string_view> seen;
  auto add_vocab = [&](size_t i) {
    if (seen.insert(spec.tokens[i]).second) vocab_ids.push_back(static_cast<int32_t>(i));
  };
  const ordered_json vocab = kVocabPlaceholder;
  if (spm) {
    // Llama-2's Hub form: BPE over SentencePiece pieces with byte fallback. Special pieces stay in the
    // vocabulary (SentencePiece models keep them there).
    for (size_t i = 0; i < spec.tokens.size(); ++i)
      if (!spec.tokens[i].empty()) add_vocab(i);
    for (const auto& [a, b] : spm_merges_by_score(spec)) merges.push_back({a, b});
    const ordered_json replace_space = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpmSpace}};
    ordered_json decoders = ordered_json::array();
    decoders.push_back({{"type", "Replace"}, {"pattern", {{"String", kSpmSpace}}}, {"content", " "}});
    decoders.push_back({{"type", "ByteFallback"}});
    decoders.push_back({{"type", "Fuse"}});
    if (spec.space_prefix_first_only || spec.space_prefix_unless_space) {
      // Metaspace prefixes only text that does not start with a space, and ("first") only at the input's start.
      j["normalizer"] = nullptr;
      j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kSpmSpace},
                            {"prepend_scheme", !spec.add_space_prefix ? "never" : spec.space_prefix_first_only ? "first" : "always"},
                            {"split", false}};
    } else if (spec.add_space_prefix) {
      j["normalizer"] = {{"type", "Sequence"},
                         {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpmSpace}}, replace_space}}};
      j["pre_tokenizer"] = nullptr;
    } else {
      j["normalizer"] = replace_space;
      j["pre_tokenizer"] = nullptr;
    }
    if (spec.add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    j["post_processor"] = template_processing(spec);
    j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", token_or_empty(spec, spec.unk_id)},
                  {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
                  {"byte_fallback", true}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}};
    if (spec.unk_id < 0) j["model"]["unk_token"] = nullptr;
  } else {
    for (size_t i = 0; i < spec.tokens.size(); ++i)
      if (!spec.tokens[i].empty() && !is_added[i]) add_vocab(i);
    for (const auto& [a, b] : spec.merges) merges.push_back({a, b});
    ordered_json norms = ordered_json::array();
    for (Normalizer n : spec.normalizers)
      norms.push_back({{"type", n == Normalizer::kNfc ? "NFC" : n == Normalizer::kNfd ? "NFD" : n == Normalizer::kNfkc ? "NFKC" : "NFKD"}});
    if (norms.empty()) j["normalizer"] = nullptr;
    else if (norms.size() == 1) j["normalizer"] = norms[0];
    else j["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
    ordered_json pre = ordered_json::array();
    for (const SplitRule& s : spec.splits) {
      const char* behavior = s.behavior == SplitBehavior::kIsolated ? "Isolated"
                             : s.behavior == SplitBehavior::kRemoved ? "Removed"
                             : s.behavior == SplitBehavior::kMergedWithPrevious ? "MergedWithPrevious" : "MergedWithNext";
      pre.push_back({{"type", "Split"}, {"pattern", {{"Regex", s.pattern}}}, {"behavior", behavior}, {"invert", s.invert}});
    }
    pre.push_back({{"type", "ByteLevel"}, {"add_prefix_space", spec.byte_level_prefix_space}, {"trim_offsets", false},
                   {"use_regex", false}});
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", pre}};
    j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                  {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false},
                  {"ignore_merges", spec.ignore_merges}, {"vocab", vocab}, {"merges", merges}};
  }

  ordered_json cfg;
  cfg["add_bos_token"] = spec.add_bos;
  cfg["add_eos_token"] = spec.add_eos;
  auto token_field = [&](const char* key, int32_t id) {
    if (id >= 0) cfg[key] = token_or_empty(spec, id);
    else cfg[key] = nullptr;
  };
  token_field("bos_token", spec.bos_id);
  token_field("eos_token", spec.eos_id);
  token_field("unk_token", spec.unk_id);
  token_field("pad_token", spec.pad_id);
  cfg["clean_up_tokenization_spaces"] = false;
  cfg["tokenizer_class"] = spm ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast";
  if (!spec.chat_template.empty()) cfg["chat_template"] = spec.chat_template;
  std::string text = j.dump(1);
  const std::string placeholder = str_cat("\"vocab\": \"", kVocabPlaceholder, "\"");
  const size_t at = text.find(placeholder);
  SPLASH_CHECK(at != std::string::npos);
  std::string vocab_text = "{";
  for (size_t k = 0; k < vocab_ids.size(); ++k)
    vocab_text += str_cat(k ? ",\n  " : "\n  ", ordered_json(spec.tokens[vocab_ids[k]]).dump(), ": ", vocab_ids[k]);
  vocab_text += "\n }";
  text.replace(at, placeholder.size(), str_cat("\"vocab\": ", vocab_text));
  return HfTokenizerFiles{std::move(text) + "\n", cfg.dump(2) + "\n"};
}

}  // namespace

Result<HfTokenizerFiles> tokenizer_hf_files(const Tokenizer& tokenizer) {
  // JSON output needs valid UTF-8; nlohmann::json reports a vocabulary string that is not by throwing.
  try {
    return hf_files(tokenizer);
  } catch (const std::exception& e) {
    return make_error(tokenizer.to_spec().source, ": cannot write tokenizer.json: ", e.what());
  }
}

}  // namespace splash
