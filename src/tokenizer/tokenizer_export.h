// Writing a loaded Tokenizer back out in the two file forms models ship with, so `splash convert`
// can carry the tokenizer into any output format: GGUF `tokenizer.ggml.*` metadata, and a Hugging
// Face `tokenizer.json` + `tokenizer_config.json`. Loading what these produce gives a tokenizer that
// encodes and decodes every string exactly as the original.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace splash {

// tokenizer.ggml.model ("llama" or "gpt2"), .pre (gpt2: the pre-tokenizer's llama.cpp name, e.g.
// "qwen2"; an unnamed pre-tokenizer is an error), .tokens, .scores, .token_type, .merges,
// bos/eos/unk/padding ids, add_bos_token / add_eos_token, add_space_prefix, and
// tokenizer.chat_template when the tokenizer carries one.
// Not representable, so not carried (as llama.cpp's own converter): a byte-level tokenizer's
// normalizer (NFC), and a Metaspace-form SentencePiece tokenizer's narrower space prefix (prepend_scheme
// "first", none before a leading space); the GGUF copy prefixes a space the llama.cpp way. ByteLevel
// add_prefix_space and ignore_merges, which would change every encoding, are errors.
Result<std::vector<std::pair<std::string, gguf::Value>>> tokenizer_gguf_metadata(const Tokenizer& tokenizer);

struct HfTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;  // bos/eos/pad tokens, add_bos_token, chat_template
};

// Byte-level BPE: model BPE with merges, the pre-tokenizer's split regex + ByteLevel, NFC when the
// tokenizer normalizes. SentencePiece vocabularies: the form Llama-2 checkpoints use on the Hub
// (model BPE with byte_fallback and merges ordered by the merged piece's score, normalizer
// Prepend("▁") + Replace(" ", "▁"), decoder Replace + ByteFallback + Fuse + Strip; a Metaspace
// pre-tokenizer instead when the tokenizer came from one). Errors: a vocabulary string that is not
// valid UTF-8 (JSON cannot hold it).
Result<HfTokenizerFiles> tokenizer_hf_files(const Tokenizer& tokenizer);

}  // namespace splash
