// A model's vocabulary as the matcher sees it: each token's bytes in a trie laid out in depth-first
// order, so a walk can skip every token that starts with a rejected prefix in one jump.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace splash::constrain {

class Vocabulary {
 public:
  // token_bytes[id]: the bytes the token decodes to; empty for special tokens, which grammar bytes
  // never match. stop_tokens: allowed exactly where the grammar may end (EOS, <|im_end|>, ...).
  Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_tokens);

  struct Node {
    uint8_t byte = 0;          // the byte that leads here from the parent (root: unused)
    uint16_t depth = 0;        // bytes from the root
    int32_t end = 0;           // the index after this node's subtree
    int32_t tokens_begin = 0;  // tokens whose bytes end here: token_ids()[tokens_begin, tokens_end)
    int32_t tokens_end = 0;
  };

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t token) const { return bytes_[token]; }
  const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }
  const std::vector<Node>& nodes() const { return nodes_; }        // nodes()[0] is the root
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  size_t max_depth() const { return max_depth_; }
  size_t mask_words() const { return (bytes_.size() + 63) / 64; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> stop_tokens_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  size_t max_depth_ = 0;
};

}  // namespace splash::constrain
