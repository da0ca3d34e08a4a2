// The hashed n-gram row ids of qwen4_exp's PLE layer (../shared/reference/qwen4-exp.md §2, §3.5;
// tests/reference/qwen4_exp.py `ngram_rows` is the reference this is tested against).
//
// For a token t with the n-1 ids before it, heads (g-2)*hp .. (g-1)*hp-1 hash the g-gram
// (g = 2..n): mixed = XOR_k (w_k * m_k) over k < g, row = mixed % size_h + offset_h. The window
// never crosses an EOS: w_k = eos when any of the k ids before t is eos, else the id k places back
// (the EOS itself keeps its own predecessors). A sequence starts with n-1 eos ids of context.
// Multipliers are odd numbers drawn with splitmix64 from the seed, below 2^63 / vocab so id * m
// fits a signed int64; head sizes are consecutive primes >= the base, offsets their prefix sums,
// and the table pads up to a multiple of `divisible_by` rows.
//
// Row ids depend only on token ids, so callers compute them ahead of the forward pass (prefetch).
// NgramHash is immutable after make() and safe to use from many threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace splash::ple {

struct NgramHashConfig {
  uint64_t vocab = 0;              // vocab_size
  uint32_t ngram_size = 3;         // n: bigram .. n-gram heads
  uint32_t heads_per_ngram = 8;    // hp
  uint32_t eos = 0;                // eos_token_id ([0] of a list, as transformers takes it)
  uint64_t seed = 1234;            // absent from the shipped config: transformers' default
  uint64_t vocab_base = 20000000;  // ngram_vocab_size_base: the first head's prime is >= this
  uint64_t divisible_by = 128;     // make_ngram_vocab_size_divisible_by
  uint32_t ple_index = 0;          // which PLE module (qwen4_exp has one)
};

class NgramHash {
 public:
  // Validates the config (vocab > 0, n >= 2, hp >= 1, eos < vocab) and computes the constants.
  static Result<NgramHash> make(const NgramHashConfig& config);

  const NgramHashConfig& config() const { return config_; }
  uint32_t n_heads() const { return (config_.ngram_size - 1) * config_.heads_per_ngram; }
  uint32_t context_len() const { return config_.ngram_size - 1; }              // ids of history a token needs
  const std::vector<uint64_t>& multipliers() const { return multipliers_; }    // [ngram_size]
  const std::vector<uint64_t>& head_sizes() const { return head_sizes_; }      // [n_heads]
  const std::vector<uint64_t>& head_offsets() const { return head_offsets_; }  // [n_heads]
  uint64_t logical_rows() const { return head_offsets_.back() + head_sizes_.back(); }
  uint64_t padded_rows() const { return padded_rows_; }

  // Row ids of tokens[0..T): context holds the context_len() ids before tokens[0], oldest first
  // (eos ids at a sequence start). out: [T, n_heads]. Ids must be < vocab (the engine validates
  // tokens before they reach a model); the result stays below padded_rows() regardless.
  void rows(std::span<const uint32_t> context, std::span<const uint32_t> tokens, std::span<uint64_t> out) const;

  // The context after tokens (the last context_len() ids of context ++ tokens).
  std::vector<uint32_t> next_context(std::span<const uint32_t> context, std::span<const uint32_t> tokens) const;
  std::vector<uint32_t> start_context() const { return std::vector<uint32_t>(context_len(), config_.eos); }

 private:
  NgramHashConfig config_;
  std::vector<uint64_t> multipliers_;
  std::vector<uint64_t> head_sizes_;
  std::vector<uint64_t> head_offsets_;
  uint64_t padded_rows_ = 0;
};

uint64_t splitmix64(uint64_t v);

}  // namespace splash::ple
