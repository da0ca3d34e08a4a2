// libFuzzer target for the tokenizer.json loader: any input must load or fail with an Error (no crash,
// no exception, no out-of-bounds read); when it loads, encoding and decoding a fixed string (with
// special tokens, invalid UTF-8 and a long word) and streaming it back must work too, and the bounded
// encode must agree with the full one.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = splash::load_tokenizer_json_text(json, "", "fuzz");
  if (!tok.ok()) return 0;
  const std::string_view text = "Hello, world! <|im_start|>user 123 \xE4\xBD\xA0\xE5\xA5\xBD \xFF\xFE  \n\n aaaaaaaaaaaaaaaa";
  auto ids = tok->encode(text, true, true);
  // The bounded encode gives the same ids with SentencePiece chunk boundaries anywhere the
  // vocabulary allows them, and refuses one id short of them.
  for (size_t chunk : {size_t{1}, size_t{3}}) {
    auto bounded = tok->encode_bounded(text, true, true, ids.size(), chunk);
    if (!bounded || *bounded != ids) __builtin_trap();
    if (!ids.empty() && tok->encode_bounded(text, true, true, ids.size() - 1, chunk)) __builtin_trap();
  }
  std::string back = tok->decode(ids, false);
  splash::IncrementalDetokenizer detok(*tok);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.flush();
  if (streamed != back) __builtin_trap();  // the two decoding paths must agree
  for (int32_t id = -1; id < 4; ++id) (void)tok->token_to_piece(id);
  return 0;
}
