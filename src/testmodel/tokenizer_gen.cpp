#include "testmodel/tokenizer_gen.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "core/utf8.h"

namespace splash::testmodel {
namespace {

using nlohmann::ordered_json;

// Training text for the synthetic tokenizers (written for this project). Repeated words and
// fragments give the merge statistics something to find.
constexpr std::string_view kCorpus =
    "The little model reads the text and writes the next word. The user asks a question and the "
    "assistant answers the question with a short answer. The cat sat on the mat in the sun. The "
    "dog ran to the park and played with the ball. A small bird sang in the tall tree near the "
    "river. The children went to the market to buy apples, bread and milk for their mother. "
    "Once upon a time there was a girl who loved to read books about the stars, the moon and the "
    "sea. She read every evening and she dreamed of ships that sailed the seven seas. "
    "Hello, world! How are you today? I am fine, thank you. What is the time? It is ten o'clock. "
    "The quick brown fox jumps over the lazy dog. Numbers: 1 2 3 4 5 6 7 8 9 10 100 2024. "
    "The server sends tokens to the client as soon as they are ready, and the client shows them "
    "on the screen. The cache keeps the prompt so that the next turn starts faster. "
    "We tested the tokenizer on these sentences, then we tested it again on other sentences, and "
    "the results were the same every time. The weather is nice and the garden is green. "
    "There is nothing in the world that the reader cannot find in a good story. "
    "Thinking about the answer, the assistant wrote the function and then checked the result.";

std::string utf8(uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

// GPT-2's reversible byte -> printable code point map used by byte-level BPE vocabularies.
std::vector<std::string> byte_level_alphabet() {
  std::vector<std::string> out(256);
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    out[b] = utf8(printable ? b : 256 + extra++);
  }
  return out;
}

const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\''; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Words for byte-level training, close to the Qwen2 pre-tokenizer on ASCII: an optional leading
// space plus a run of letters, single digits, an optional space plus a run of punctuation.
std::vector<std::string> split_byte_level(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    if (text[j] == ' ' && j + 1 < text.size() && text[j + 1] != ' ') ++j;
    if (is_letter(text[j])) {
      while (j < text.size() && is_letter(text[j])) ++j;
    } else if (is_digit(text[j])) {
      ++j;
    } else {
      ++j;
      while (j < text.size() && !is_letter(text[j]) && !is_digit(text[j]) && text[j] != ' ') ++j;
    }
    words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

// Learns merges: the most frequent adjacent pair (ties: the smaller pair) until `n_merges` or no
// pair occurs twice. Returns the merges in order.
std::vector<std::pair<std::string, std::string>> learn_merges(
    std::vector<std::vector<std::string>> words, size_t n_merges) {
  std::vector<std::pair<std::string, std::string>> merges;
  while (merges.size() < n_merges) {
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& w : words) {
      for (size_t i = 0; i + 1 < w.size(); ++i) ++counts[{w[i], w[i + 1]}];
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 1;
    for (const auto& [pair, n] : counts) {
      if (n > best_n) {
        best = &pair;
        best_n = n;
      }
    }
    if (best == nullptr) break;
    const auto m = *best;
    merges.push_back(m);
    for (auto& w : words) {
      std::vector<std::string> next;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == m.first && w[i + 1] == m.second) {
          next.push_back(m.first + m.second);
          ++i;
        } else {
          next.push_back(w[i]);
        }
      }
      w = std::move(next);
    }
  }
  return merges;
}

ordered_json added_token(int id, const std::string& content, bool special) {
  return ordered_json{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                      {"rstrip", false}, {"normalized", false}, {"special", special}};
}

ordered_json byte_level_step() {
  return ordered_json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                      {"use_regex", false}};
}

constexpr std::string_view kQwenSplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr std::string_view kChatMlTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' "
    "}}{%- endif %}";

constexpr std::string_view kSimpleTemplate =
    "{{ bos_token }}{%- for message in messages %}{{ message['role'] + ': ' + message['content'] + "
    "'\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{ 'assistant: ' }}{%- endif %}";

