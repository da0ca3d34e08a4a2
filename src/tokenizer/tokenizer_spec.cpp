// Tokenizer -> TokenizerSpec (the inverse of Tokenizer::build) and the score-ordered merges of a
// SentencePiece vocabulary; both exist so a loaded tokenizer can be written out again (export).
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_map>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace splash {

TokenizerSpec Tokenizer::to_spec() const {
  const detail::TokenizerImpl& t = *impl_;
  TokenizerSpec spec;
  spec.kind = t.kind;
  spec.source = t.source;
  spec.tokens = t.tokens;
  // build fills absent scores with zeros; give "absent" back so BPE exports carry no score array.
  if (t.kind == TokenizerKind::kSentencePiece ||
      std::any_of(t.scores.begin(), t.scores.end(), [](float s) { return s != 0.0f; }))
    spec.scores = t.scores;
  spec.types = t.types;

  std::vector<std::pair<int32_t, uint64_t>> by_rank;  // (rank, left << 32 | right)
  by_rank.reserve(t.merges.size());
  for (const auto& [key, m] : t.merges) by_rank.emplace_back(m.rank, key);
  std::sort(by_rank.begin(), by_rank.end());
  spec.merges.reserve(by_rank.size());
  for (const auto& [rank, key] : by_rank)
    spec.merges.emplace_back(t.tokens[static_cast<size_t>(key >> 32)], t.tokens[static_cast<size_t>(key & 0xFFFFFFFFu)]);

  spec.added = t.added;
  std::sort(spec.added.begin(), spec.added.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  spec.normalizers = t.normalizers;
  for (const detail::CompiledSplit& s : t.splits) spec.splits.push_back({s.pattern, s.behavior, s.invert});
  spec.byte_level_prefix_space = t.byte_level_prefix_space;
  spec.ignore_merges = t.ignore_merges;
  spec.add_space_prefix = t.add_space_prefix;
  spec.space_prefix_first_only = t.space_prefix_first_only;
  spec.space_prefix_unless_space = t.space_prefix_unless_space;
  spec.bos_id = t.bos_id;
  spec.eos_id = t.eos_id;
  spec.unk_id = t.unk_id;
  spec.pad_id = t.pad_id;
  spec.eog_ids = t.eog_ids;
  spec.add_bos = t.add_bos;
  spec.add_eos = t.add_eos;
  spec.chat_template = t.chat_template;
  return spec;
}

namespace {

bool utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::vector<std::pair<std::string, std::string>> spm_merges_by_score(const TokenizerSpec& spec) {
  // String -> first id with it, as Tokenizer::build indexes duplicates.
  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(spec.tokens.size());
  for (size_t i = 0; i < spec.tokens.size(); ++i)
    if (!spec.tokens[i].empty()) ids.emplace(spec.tokens[i], static_cast<int32_t>(i));

  struct Candidate {
    float score;
    int32_t left, right;
  };
  std::vector<Candidate> found;
  for (const auto& [piece, id] : ids) {
    float score = static_cast<size_t>(id) < spec.scores.size() ? spec.scores[id] : 0.0f;
    if (std::isnan(score)) score = -std::numeric_limits<float>::infinity();  // keeps the sort's order strict
    for (size_t k = 1; k < piece.size(); ++k) {
      if (utf8_continuation(piece[k])) continue;
      auto l = ids.find(piece.substr(0, k));
      if (l == ids.end()) continue;
      auto r = ids.find(piece.substr(k));
      if (r == ids.end()) continue;
      found.push_back({score, l->second, r->second});
    }
  }
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(b.score, a.left, a.right) < std::tie(a.score, b.left, b.right);
  });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(found.size());
  for (const Candidate& c : found) merges.emplace_back(spec.tokens[c.left], spec.tokens[c.right]);
  return merges;
}

}  // namespace splash
