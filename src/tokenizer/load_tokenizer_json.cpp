// Hugging Face tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec. Two families: byte-level BPE
// (GPT-2, Qwen2/Qwen3, Llama-3 style) and the Llama-2 form of a SentencePiece vocabulary (BPE with
// byte_fallback, '▁' for space through Prepend + Replace or Metaspace), which is read as a SentencePiece
// tokenizer. Anything else is a load error naming the component.
#include <cctype>
#include <filesystem>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/tokenizer.h"

namespace splash {

namespace {

using nlohmann::json;

constexpr int64_t kMaxVocab = 1 << 24;  // far above any real vocabulary; bounds allocations from bad input

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// What a Llama-2-form file says about spaces (normalizer / pre_tokenizer steps).
struct SpmSpaces {
  bool prepend = false;        // normalizer Prepend("▁")
  bool replace = false;        // normalizer Replace(" " -> "▁")
  bool metaspace = false;      // pre_tokenizer Metaspace
  std::string prepend_scheme;  // Metaspace: "always", "first" or "never"
};

struct Ctx {
  std::string source;
  Error err(const std::string& field, const std::string& what) const {
    return make_error(source, ": ", field, ": ", what);
  }
};

std::string type_of(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : "";
}

bool get_bool(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  return (it != j.end() && it->is_boolean()) ? it->get<bool>() : def;
}

std::string regex_quote(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string string_field(const json& j, const char* key) {
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : "";
}

Status read_normalizer(const Ctx& c, const json& j, const std::string& field, TokenizerSpec& spec, SpmSpaces& sp) {
  if (j.is_null()) return {};
  std::string type = type_of(j);
  if (type == "Prepend") {
    if (string_field(j, "prepend") != kSpmSpace) return c.err(field + ".prepend", "only Prepend(\"\u2581\") is supported");
    sp.prepend = true;
    return {};
  }
  if (type == "Replace") {
    auto pat = j.find("pattern");
    const bool space = pat != j.end() && pat->is_object() && string_field(*pat, "String") == " ";
    if (!space || string_field(j, "content") != kSpmSpace)
      return c.err(field, "only Replace(\" \" -> \"\u2581\") is supported");
    sp.replace = true;
    return {};
  }
  if (type == "NFC") spec.normalizers.push_back(Normalizer::kNfc);
  else if (type == "NFD") spec.normalizers.push_back(Normalizer::kNfd);
  else if (type == "NFKC") spec.normalizers.push_back(Normalizer::kNfkc);
  else if (type == "NFKD") spec.normalizers.push_back(Normalizer::kNfkd);
  else if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return c.err(field, "Sequence without a 'normalizers' array");
    for (size_t i = 0; i < it->size(); ++i)
      SPLASH_TRY_STATUS(read_normalizer(c, (*it)[i], str_cat(field, ".normalizers[", i, "]"), spec, sp));
  } else {
    return c.err(field, str_cat("unsupported normalizer type '", type.empty() ? j.dump() : type, "'"));
  }
  return {};
}

Status read_pre_tokenizer(const Ctx& c, const json& j, const std::string& field, TokenizerSpec& spec,
                          bool& saw_byte_level, SpmSpaces& sp) {
  if (j.is_null()) return {};
  std::string type = type_of(j);
  if (type == "Metaspace") {
    // As @huggingface/tokenizers reads it: prepend_scheme (default "always"), or the older
    // add_prefix_space flag; `split` is not applied there, so not here either.
    if (auto r = j.find("replacement"); r != j.end() && (!r->is_string() || r->get<std::string>() != kSpmSpace))
      return c.err(field + ".replacement", "only \"\u2581\" is supported");
    sp.metaspace = true;
    sp.prepend_scheme = string_field(j, "prepend_scheme");
    if (sp.prepend_scheme.empty()) sp.prepend_scheme = get_bool(j, "add_prefix_space", true) ? "always" : "never";
    if (sp.prepend_scheme != "always" && sp.prepend_scheme != "first" && sp.prepend_scheme != "never")
      return c.err(field + ".prepend_scheme", str_cat("unsupported value '", sp.prepend_scheme, "'"));
    return {};
  }
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return c.err(field, "Sequence without a 'pretokenizers' array");
    for (size_t i = 0; i < it->size(); ++i)
      SPLASH_TRY_STATUS(
          read_pre_tokenizer(c, (*it)[i], str_cat(field, ".pretokenizers[", i, "]"), spec, saw_byte_level, sp));
  } else if (type == "ByteLevel") {
    saw_byte_level = true;
    if (get_bool(j, "add_prefix_space", false)) spec.byte_level_prefix_space = true;
    if (get_bool(j, "use_regex", true))
      spec.splits.push_back({*pretokenizer_pattern("gpt-2"), SplitBehavior::kIsolated, false});
  } else if (type == "Split") {
    SplitRule rule;
    auto pat = j.find("pattern");
    if (pat == j.end() || !pat->is_object()) return c.err(field, "Split without a 'pattern' object");
    if (auto r = pat->find("Regex"); r != pat->end() && r->is_string()) {
      rule.pattern = r->get<std::string>();
    } else if (auto s = pat->find("String"); s != pat->end() && s->is_string()) {
      rule.pattern = regex_quote(s->get<std::string>());
    } else {
      return c.err(field + ".pattern", "needs a 'Regex' or 'String' string");
    }
    if (rule.pattern.empty()) return c.err(field + ".pattern", "is empty");
    auto beh = j.find("behavior");
    std::string b = (beh != j.end() && beh->is_string()) ? beh->get<std::string>() : "";
    if (b == "Isolated") rule.behavior = SplitBehavior::kIsolated;
    else if (b == "Removed") rule.behavior = SplitBehavior::kRemoved;
    else if (b == "MergedWithPrevious") rule.behavior = SplitBehavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") rule.behavior = SplitBehavior::kMergedWithNext;
    else return c.err(field + ".behavior", str_cat("unsupported split behavior '", b, "'"));
    rule.invert = get_bool(j, "invert", false);
    spec.splits.push_back(std::move(rule));
  } else {
    return c.err(field, str_cat("unsupported pre-tokenizer type '", type.empty() ? j.dump() : type, "'"));
  }
  return {};
}

Status read_model(const Ctx& c, const json& m, TokenizerSpec& spec, std::vector<std::string>& by_id) {
  if (!m.is_object()) return c.err("model", "missing or not an object");
  std::string type = type_of(m);
  // HF omits "type" in some older files; a vocab + merges object is BPE then.
  if (type.empty() && m.contains("merges")) type = "BPE";
  if (type != "BPE") return c.err("model.type", str_cat("unsupported model type '", type, "' (only BPE)"));
  if (get_bool(m, "byte_fallback", false)) spec.kind = TokenizerKind::kSentencePiece;
  if (auto p = m.find("continuing_subword_prefix"); p != m.end() && p->is_string() && !p->get<std::string>().empty())
    return c.err("model.continuing_subword_prefix", "is not supported");
  if (auto p = m.find("end_of_word_suffix"); p != m.end() && p->is_string() && !p->get<std::string>().empty())
    return c.err("model.end_of_word_suffix", "is not supported");
  spec.ignore_merges = get_bool(m, "ignore_merges", false);

  auto v = m.find("vocab");
  if (v == m.end() || !v->is_object()) return c.err("model.vocab", "missing or not an object");
  if (v->empty()) return c.err("model.vocab", "is empty");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_number_integer())
      return c.err("model.vocab", str_cat("id of '", it.key(), "' is not an integer"));
    int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxVocab)
      return c.err("model.vocab", str_cat("id ", id, " of '", it.key(), "' is out of range [0, ", kMaxVocab, ")"));
    if (static_cast<size_t>(id) >= by_id.size()) by_id.resize(static_cast<size_t>(id) + 1);
    // A vocabulary string is never empty, so "" marks an unassigned id.
    if (it.key().empty()) return c.err("model.vocab", str_cat("id ", id, " has an empty string"));
    if (!by_id[id].empty())
      return c.err("model.vocab", str_cat("duplicate id ", id, " ('", by_id[id], "' and '", it.key(), "')"));
    by_id[id] = it.key();
  }

  auto mg = m.find("merges");
  if (mg == m.end() || !mg->is_array()) return c.err("model.merges", "missing or not an array");
  spec.merges.reserve(mg->size());
  for (size_t i = 0; i < mg->size(); ++i) {
    const json& e = (*mg)[i];
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ', 1);  // the first half may itself be a space in non-byte-level vocabularies
      if (sp == std::string::npos || sp + 1 >= s.size())
        return c.err(str_cat("model.merges[", i, "]"), str_cat("'", s, "' is not two space-separated tokens"));
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      spec.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      return c.err(str_cat("model.merges[", i, "]"), "must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  if (auto u = m.find("unk_token"); u != m.end() && u->is_string()) {
    auto it = v->find(u->get<std::string>());
    if (it == v->end()) return c.err("model.unk_token", str_cat("'", u->get<std::string>(), "' is not in the vocabulary"));
    spec.unk_id = it.value().get<int32_t>();
  }
  return {};
}

