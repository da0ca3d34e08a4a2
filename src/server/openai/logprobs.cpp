#include "server/openai/logprobs.h"

#include <cmath>

namespace splash::openai {

using ojson = nlohmann::ordered_json;

namespace {

ojson byte_list(const std::string& s) {
  ojson bytes = ojson::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

ojson chat_entry(int32_t id, float logprob, const TokenPiece& piece) {
  const std::string text = piece(id);
  ojson e = ojson::object();
  e["token"] = text;  // dump_json replaces invalid UTF-8
  e["logprob"] = logprob_value(logprob);
  e["bytes"] = byte_list(text);
  return e;
}

}  // namespace

double logprob_value(float logprob) { return std::isfinite(logprob) ? static_cast<double>(logprob) : kLogprobFloor; }

ojson chat_logprob_entries(std::span<const TokenLogprob> tokens, const TokenPiece& piece) {
  ojson list = ojson::array();
  for (const TokenLogprob& t : tokens) {
    ojson e = chat_entry(t.id, t.logprob, piece);
    ojson top = ojson::array();
    for (const TokenAlternative& a : t.top) top.push_back(chat_entry(a.id, a.logprob, piece));
    e["top_logprobs"] = std::move(top);
    list.push_back(std::move(e));
  }
  return list;
}

ojson chat_logprobs(ojson entries) {
  ojson j = ojson::object();
  j["content"] = std::move(entries);
  j["refusal"] = nullptr;
  return j;
}

CompletionLogprobs::CompletionLogprobs(TokenPiece piece)
    : piece_(std::move(piece)),
      tokens_(ojson::array()),
      token_logprobs_(ojson::array()),
      top_logprobs_(ojson::array()),
      text_offset_(ojson::array()) {}

void CompletionLogprobs::add_token(int32_t id) {
  const std::string text = piece_(id);
  text_offset_.push_back(offset_);
  // Characters, as OpenAI's (Python) offsets count them: every byte but UTF-8 continuation bytes.
  for (unsigned char c : text) offset_ += (c & 0xC0) != 0x80 ? 1 : 0;
  tokens_.push_back(text);
}

void CompletionLogprobs::add_unscored(int32_t id) {
  add_token(id);
  token_logprobs_.push_back(nullptr);
  top_logprobs_.push_back(nullptr);
}

void CompletionLogprobs::add(std::span<const TokenLogprob> tokens) {
  for (const TokenLogprob& t : tokens) {
    add_token(t.id);
    token_logprobs_.push_back(logprob_value(t.logprob));
    // Two alternatives with the same text (different ids) keep the likelier one, which comes first.
    ojson top = ojson::object();
    for (const TokenAlternative& a : t.top) {
      const std::string text = piece_(a.id);
      if (!top.contains(text)) top[text] = logprob_value(a.logprob);
    }
    top_logprobs_.push_back(std::move(top));
  }
}

ojson CompletionLogprobs::take() {
  ojson j = ojson::object();
  j["tokens"] = std::exchange(tokens_, ojson::array());
  j["token_logprobs"] = std::exchange(token_logprobs_, ojson::array());
  j["top_logprobs"] = std::exchange(top_logprobs_, ojson::array());
  j["text_offset"] = std::exchange(text_offset_, ojson::array());
  return j;
}

}  // namespace splash::openai
