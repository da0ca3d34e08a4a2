// llama2.c checkpoints (`model.bin`) and vocabularies (`tokenizer.bin`), memory-mapped.
//
// model.bin: 7 x int32 header {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len} (vocab_size < 0: a separate classifier `wcls` follows; > 0: the output shares the token
// embedding), then fp32 tensors in this order (row-major, last dimension contiguous):
//   token_embedding [vocab, dim], rms_att [layer, dim], wq [layer, dim, dim],
//   wk [layer, kv_dim, dim], wv [layer, kv_dim, dim], wo [layer, dim, dim], rms_ffn [layer, dim],
//   w1 [layer, hidden, dim], w2 [layer, dim, hidden], w3 [layer, hidden, dim], rms_final [dim],
//   freq_cis_real [seq_len, head_size / 2], freq_cis_imag [same] (unused: skipped), wcls [vocab, dim]
// where kv_dim = dim * n_kv_heads / n_heads. The file size must match exactly.
//
// Views carry Hugging Face llama names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj
// .weight, ..., model.norm.weight, lm_head.weight only when not shared).
//
// RoPE layout: llama2.c rotates adjacent pairs (2i, 2i + 1) of each head, so the q_proj / k_proj
// views are in that *interleaved* layout -- the layout GGUF `llama` tensors use. HF llama
// safetensors use rotate-half (pairs (i, i + head_dim / 2)); convert with llama2c_qk_to_rotate_half
// (or permute_rope_rows in formats/tensor_names.h) before writing those.
//
// Thread-safety: immutable after open(). Views stay valid while the Llama2cModel lives.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "core/result.h"
#include "formats/model_config.h"

namespace splash {

struct Llama2cHeader {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // as stored: negative = separate classifier
  int32_t seq_len = 0;
};

struct Llama2cTensor {
  std::string name;              // HF name
  std::vector<uint64_t> shape;   // row-major, e.g. [out, in] for projections
  std::span<const float> data;   // [product(shape)] inside the mapping
};

class Llama2cModel {
 public:
  static Result<Llama2cModel> open(const std::string& path);

  const Llama2cHeader& header() const { return header_; }
  // architecture "llama", rms_eps 1e-5, rope_theta 10000, max_position = seq_len,
  // tie_embeddings = shared classifier.
  const ModelConfig& config() const { return config_; }
  const std::vector<Llama2cTensor>& tensors() const { return tensors_; }
  const Llama2cTensor* find(std::string_view name) const;  // nullptr when absent
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  Llama2cHeader header_;
  ModelConfig config_;
  std::vector<Llama2cTensor> tensors_;
  std::unordered_map<std::string_view, size_t> by_name_;
};

// Copies a q_proj / k_proj view ([n_head * head_dim, dim], interleaved RoPE layout) into a new
// buffer in the rotate-half layout HF safetensors use. n_head is n_heads for q, n_kv_heads for k.
std::vector<float> llama2c_qk_to_rotate_half(const Llama2cTensor& t, uint32_t n_head);

// tokenizer.bin: int32 max_token_length, then per token {f32 score, int32 len, len bytes}.
struct Llama2cVocab {
  uint32_t max_token_length = 0;
  std::vector<std::string> pieces;  // raw bytes of each piece ("<0x0A>", "▁the", ...)
  std::vector<float> scores;
};

// Reads exactly `n_vocab` tokens (the model header's vocab size; llama2.c files do not store the
// count) and requires the file to end there. n_vocab == 0 reads tokens until the end of the file.
Result<Llama2cVocab> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, const std::string& source,
                                             uint32_t n_vocab);
Result<Llama2cVocab> load_llama2c_tokenizer(const std::string& path, uint32_t n_vocab);

// llama2.c's exporter wrote pieces already decoded: "\n<s>\n" / "\n</s>\n" for ids 1 / 2, byte
// tokens 3..258 as the UTF-8 of Latin-1 code point i (0x41 -> "A", 0xFF -> "\xC3\xBF"), and spaces
// instead of SentencePiece's U+2581. This returns the SentencePiece spelling of every piece
// ("<s>", "</s>", "<0x00>".."<0xFF>", "\xE2\x96\x81the") so the vocabulary can be written to GGUF /
// tokenizer.json or fed to the SentencePiece tokenizer. Pieces that do not follow that pattern are
// only space-mapped.
std::vector<std::string> llama2c_sentencepiece_pieces(const Llama2cVocab& vocab);

}  // namespace splash