Status read_added(const Ctx& c, const json& j, TokenizerSpec& spec, std::vector<std::string>& by_id) {
  if (j.is_null()) return {};
  if (!j.is_array()) return c.err("added_tokens", "is not an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const json& a = j[i];
    std::string field = str_cat("added_tokens[", i, "]");
    if (!a.is_object()) return c.err(field, "is not an object");
    auto id = a.find("id");
    auto content = a.find("content");
    if (id == a.end() || !id->is_number_integer()) return c.err(field + ".id", "missing or not an integer");
    if (content == a.end() || !content->is_string() || content->get_ref<const std::string&>().empty())
      return c.err(field + ".content", "missing, empty or not a string");
    int64_t n = id->get<int64_t>();
    if (n < 0 || n >= kMaxVocab) return c.err(field + ".id", str_cat(n, " is out of range [0, ", kMaxVocab, ")"));
    AddedToken t;
    t.id = static_cast<int32_t>(n);
    t.content = content->get<std::string>();
    t.special = get_bool(a, "special", false);
    t.lstrip = get_bool(a, "lstrip", false);
    t.rstrip = get_bool(a, "rstrip", false);
    t.single_word = get_bool(a, "single_word", false);
    t.normalized = get_bool(a, "normalized", !t.special);
    if (static_cast<size_t>(n) >= by_id.size()) by_id.resize(static_cast<size_t>(n) + 1);
    if (!by_id[n].empty() && by_id[n] != t.content)
      return c.err(field, str_cat("duplicate id ", n, ": '", t.content, "' but the vocabulary has '", by_id[n], "'"));
    for (const AddedToken& prev : spec.added)
      if (prev.id == t.id) return c.err(field, str_cat("duplicate added token id ", n));
    by_id[n] = t.content;
    spec.added.push_back(std::move(t));
  }
  return {};
}

