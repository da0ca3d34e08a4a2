// The base model's log-probabilities for `splash perplexity --save-logits` / `--kl-base`: the
// evaluation tokens and, for every scored token, the log-softmax of the whole vocabulary quantized to
// 16 bits per entry (QuantizedLogProbs: llama.cpp's encoding, so KL figures are computed the same
// way as llama-perplexity's). Full vocabulary, not top-K: n_vocab * 2 + 8 bytes per scored token
// (64 KB for a 32,000-token vocabulary).
//
// Splash's layout (little-endian):
//   offset  size  field
//        0     4  magic "SPLG"
//        4     2  format version (kLogitsFormat; a new layout gets a new number, never a reused one)
//        6     2  row encoding (1 = quantized 16-bit log-probs)
//        8     4  n_ctx
//       12     4  n_vocab
//       16     4  n_chunk
//       20     4  flags (bit 0: the first token of each window was replaced by BOS)
//       24     8  header checksum: XXH3-64 of bytes [0, 24)
//       32  4*T   token ids, T = n_chunk * n_ctx (int32)
//        .     R  rows: per chunk, per scored token (n_ctx - 1 - n_ctx / 2 of them):
//                 f32 scale, f32 min_log_prob, then n_vocab rounded up to even uint16 codes
//        .     8  checksum: XXH3-64 of every byte before it
// llama.cpp's own file (llama-perplexity --kl-divergence-base: "_logits_", n_ctx, n_vocab, n_chunk,
// the tokens, the same rows; no version, no checksum) is read too, so a model can be compared with
// llama.cpp's output on the same text.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/mapped_file.h"
#include "core/result.h"
#include "eval/perplexity_stats.h"

namespace splash::eval {

constexpr uint16_t kLogitsFormat = 1;
constexpr uint16_t kLogitsRowQuant16 = 1;

// Rows per chunk: the tokens a window of n_ctx scores.
inline int64_t scored_per_chunk(int64_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

// Writes a file as the chunks are evaluated. Not thread-safe. The file appears under `path` only
// when finish() succeeds (written to a temporary name, then renamed).
class LogitsWriter {
 public:
  ~LogitsWriter();
  LogitsWriter(LogitsWriter&&) noexcept;
  LogitsWriter& operator=(LogitsWriter&&) noexcept;

  // tokens: [n_chunk * n_ctx], the evaluated text as tokenized (before any BOS replacement).
  static Result<LogitsWriter> create(const std::string& path, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                                     bool bos_replaced, std::span<const int32_t> tokens);
  // The next scored token's logits ([n_vocab]), in chunk order.
  Status add_row(std::span<const float> logits);
  // Checks that every row was written, appends the checksum and renames the file into place.
  Status finish();

 private:
  struct State;
  explicit LogitsWriter(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// A base file, mapped read-only; the checksums are verified on open (a Splash file) before any row
// is used. Thread-safe to read.
class LogitsBase {
 public:
  // Either format; the error names the file and what is wrong (magic, version, size, checksum).
  static Result<LogitsBase> open(const std::string& path);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t n_chunk() const { return n_chunk_; }
  bool is_llama_cpp() const { return llama_cpp_; }
  std::span<const int32_t> tokens() const { return tokens_; }  // [n_chunk * n_ctx]
  // Scored token i (in [0, scored_per_chunk(n_ctx))) of chunk c.
  QuantizedLogProbs row(int64_t chunk, int64_t i) const;

 private:
  MappedFile file_;
  int64_t n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0;
  bool llama_cpp_ = false;
  std::span<const int32_t> tokens_;
  const uint8_t* rows_ = nullptr;
};

}  // namespace splash::eval
