// The Anthropic routes: POST /v1/messages and /v1/messages/count_tokens. The request is validated
// and converted by server/anthropic, rendered through the chat template like a chat request, and
// handed to the generation seam with the Messages wire writer. Every error on these routes is in
// Anthropic's shape (the writer decorator in app.cpp converts the shared code's).
#include "server/anthropic/messages_request.h"
#include "server/anthropic/messages_wire.h"
#include "server/app/app.h"
#include "server/openai/render.h"
#include "server/openai/tool_call_parser.h"

namespace splash::app {

namespace {

void respond_messages_error(http::ResponseWriter& w, const openai::ApiError& e) {
  http::SimpleResponse r = anthropic::error_response(e);
  w.respond(r.status, std::move(r.headers), std::move(r.body));
}

struct RenderedMessages {
  std::string prompt;   // the template's output
};

// Shared by both routes: the template. A forced tool call is a grammar (App::tool_call_matcher).
openai::ApiResult<RenderedMessages> render_messages(const anthropic::MessagesRequest& r,
                                                           const ChatTemplate* tmpl, const openai::TemplateExtras& extras) {
  if (tmpl == nullptr)
    return openai::invalid_request("this model has no chat template Splash can render; use /v1/completions");
  auto prompt = openai::render_chat(*tmpl, r.chat, extras);
  if (!prompt.ok()) return openai::invalid_request(str_cat("chat template: ", prompt.error_message()));
  return RenderedMessages{std::move(*prompt)};
}

}  // namespace

void App::handle_messages(const http::Request& req, const Writer& w) {
  gen::GenerationRequest g;  // arrival: now
  auto parsed = anthropic::parse_messages_request(req.body, /*count_tokens=*/false);
  if (!parsed.ok()) return respond_messages_error(*w, parsed.error());
  anthropic::MessagesRequest& r = *parsed;
  if (!known_model(r.model))
    return respond_messages_error(*w, openai::api_error(404, "model_not_found",
                                                        str_cat("model '", r.model, "' is not served here (serving '",
                                                                config_.reported_id(), "')")));
  auto rendered = render_messages(r, deps_.chat_template, template_extras());
  if (!rendered.ok()) return respond_messages_error(*w, rendered.error());

  const openai::CommonFields& c = r.chat.common;
  apply_common(c, g);
  g.max_tokens = r.max_tokens;
  g.clamp_max_tokens = true;  // spec 2.4: over the window runs to the limit (model_context_window_exceeded)
  g.output.split = true;
  g.output.chat = openai::ChatOutputOptions::for_request(r.chat, rendered->prompt);
  g.output.chat.call_id_prefix = "toolu_";
  using Mode = anthropic::ToolChoice::Mode;
  const bool forced = r.tool_choice.mode == Mode::kAny || r.tool_choice.mode == Mode::kTool;
  if (forced && r.chat.common.constraint) {
    return respond_messages_error(
        *w, openai::invalid_request("'output_config.format' and a forced 'tool_choice' cannot be combined"));
  }
  if (forced) {
    std::optional<std::string> only;
    if (r.tool_choice.mode == Mode::kTool) only = r.tool_choice.name;
    auto m = tool_call_matcher(r.chat, only, g.output.chat.start_in_reasoning);
    if (!m.ok()) return respond_messages_error(*w, m.error());
    g.constraint = std::move(*m);
  } else if (r.chat.common.constraint) {
    auto m = constraint_matcher(*r.chat.common.constraint, g.output.chat.start_in_reasoning);
    if (!m.ok()) return respond_messages_error(*w, m.error());
    g.constraint = std::move(*m);
  }
  gen::encode_prompt(*deps_.tokenizer, rendered->prompt, /*add_special=*/false,
                     deps_.plan->maximum_context_tokens, g);

  openai::IdGenerator ids;
  anthropic::MessageMeta meta;
  meta.id = ids.next("msg_");
  meta.model = config_.reported_id();
  meta.prompt_tokens = static_cast<int64_t>(g.prompt.size());
  meta.stop_sequences = c.stop;
  meta.return_progress = c.return_progress;
  auto wire = anthropic::messages_wire(std::move(meta), c.stream);
  gen::generate(generation_context(), std::move(g), std::move(wire), w);
}

void App::handle_count_tokens(const http::Request& req, const Writer& w) {
  auto parsed = anthropic::parse_messages_request(req.body, /*count_tokens=*/true);
  if (!parsed.ok()) return respond_messages_error(*w, parsed.error());
  if (!known_model(parsed->model))
    return respond_messages_error(*w, openai::api_error(404, "model_not_found",
                                                        str_cat("model '", parsed->model, "' is not served here (serving '",
                                                                config_.reported_id(), "')")));
  auto rendered = render_messages(*parsed, deps_.chat_template, template_extras());
  if (!rendered.ok()) return respond_messages_error(*w, rendered.error());
  // Not bounded by the context (spec 2.1: token endpoints may exceed it).
  const size_t n =
      deps_.tokenizer->encode(rendered->prompt, /*add_special=*/false, /*parse_special=*/true).size();
  respond_json(*w, 200, {{"input_tokens", n}});
}

}  // namespace splash::app