// tokenizer_config.json token fields are a string, {"content": ...} or null.
std::string config_token(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object())
    if (auto c = it->find("content"); c != it->end() && c->is_string()) return c->get<std::string>();
  return "";
}

Status read_config(const Ctx& c, const json& cfg, TokenizerSpec& spec, const std::vector<std::string>& by_id) {
  if (!cfg.is_object()) return c.err("tokenizer_config.json", "is not a JSON object");
  auto lookup = [&](const char* key, int32_t& out) -> Status {
    std::string s = config_token(cfg, key);
    if (s.empty()) return {};
    for (size_t i = 0; i < by_id.size(); ++i)
      if (by_id[i] == s) {
        out = static_cast<int32_t>(i);
        return {};
      }
    return c.err(str_cat("tokenizer_config.json ", key), str_cat("'", s, "' is not a token"));
  };
  SPLASH_TRY_STATUS(lookup("bos_token", spec.bos_id));
  SPLASH_TRY_STATUS(lookup("eos_token", spec.eos_id));
  SPLASH_TRY_STATUS(lookup("pad_token", spec.pad_id));
  SPLASH_TRY_STATUS(lookup("unk_token", spec.unk_id));
  spec.add_bos = get_bool(cfg, "add_bos_token", false);
  spec.add_eos = get_bool(cfg, "add_eos_token", false);
  if (auto t = cfg.find("chat_template"); t != cfg.end()) {
    if (t->is_string()) {
      spec.chat_template = t->get<std::string>();
    } else if (t->is_array()) {  // [{"name": "default", "template": "..."}, ...]
      for (const json& e : *t)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
          spec.chat_template = e["template"].get<std::string>();
    }
  }
  return {};
}

// The Llama-2 form: spaces become '▁' (Prepend + Replace, or Metaspace), nothing splits the text.
Status check_spm_form(const Ctx& c, const SpmSpaces& sp, bool byte_level, TokenizerSpec& spec) {
  if (byte_level || !spec.splits.empty())
    return c.err("pre_tokenizer", "a byte_fallback model with a ByteLevel or Split pre-tokenizer is not supported");
  if (sp.metaspace && (sp.prepend || sp.replace))
    return c.err("normalizer", "Prepend/Replace together with a Metaspace pre-tokenizer is not supported");
  if (!sp.metaspace && !sp.replace)
    return c.err("normalizer", "a byte_fallback model needs Replace(\" \" -> \"\u2581\") or a Metaspace pre-tokenizer");
  if (sp.metaspace) {
    spec.add_space_prefix = sp.prepend_scheme != "never";
    spec.space_prefix_first_only = sp.prepend_scheme == "first";
    spec.space_prefix_unless_space = true;
  } else {
    spec.add_space_prefix = sp.prepend;
  }
  return {};
}

