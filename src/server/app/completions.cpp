// The OpenAI inference routes: POST /v1/chat/completions, /v1/completions and /apply-template. Each
// request is validated by the OpenAI schema layer, rendered and tokenized here, and handed to the
// generation seam (server/gen/generation.h) with the OpenAI wire writers (server/openai/wire.h).
#include <algorithm>
#include <ctime>

#include "server/app/app.h"
#include "server/openai/json_input.h"
#include "server/openai/logprobs.h"
#include "server/openai/render.h"
#include "server/openai/request.h"
#include "server/openai/response.h"
#include "server/openai/tool_call_parser.h"
#include "server/openai/wire.h"

namespace splash::app {

namespace {

void respond_api_error(http::ResponseWriter& w, const openai::ApiError& e) {
  respond_error(w, e.status, e.code, e.message);
}

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// Token texts for logprobs (empty when the request did not ask); the tokenizer outlives every request.
openai::TokenPiece token_piece(const Tokenizer& tok, const std::optional<int>& logprobs) {
  if (!logprobs) return {};
  return [&tok](int32_t id) { return tok.token_to_piece(id); };
}

}  // namespace

void apply_common(const openai::CommonFields& c, gen::GenerationRequest& g) {
  g.sampling = openai::to_sampling_params(c.sampling);
  g.stop = c.stop;
  g.ignore_eos = c.ignore_eos;
  g.cache_prompt = c.cache_prompt;
  g.want_progress = c.return_progress;
  g.priority = c.priority;
  g.timeout_s = c.timeout_s;
  g.stream = c.stream;
}

std::optional<openai::ApiError> App::apply_constraint(const openai::ChatRequest& r, bool in_reasoning,
                                                      gen::GenerationRequest& g) {
  using Mode = openai::ToolChoice::Mode;
  const bool forced = r.tool_choice.mode == Mode::kRequired || r.tool_choice.mode == Mode::kFunction;
  if (forced && r.common.constraint) {
    return openai::invalid_request(str_cat("'", r.common.constraint->field.substr(0, r.common.constraint->field.find('.')),
                                           "' and a forced 'tool_choice' cannot be combined"));
  }
  // Strict tools under auto: text stays free, a call the model opens is enforced (a lazy grammar).
  const bool strict_auto = r.tool_choice.mode == Mode::kAuto && !r.common.constraint &&
                           std::any_of(r.tools.begin(), r.tools.end(), is_strict);
  if (!forced && !r.common.constraint && !strict_auto) return std::nullopt;
  std::optional<std::string> only;
  if (r.tool_choice.mode == Mode::kFunction) only = r.tool_choice.function;
  auto m = forced || strict_auto ? tool_call_matcher(r, only, in_reasoning, strict_auto)
                                 : constraint_matcher(*r.common.constraint, in_reasoning);
  if (!m.ok()) return m.error();
  g.constraint = std::move(*m);
  return std::nullopt;
}

gen::GenerationContext App::generation_context() {
  gen::GenerationContext ctx;
  ctx.engines = deps_.engines;
  ctx.context = deps_.plan->maximum_context_tokens;
  ctx.server_timeout = config_.options.request_timeout;
  ctx.watch = [this](std::weak_ptr<gen::KeepAliveTarget> t) { watch_stream(std::move(t)); };
  return ctx;
}

openai::TemplateExtras App::template_extras() const {
  openai::TemplateExtras extras;
  const Tokenizer& tok = *deps_.tokenizer;
  if (tok.bos_id() >= 0) extras.bos_token = tok.token_text(tok.bos_id());
  if (tok.eos_id() >= 0) extras.eos_token = tok.token_text(tok.eos_id());
  if (!config_.options.default_reasoning_effort.empty())
    extras.default_reasoning_effort = config_.options.default_reasoning_effort;
  return extras;
}

void App::handle_chat(const http::Request& req, const Writer& w) {
  gen::GenerationRequest g;  // arrival: now
  auto parsed = openai::parse_chat_request(std::string_view(req.body));
  if (!parsed.ok()) return respond_api_error(*w, parsed.error());
  openai::ChatRequest& r = *parsed;
  if (r.common.model && !known_model(*r.common.model))
    return respond_error(*w, 404, "model_not_found",
                         str_cat("model '", *r.common.model, "' is not served here (serving '", config_.reported_id(), "')"));
  if (!deps_.chat_template)
    return respond_error(*w, 400, "invalid_request_error",
                         "this model has no chat template Splash can render; use /v1/completions");
  auto prompt = openai::render_chat(*deps_.chat_template, r, template_extras());
  if (!prompt.ok())
    return respond_error(*w, 400, "invalid_request_error", str_cat("chat template: ", prompt.error_message()));

  openai::IdGenerator ids;
  openai::ResponseMeta meta{ids.next("chatcmpl-"), unix_now(), config_.reported_id()};
  apply_common(r.common, g);
  g.max_tokens = r.max_tokens;
  g.logprobs = r.common.logprobs.value_or(-1);
  g.output.split = true;
  g.output.chat = openai::ChatOutputOptions::for_request(r, *prompt);
  if (auto e = apply_constraint(r, g.output.chat.start_in_reasoning, g)) return respond_api_error(*w, *e);
  gen::encode_prompt(*deps_.tokenizer, *prompt, /*add_special=*/false, deps_.plan->maximum_context_tokens, g);
  auto wire = openai::chat_wire(meta, g.output.chat, openai::StreamOptions{r.common.include_usage, r.common.return_progress},
                                r.common.stream, token_piece(*deps_.tokenizer, r.common.logprobs));
  gen::generate(generation_context(), std::move(g), std::move(wire), w);
}

void App::handle_completion(const http::Request& req, const Writer& w) {
  gen::GenerationRequest g;  // arrival: now
  auto parsed = openai::parse_completion_request(std::string_view(req.body));
  if (!parsed.ok()) return respond_api_error(*w, parsed.error());
  openai::CompletionRequest& r = *parsed;
  if (r.common.model && !known_model(*r.common.model))
    return respond_error(*w, 404, "model_not_found",
                         str_cat("model '", *r.common.model, "' is not served here (serving '", config_.reported_id(), "')"));
  openai::IdGenerator ids;
  openai::ResponseMeta meta{ids.next("cmpl-"), unix_now(), config_.reported_id()};
  apply_common(r.common, g);
  g.max_tokens = r.max_tokens;
  if (r.common.constraint) {
    auto m = constraint_matcher(*r.common.constraint, /*in_reasoning=*/false);
    if (!m.ok()) return respond_api_error(*w, m.error());
    g.constraint = std::move(*m);
  }
  if (const auto* text = std::get_if<std::string>(&r.prompt)) {
    // As llama.cpp does: the tokenizer's own BOS rule applies, special-token text is parsed.
    gen::encode_prompt(*deps_.tokenizer, *text, /*add_special=*/true, deps_.plan->maximum_context_tokens, g);
  } else {
    g.prompt = std::get<std::vector<int32_t>>(r.prompt);
  }
  g.logprobs = r.common.logprobs.value_or(-1);
  std::optional<openai::CompletionEcho> echo;
  if (r.echo) {
    const auto* text = std::get_if<std::string>(&r.prompt);
    echo = openai::CompletionEcho{text ? *text : deps_.tokenizer->decode(g.prompt), g.prompt};
    // max_tokens 0 generates nothing: the engine only scores the prompt (as it must for its logprobs).
    g.prompt_logprobs = r.common.logprobs.has_value() || r.max_tokens == 0;
  }
  auto wire = openai::completion_wire(meta, openai::StreamOptions{r.common.include_usage, r.common.return_progress},
                                      r.common.stream, token_piece(*deps_.tokenizer, r.common.logprobs), std::move(echo));
  gen::generate(generation_context(), std::move(g), std::move(wire), w);
}

void App::handle_apply_template(const http::Request& req, const Writer& w) {
  auto body = openai::parse_json(req.body);
  if (!body.ok()) return respond_api_error(*w, body.error());
  bool add_generation_prompt = true;
  if (body->is_object()) {
    if (auto it = body->find("add_generation_prompt"); it != body->end() && !it->is_null()) {
      if (!it->is_boolean())
        return respond_error(*w, 400, "invalid_request_error", "'add_generation_prompt' must be a boolean");
      add_generation_prompt = it->get<bool>();
    }
  }
  auto parsed = openai::parse_chat_request(*body);
  if (!parsed.ok()) return respond_api_error(*w, parsed.error());
  if (!deps_.chat_template)
    return respond_error(*w, 400, "invalid_request_error", "this model has no chat template Splash can render");
  openai::TemplateExtras extras = template_extras();
  extras.add_generation_prompt = add_generation_prompt;
  auto prompt = openai::render_chat(*deps_.chat_template, *parsed, extras);
  if (!prompt.ok())
    return respond_error(*w, 400, "invalid_request_error", str_cat("chat template: ", prompt.error_message()));
  respond_json(*w, 200, {{"prompt", *prompt}});
}

}  // namespace splash::app
