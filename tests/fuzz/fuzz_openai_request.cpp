// libFuzzer target for the OpenAI schema layer: any bytes go into the chat and completion request
// parsers (which must answer with a value or an ApiError: no crash, no exception, no leak); a chat
// request that parses is rendered with the real Qwen3 chat template, and the same bytes are then
// streamed through the output side (reasoning split, tool-call parsing with the request's tools, SSE
// chunks) in two different cuts, which must agree.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "server/openai/render.h"
#include "server/openai/response.h"

namespace {

const splash::ChatTemplate* qwen3_template() {
  static const std::optional<splash::ChatTemplate> tmpl = []() -> std::optional<splash::ChatTemplate> {
    std::ifstream f(std::string(SPLASH_SOURCE_DIR) + "/tests/template/templates/qwen3.jinja", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    auto parsed = splash::ChatTemplate::parse(ss.str());
    if (!parsed.ok()) return std::nullopt;
    return std::move(parsed).value();
  }();
  return tmpl ? &*tmpl : nullptr;
}

std::string run_stream(const splash::openai::ChatOutputOptions& options, std::string_view text, size_t step) {
  using namespace splash::openai;
  ChatStream stream(ResponseMeta{"chatcmpl-f", 0, "m"}, options, StreamOptions{true, true});
  std::string all = stream.start();
  for (size_t i = 0; i < text.size(); i += step) {
    for (auto& c : stream.text(text.substr(i, step), 1)) all += c;
  }
  for (auto& c : stream.finish(splash::FinishReason::kLength, GenerationStats{})) all += c;
  const ChatOutput& out = stream.output();
  std::string summary = out.reasoning() + '\x01' + out.content();
  for (const auto& call : out.tool_calls()) summary += '\x02' + call.name + '\x03' + call.arguments;
  return summary;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace splash::openai;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  (void)parse_completion_request(body);
  auto chat = parse_chat_request(body);
  ChatOutputOptions options;
  options.id_seed = 1;
  if (chat.ok()) {
    if (const splash::ChatTemplate* tmpl = qwen3_template()) {
      TemplateExtras extras;
      extras.eos_token = "<|im_end|>";
      auto prompt = render_chat(*tmpl, *chat, extras);
      if (prompt.ok()) options = ChatOutputOptions::for_request(*chat, *prompt);
    }
    options.id_seed = 1;
  } else {
    (void)error_body(chat.error());
  }
  options.parse_tool_calls = true;
  // However the text is cut, the parsed output must be the same.
  if (run_stream(options, body, 1) != run_stream(options, body, 7)) __builtin_trap();
  return 0;
}