TokenizerData make_byte_level(uint32_t target_size) {
  TokenizerData t;
  t.spm = false;
  t.pre = "qwen2";
  const auto alphabet = byte_level_alphabet();
  for (const auto& s : alphabet) t.tokens.push_back(s);
  std::vector<std::vector<std::string>> words;
  for (const auto& w : split_byte_level(kCorpus)) {
    std::vector<std::string> syms;
    for (unsigned char c : w) syms.push_back(alphabet[c]);
    words.push_back(std::move(syms));
  }
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const size_t want = target_size > 256 + specials.size() ? target_size - 256 - specials.size() : 0;
  std::set<std::string> seen(t.tokens.begin(), t.tokens.end());
  for (const auto& [a, b] : learn_merges(words, want)) {
    t.merges.push_back(a + " " + b);
    if (seen.insert(a + b).second) t.tokens.push_back(a + b);
  }
  t.token_types.assign(t.tokens.size(), TokenType::kNormal);
  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < t.tokens.size(); ++i) vocab[t.tokens[i]] = i;
  ordered_json added = ordered_json::array();
  for (const auto& s : specials) {
    const int id = static_cast<int>(t.tokens.size());
    t.tokens.push_back(s);
    t.token_types.push_back(TokenType::kControl);
    added.push_back(added_token(id, s, true));
  }
  t.scores.assign(t.tokens.size(), 0.0f);
  const int32_t endoftext = static_cast<int32_t>(t.tokens.size() - 3);
  t.bos = endoftext;  // llama.cpp's qwen2 convention; add_bos is false, so it is never inserted
  t.pad = endoftext;
  t.eos = endoftext + 2;
  t.add_bos = false;
  t.chat_template = kChatMlTemplate;

  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", kQwenSplitRegex}}},
                           {"behavior", "Isolated"}, {"invert", false}},
                          byte_level_step()}}};
  j["post_processor"] = byte_level_step();
  j["decoder"] = byte_level_step();
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"fuse_unk", false},
                {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", vocab},
                {"merges", t.merges}};
  t.tokenizer_json = j.dump(1);

  ordered_json cfg;
  cfg["add_bos_token"] = false;
  cfg["add_prefix_space"] = false;
  ordered_json dec = ordered_json::object();
  for (const auto& tok : added) {
    dec[std::to_string(tok["id"].get<int>())] = {{"content", tok["content"]}, {"lstrip", false},
                                                   {"normalized", false}, {"rstrip", false},
                                                   {"single_word", false}, {"special", true}};
  }
  cfg["added_tokens_decoder"] = dec;
  cfg["bos_token"] = nullptr;
  cfg["chat_template"] = kChatMlTemplate;
  cfg["clean_up_tokenization_spaces"] = false;
  cfg["eos_token"] = "<|im_end|>";
  cfg["errors"] = "replace";
  cfg["model_max_length"] = 32768;
  cfg["pad_token"] = "<|endoftext|>";
  cfg["split_special_tokens"] = false;
  cfg["tokenizer_class"] = "Qwen2Tokenizer";
  cfg["unk_token"] = nullptr;
  t.tokenizer_config_json = cfg.dump(1);
  return t;
}

TokenizerData make_spm(uint32_t target_size) {
  TokenizerData t;
  t.spm = true;
  t.tokens = {"<unk>", "<s>", "</s>"};
  t.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    t.tokens.push_back(buf);
    t.token_types.push_back(TokenType::kByte);
  }
  t.scores.assign(t.tokens.size(), 0.0f);
  // Base pieces: every printable ASCII character (the space as "▁"), so English never needs byte
  // fallback; anything else (newlines, accents, emoji) goes through the byte tokens.
  std::set<std::string> seen;
  for (char c = ' '; c <= '~'; ++c) {
    std::string piece = c == ' ' ? kSpmSpace : std::string(1, c);
    seen.insert(piece);
    t.tokens.push_back(piece);
    t.token_types.push_back(TokenType::kNormal);
    t.scores.push_back(-1000.0f - static_cast<float>(t.tokens.size()));
  }
  // Words as SentencePiece sees them: "▁" replaces spaces, each word starts at a "▁".
  std::vector<std::vector<std::string>> words;
  std::vector<std::string> cur = {kSpmSpace};
  for (char c : kCorpus) {
    if (c == ' ') {
      words.push_back(std::move(cur));
      cur = {kSpmSpace};
    } else {
      cur.emplace_back(1, c);
    }
  }
  words.push_back(std::move(cur));
  const size_t want = target_size > t.tokens.size() ? target_size - t.tokens.size() : 0;
  float score = 0.0f;
  for (const auto& [a, b] : learn_merges(words, want)) {
    t.merges.push_back(a + " " + b);
    if (seen.insert(a + b).second) {
      t.tokens.push_back(a + b);
      t.token_types.push_back(TokenType::kNormal);
      t.scores.push_back(score);  // earlier merges score higher, so SPM merging follows BPE order
      score -= 1.0f;
    }
  }
  t.unk = 0;
  t.bos = 1;
  t.eos = 2;
  t.add_bos = true;
  t.chat_template = kSimpleTemplate;

  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < t.tokens.size(); ++i) vocab[t.tokens[i]] = i;
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = {added_token(0, "<unk>", true), added_token(1, "<s>", true),
                       added_token(2, "</s>", true)};
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", kSpmSpace}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpmSpace}}}}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                {{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", kSpmSpace}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", true}, {"byte_fallback", true}, {"ignore_merges", false},
                {"vocab", vocab}, {"merges", t.merges}};
  t.tokenizer_json = j.dump(1);

  ordered_json cfg;
  cfg["add_bos_token"] = true;
  cfg["add_eos_token"] = false;
  cfg["bos_token"] = "<s>";
  cfg["chat_template"] = kSimpleTemplate;
  cfg["clean_up_tokenization_spaces"] = false;
  cfg["eos_token"] = "</s>";
  cfg["legacy"] = false;
  cfg["model_max_length"] = 2048;
  cfg["pad_token"] = nullptr;
  cfg["tokenizer_class"] = "LlamaTokenizerFast";
  cfg["unk_token"] = "<unk>";
  t.tokenizer_config_json = cfg.dump(1);
  return t;
}

}  // namespace

