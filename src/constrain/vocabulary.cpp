#include "constrain/vocabulary.h"

#include <algorithm>
#include <numeric>

namespace splash::constrain {

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_tokens)
    : bytes_(std::move(token_bytes)), stop_tokens_(std::move(stop_tokens)) {
  std::vector<int32_t> order(bytes_.size());
  std::iota(order.begin(), order.end(), 0);
  std::erase_if(order, [&](int32_t t) { return bytes_[t].empty(); });
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });

  // Sorted order is depth-first order: each token opens nodes past its common prefix with the last.
  nodes_.push_back(Node{});
  std::vector<int32_t> open{0};  // open[d]: the node at depth d on the current path
  const std::string* prev = nullptr;
  for (int32_t t : order) {
    const std::string& s = bytes_[t];
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    while (open.size() > common + 1) {
      nodes_[open.back()].end = static_cast<int32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      Node n;
      n.byte = static_cast<uint8_t>(s[d]);
      n.depth = static_cast<uint16_t>(std::min<size_t>(d + 1, UINT16_MAX));
      n.tokens_begin = n.tokens_end = static_cast<int32_t>(token_ids_.size());
      open.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back(n);
    }
    Node& leaf = nodes_[open.back()];
    if (leaf.tokens_begin == leaf.tokens_end) leaf.tokens_begin = static_cast<int32_t>(token_ids_.size());
    token_ids_.push_back(t);
    leaf.tokens_end = static_cast<int32_t>(token_ids_.size());
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  while (!open.empty()) {
    nodes_[open.back()].end = static_cast<int32_t>(nodes_.size());
    open.pop_back();
  }
}

}  // namespace splash::constrain
