#include "ple/ngram_hash.h"

#include <algorithm>

namespace splash::ple {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kLayerSeedStride = 10007;

bool is_prime(uint64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (uint64_t d = 3; d * d <= n; d += 2)
    if (n % d == 0) return false;
  return true;
}

}  // namespace

uint64_t splitmix64(uint64_t v) {
  v += kGamma;
  v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
  v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
  return v ^ (v >> 31);
}

Result<NgramHash> NgramHash::make(const NgramHashConfig& c) {
  if (c.vocab == 0) return make_error("PLE n-gram hash: vocab_size must be > 0");
  if (c.ngram_size < 2 || c.ngram_size > 8)
    return make_error("PLE n-gram hash: ngram_size ", c.ngram_size, " must be in 2..8");
  if (c.heads_per_ngram == 0) return make_error("PLE n-gram hash: heads_per_ngram must be > 0");
  if (c.eos >= c.vocab)
    return make_error("PLE n-gram hash: eos_token_id ", c.eos, " is not below vocab_size ", c.vocab);
  if (c.divisible_by == 0) return make_error("PLE n-gram hash: make_ngram_vocab_size_divisible_by must be > 0");
  if (c.vocab_base < 2 || c.vocab_base > (1ull << 40))
    return make_error("PLE n-gram hash: ngram_vocab_size_base ", c.vocab_base, " out of range");
  NgramHash h;
  h.config_ = c;
  const uint64_t half = std::max<uint64_t>(1, ((1ull << 63) - 1) / c.vocab / 2);
  const uint64_t base = c.seed + kLayerSeedStride * c.ple_index;
  for (uint64_t i = 0; i < c.ngram_size; ++i)
    h.multipliers_.push_back(2 * (splitmix64(base + kGamma * (i + 1)) % half) + 1);
  const uint64_t n_heads = h.n_heads();
  const uint64_t skip = c.ple_index * n_heads;  // earlier PLE modules take the earlier primes
  uint64_t p = c.vocab_base - 1, found = 0;
  while (h.head_sizes_.size() < n_heads) {
    ++p;
    if (!is_prime(p)) continue;
    if (found++ >= skip) h.head_sizes_.push_back(p);
  }
  uint64_t total = 0;
  for (uint64_t s : h.head_sizes_) {
    h.head_offsets_.push_back(total);
    total += s;
  }
  h.padded_rows_ = (total + c.divisible_by - 1) / c.divisible_by * c.divisible_by;
  return h;
}

void NgramHash::rows(std::span<const uint32_t> context, std::span<const uint32_t> tokens,
                     std::span<uint64_t> out) const {
  const uint32_t n = config_.ngram_size, hp = config_.heads_per_ngram, ctx = context_len();
  SPLASH_CHECK(context.size() == ctx);
  SPLASH_CHECK(out.size() == tokens.size() * n_heads());
  auto at = [&](size_t i) { return i < ctx ? context[i] : tokens[i - ctx]; };  // history index
  uint64_t* o = out.data();
  for (size_t t = 0; t < tokens.size(); ++t) {
    const size_t i = t + ctx;
    uint64_t mixed = 0;
    bool eos_seen = false;  // an eos among the k ids just before the token
    for (uint32_t k = 0; k < n; ++k) {
      uint64_t w = at(i - k);
      if (k > 0) {
        eos_seen = eos_seen || w == config_.eos;
        if (eos_seen) w = config_.eos;
      }
      mixed ^= w * multipliers_[k];
      if (k == 0) continue;
      for (uint32_t h = (k - 1) * hp; h < k * hp; ++h) *o++ = mixed % head_sizes_[h] + head_offsets_[h];
    }
  }
}

std::vector<uint32_t> NgramHash::next_context(std::span<const uint32_t> context,
                                              std::span<const uint32_t> tokens) const {
  std::vector<uint32_t> all(context.begin(), context.end());
  all.insert(all.end(), tokens.begin(), tokens.end());
  return std::vector<uint32_t>(all.end() - context_len(), all.end());
}

}  // namespace splash::ple