Result<TokenizerData> make_synthetic_tokenizer(bool spm, uint32_t target_size) {
  if (target_size < 300 || target_size > 4096) {
    return make_error("synthetic tokenizer: target size ", target_size, " is outside [300, 4096]");
  }
  return spm ? make_spm(target_size) : make_byte_level(target_size);
}

static Result<TokenizerData> load_hf_tokenizer_impl(const std::string& path) {
  SPLASH_TRY(std::string text, read_text_file(path));
  // nlohmann::json (tree maps), not ordered_json, whose linear-scan objects make a 150K-entry vocab
  // quadratic to parse.
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error(path, ": not a JSON object");
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object() || model->value("type", "") != "BPE") {
    return make_error(path, ": model.type must be \"BPE\" (byte-level BPE tokenizers only)");
  }
  const auto vocab = model->find("vocab");
  const auto merges = model->find("merges");
  if (vocab == model->end() || !vocab->is_object() || merges == model->end() || !merges->is_array()) {
    return make_error(path, ": model.vocab (object) and model.merges (array) are required");
  }
  constexpr int64_t kMaxVocab = 1 << 22;
  std::map<int64_t, std::pair<std::string, TokenType>> by_id;
  for (const auto& [tok, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab) {
      return make_error(path, ": model.vocab[\"", tok, "\"] is not an id in [0, ", kMaxVocab, ")");
    }
    by_id[id.get<int64_t>()] = {tok, TokenType::kNormal};
  }
  if (auto added = j.find("added_tokens"); added != j.end() && added->is_array()) {
    for (const auto& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string() || a["id"].get<int64_t>() < 0 ||
          a["id"].get<int64_t>() >= kMaxVocab) {
        return make_error(path, ": an entry of added_tokens lacks an integer id or a content string");
      }
      const bool special = a.value("special", false);
      by_id[a["id"].get<int64_t>()] = {a["content"].get<std::string>(),
                                       special ? TokenType::kControl : TokenType::kUserDefined};
    }
  }
  TokenizerData t;
  t.spm = false;
  t.pre = "qwen2";
  const int64_t n = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  for (int64_t id = 0; id < n; ++id) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      t.tokens.push_back(str_cat("[PAD", id, "]"));
      t.token_types.push_back(TokenType::kUnused);
    } else {
      t.tokens.push_back(it->second.first);
      t.token_types.push_back(it->second.second);
    }
  }
  t.scores.assign(t.tokens.size(), 0.0f);
  for (const auto& m : *merges) {
    if (m.is_string()) {
      t.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      t.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return make_error(path, ": model.merges holds an entry that is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  t.tokenizer_json = std::move(text);

  auto id_of = [&](const nlohmann::json& v) -> int32_t {
    const std::string s = v.is_string() ? v.get<std::string>()
                          : v.is_object() && v.contains("content") && v["content"].is_string()
                              ? v["content"].get<std::string>()
                              : std::string();
    if (s.empty()) return -1;
    for (const auto& [id, tok] : by_id) {
      if (tok.first == s) return static_cast<int32_t>(id);
    }
    return -1;
  };
  const auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    SPLASH_TRY(std::string ctext, read_text_file(cfg_path.string()));
    nlohmann::json c = nlohmann::json::parse(ctext, nullptr, false);
    if (c.is_discarded() || !c.is_object()) return make_error(cfg_path.string(), ": not a JSON object");
    if (c.contains("chat_template") && c["chat_template"].is_string()) {
      t.chat_template = c["chat_template"].get<std::string>();
    }
    if (c.contains("eos_token")) t.eos = id_of(c["eos_token"]);
    if (c.contains("pad_token")) t.pad = id_of(c["pad_token"]);
    if (c.contains("bos_token")) t.bos = id_of(c["bos_token"]);
    t.add_bos = c.value("add_bos_token", false);
    t.tokenizer_config_json = std::move(ctext);
  }
  if (t.bos < 0) t.bos = t.pad;  // llama.cpp gives Qwen's <|endoftext|> as BOS; add_bos stays false
  return t;
}

Result<TokenizerData> load_hf_tokenizer(const std::string& path) {
  try {
    return load_hf_tokenizer_impl(path);
  } catch (const std::exception& e) {  // a JSON value of an unexpected type
    return make_error(path, ": ", e.what());
  }
}

Status pad_vocab(TokenizerData& t, uint32_t n_vocab) {
  if (t.tokens.size() > n_vocab) {
    return make_error("tokenizer has ", t.tokens.size(), " tokens, more than n_vocab ", n_vocab);
  }
  while (t.tokens.size() < n_vocab) {
    t.tokens.push_back(str_cat("[PAD", t.tokens.size(), "]"));
    t.token_types.push_back(TokenType::kUnused);
    t.scores.push_back(-1e9f);
  }
  return {};
}

}  // namespace splash::testmodel
