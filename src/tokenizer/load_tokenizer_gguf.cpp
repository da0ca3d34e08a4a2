// GGUF tokenizer.ggml.* metadata -> TokenizerSpec: "llama" (SentencePiece with scores and byte
// fallback) and "gpt2" (byte-level BPE with merges and a named pre-tokenizer).
#include <algorithm>

#include "formats/gguf.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/tokenizer.h"

namespace splash {

namespace {

// Optional u32 token id; absent -> keep `out`.
Status optional_id(const gguf::GgufFile& f, const char* key, int32_t& out) {
  if (!f.has(key)) return {};
  SPLASH_TRY(uint32_t v, f.get_u32(key));
  // Some converters write UINT32_MAX (= -1) for "none".
  out = v == UINT32_MAX ? -1 : static_cast<int32_t>(v);
  return {};
}

Status optional_bool(const gguf::GgufFile& f, const char* key, bool& out) {
  if (!f.has(key)) return {};
  SPLASH_TRY(bool v, f.get_bool(key));
  out = v;
  return {};
}

}  // namespace

Result<Tokenizer> load_tokenizer_gguf(const gguf::GgufFile& f) {
  const std::string& src = f.source();
  SPLASH_TRY(std::string model, f.get_string("tokenizer.ggml.model"));
  TokenizerSpec spec;
  spec.source = src;
  if (model == "llama") {
    spec.kind = TokenizerKind::kSentencePiece;
    spec.add_bos = true;  // llama.cpp's defaults for SPM vocabularies
    spec.add_space_prefix = true;
  } else if (model == "gpt2") {
    spec.kind = TokenizerKind::kByteLevelBpe;
    std::string pre = "default";
    if (f.has("tokenizer.ggml.pre")) {
      SPLASH_TRY(std::string p, f.get_string("tokenizer.ggml.pre"));
      pre = std::move(p);
    }
    auto pattern = pretokenizer_pattern(pre);
    if (!pattern)
      return make_error(src, ": tokenizer.ggml.pre '", pre, "' is not a supported pre-tokenizer (",
                        pretokenizer_gguf_names(), ")");
    spec.splits.push_back({std::move(*pattern), SplitBehavior::kIsolated, false});
  } else {
    return make_error(src, ": tokenizer.ggml.model '", model, "' is not supported (llama, gpt2)");
  }

  SPLASH_TRY(auto tokens, f.get_string_array("tokenizer.ggml.tokens"));
  spec.tokens.assign(tokens.begin(), tokens.end());
  const size_t n = spec.tokens.size();
  if (f.has("tokenizer.ggml.scores")) {
    SPLASH_TRY(auto scores, f.get_f32_array("tokenizer.ggml.scores"));
    if (scores.size() != n)
      return make_error(src, ": tokenizer.ggml.scores has ", scores.size(), " entries for ", n, " tokens");
    spec.scores = std::move(scores);
  }
  if (f.has("tokenizer.ggml.token_type")) {
    SPLASH_TRY(auto types, f.get_i32_array("tokenizer.ggml.token_type"));
    if (types.size() != n)
      return make_error(src, ": tokenizer.ggml.token_type has ", types.size(), " entries for ", n, " tokens");
    spec.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 1 || types[i] > 6)
        return make_error(src, ": tokenizer.ggml.token_type[", i, "] = ", types[i], " is not a token type (1..6)");
      spec.types[i] = static_cast<TokenType>(types[i]);
    }
  } else {
    spec.types.assign(n, TokenType::kNormal);
  }
  if (spec.kind == TokenizerKind::kByteLevelBpe) {
    SPLASH_TRY(auto merges, f.get_string_array("tokenizer.ggml.merges"));
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string& m = merges[i];
      size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size())
        return make_error(src, ": tokenizer.ggml.merges[", i, "] '", m, "' is not two space-separated tokens");
      spec.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
  }

  SPLASH_TRY_STATUS(optional_id(f, "tokenizer.ggml.bos_token_id", spec.bos_id));
  SPLASH_TRY_STATUS(optional_id(f, "tokenizer.ggml.eos_token_id", spec.eos_id));
  SPLASH_TRY_STATUS(optional_id(f, "tokenizer.ggml.unknown_token_id", spec.unk_id));
  SPLASH_TRY_STATUS(optional_id(f, "tokenizer.ggml.padding_token_id", spec.pad_id));
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    int32_t id = -1;
    SPLASH_TRY_STATUS(optional_id(f, key, id));
    if (id >= 0) spec.eog_ids.push_back(id);
  }
  SPLASH_TRY_STATUS(optional_bool(f, "tokenizer.ggml.add_bos_token", spec.add_bos));
  SPLASH_TRY_STATUS(optional_bool(f, "tokenizer.ggml.add_eos_token", spec.add_eos));
  SPLASH_TRY_STATUS(optional_bool(f, "tokenizer.ggml.add_space_prefix", spec.add_space_prefix));
  if (spec.kind == TokenizerKind::kByteLevelBpe) spec.add_space_prefix = false;
  if (f.has("tokenizer.chat_template")) {
    SPLASH_TRY(std::string tmpl, f.get_string("tokenizer.chat_template"));
    spec.chat_template = std::move(tmpl);
  }

  // Control, user-defined and unknown tokens are matched in the text before the algorithm runs, as in
  // llama.cpp; only user-defined ones are matched when special tokens are not parsed.
  for (size_t i = 0; i < n; ++i) {
    TokenType ty = spec.types[i];
    if (ty != TokenType::kControl && ty != TokenType::kUserDefined && ty != TokenType::kUnknown) continue;
    if (spec.tokens[i].empty()) continue;
    const auto id = static_cast<int32_t>(i);
    AddedToken a;
    a.id = id;
    a.content = spec.tokens[i];
    a.special = ty != TokenType::kUserDefined;
    spec.added.push_back(std::move(a));
    for (const char* eog : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>"})
      if (spec.tokens[i] == eog && std::find(spec.eog_ids.begin(), spec.eog_ids.end(), id) == spec.eog_ids.end())
        spec.eog_ids.push_back(id);
  }
  return Tokenizer::build(std::move(spec));
}

}  // namespace splash