// The file has merge ranks, SentencePiece encoding wants piece scores: a piece scores minus the rank
// of the first merge that makes it, so "best merge first" picks the same pair in both. Pieces no
// merge makes score below all of them. <0xXX> pieces are the byte-fallback tokens, unk_token unknown.
void spm_types_and_scores(TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!spec.tokens[i].empty()) ids.emplace(spec.tokens[i], static_cast<int32_t>(i));
  const float none = -static_cast<float>(spec.merges.size()) - 1.0f;
  spec.scores.assign(n, none);
  std::vector<uint8_t> scored(n, 0);
  std::string merged;
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    merged = spec.merges[r].first + spec.merges[r].second;
    auto it = ids.find(merged);
    if (it == ids.end() || scored[it->second]) continue;  // Tokenizer::build reports a merge outside the vocabulary
    scored[it->second] = 1;
    spec.scores[it->second] = -static_cast<float>(r);
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = spec.tokens[i];
    if (s.size() == 6 && s.starts_with("<0x") && s[5] == '>' && std::isxdigit(static_cast<unsigned char>(s[3])) &&
        std::isxdigit(static_cast<unsigned char>(s[4])))
      spec.types[i] = TokenType::kByte;
  }
  if (spec.unk_id >= 0 && static_cast<size_t>(spec.unk_id) < n) spec.types[spec.unk_id] = TokenType::kUnknown;
}

Result<Tokenizer> load_impl(std::string_view tokenizer_json, std::string_view config_json, const std::string& source) {
  Ctx c{source};
  json j = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(source, ": not valid JSON");
  if (!j.is_object()) return make_error(source, ": not a JSON object");

  TokenizerSpec spec;
  spec.kind = TokenizerKind::kByteLevelBpe;
  spec.source = source;
  std::vector<std::string> by_id;
  auto model = j.find("model");
  if (model == j.end()) return c.err("model", "missing");
  SPLASH_TRY_STATUS(read_model(c, *model, spec, by_id));
  if (auto a = j.find("added_tokens"); a != j.end()) SPLASH_TRY_STATUS(read_added(c, *a, spec, by_id));
  SpmSpaces sp;
  if (auto n = j.find("normalizer"); n != j.end()) SPLASH_TRY_STATUS(read_normalizer(c, *n, "normalizer", spec, sp));
  bool byte_level = false;
  if (auto p = j.find("pre_tokenizer"); p != j.end())
    SPLASH_TRY_STATUS(read_pre_tokenizer(c, *p, "pre_tokenizer", spec, byte_level, sp));
  if (spec.kind == TokenizerKind::kSentencePiece) {
    SPLASH_TRY_STATUS(check_spm_form(c, sp, byte_level, spec));
  } else {
    if (!byte_level && type_of(j.value("decoder", json())) == "ByteLevel") byte_level = true;
    if (!byte_level)
      return c.err("pre_tokenizer", "no ByteLevel step: only byte-level BPE and byte-fallback (Llama-2 form) BPE are supported");
    if (sp.prepend || sp.replace || sp.metaspace)
      return c.err("model.byte_fallback", "'\u2581' space handling without byte_fallback is not supported");
  }

  if (!config_json.empty()) {
    json cfg = json::parse(config_json, nullptr, false);
    if (cfg.is_discarded()) return make_error(source, ": tokenizer_config.json is not valid JSON");
    SPLASH_TRY_STATUS(read_config(c, cfg, spec, by_id));
  }
  // Tokens that end a turn in the chat formats we know, besides eos itself.
  for (const char* s : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<end_of_turn>"})
    for (const AddedToken& a : spec.added)
      if (a.content == s) spec.eog_ids.push_back(a.id);

  spec.tokens = std::move(by_id);
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  for (size_t i = 0; i < spec.tokens.size(); ++i)
    if (spec.tokens[i].empty()) spec.types[i] = TokenType::kUnused;
  if (spec.kind == TokenizerKind::kSentencePiece) spm_types_and_scores(spec);
  return Tokenizer::build(std::move(spec));
}

}  // namespace

Result<Tokenizer> load_tokenizer_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                           const std::string& source) {
  // nlohmann::json throws on some accessors; nothing may escape the module.
  try {
    return load_impl(tokenizer_json, config_json, source);
  } catch (const std::exception& e) {
    return make_error(source, ": ", e.what());
  }
}

Result<Tokenizer> load_tokenizer_json(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string json_path = path, config_path;
  if (fs::is_directory(path, ec)) {
    json_path = (fs::path(path) / "tokenizer.json").string();
    config_path = (fs::path(path) / "tokenizer_config.json").string();
  } else {
    config_path = (fs::path(path).parent_path() / "tokenizer_config.json").string();
  }
  SPLASH_TRY(std::string text, read_text_file(json_path));
  std::string config;
  if (fs::exists(config_path, ec)) {
    SPLASH_TRY(std::string cfg, read_text_file(config_path));
    config = std::move(cfg);
  }
  return load_tokenizer_json_text(text, config, json_path);
}

}  // namespace splash
