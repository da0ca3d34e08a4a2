// The OpenAI Responses routes: POST /v1/responses (through the generation seam, like chat),
// GET / DELETE /v1/responses/{id} (the in-process store), POST /v1/responses/input_tokens.
#include <ctime>

#include "server/app/app.h"
#include "server/openai/json_input.h"
#include "server/openai/render.h"
#include "server/openai/responses_request.h"
#include "server/openai/responses_wire.h"
#include "server/openai/tool_call_parser.h"

namespace splash::app {

namespace {

void responses_error(http::ResponseWriter& w, const openai::ApiError& e) { respond_error(w, e.status, e.code, e.message); }

}  // namespace

// Parses, resolves previous_response_id and renders: shared by create and input_tokens. On failure
// the error has been answered and nullopt is returned.
std::optional<App::ResponsesPrompt> App::responses_prompt(const http::Request& req, const Writer& w) {
  auto parsed = openai::parse_responses_request(std::string_view(req.body));
  if (!parsed.ok()) {
    responses_error(*w, parsed.error());
    return std::nullopt;
  }
  ResponsesPrompt p;
  p.request = std::move(*parsed);
  const openai::ResponsesRequest& r = p.request;
  if (r.common.model && !known_model(*r.common.model)) {
    respond_error(*w, 404, "model_not_found",
                  str_cat("model '", *r.common.model, "' is not served here (serving '", config_.reported_id(), "')"));
    return std::nullopt;
  }
  if (!deps_.chat_template) {
    respond_error(*w, 400, "invalid_request_error", "this model has no chat template Splash can render; use /v1/completions");
    return std::nullopt;
  }
  if (r.previous_response_id) {
    auto previous = responses_->get(*r.previous_response_id);
    if (!previous) {
      respond_error(*w, 404, "previous_response_not_found",
                    str_cat("previous response '", *r.previous_response_id,
                            "' is not stored here (it was made with store:false, deleted, evicted from the "
                            "in-process store, or made before the server started)"));
      return std::nullopt;
    }
    p.conversation = previous->conversation;
  }
  openai::ChatRequest chat = openai::to_chat_request(r, p.conversation);
  auto prompt = openai::render_chat(*deps_.chat_template, chat, template_extras());
  if (!prompt.ok()) {
    respond_error(*w, 400, "invalid_request_error", str_cat("chat template: ", prompt.error_message()));
    return std::nullopt;
  }
  p.prompt = std::move(*prompt);
  p.output = openai::ChatOutputOptions::for_request(chat, p.prompt);
  p.chat = std::move(chat);
  p.conversation.insert(p.conversation.end(), r.input.begin(), r.input.end());
  return p;
}

void App::handle_responses(const http::Request& req, const Writer& w) {
  gen::GenerationRequest g;  // arrival: now
  auto p = responses_prompt(req, w);
  if (!p) return;
  const openai::ResponsesRequest& r = p->request;
  openai::IdGenerator ids;
  auto settings = openai::ResponseSettings::for_request(r, ids.next("resp_"), static_cast<int64_t>(std::time(nullptr)),
                                                        config_.reported_id());
  apply_common(r.common, g);
  g.max_tokens = r.max_output_tokens;
  g.output.split = true;
  g.output.chat = p->output;
  if (auto e = apply_constraint(p->chat, g.output.chat.start_in_reasoning, g)) return responses_error(*w, *e);
  gen::encode_prompt(*deps_.tokenizer, p->prompt, /*add_special=*/false, deps_.plan->maximum_context_tokens, g);
  auto wire = openai::responses_wire(std::move(settings), r.common.stream, r.store ? responses_ : nullptr,
                                     std::move(p->conversation));
  gen::generate(generation_context(), std::move(g), std::move(wire), w);
}

void App::handle_responses_input_tokens(const http::Request& req, const Writer& w) {
  auto p = responses_prompt(req, w);
  if (!p) return;
  // No engine and no context limit (spec 2.1: token endpoints may exceed the context).
  auto ids = deps_.tokenizer->encode(p->prompt, /*add_special=*/false, /*parse_special=*/true);
  respond_json(*w, 200, {{"object", "response.input_tokens"}, {"input_tokens", ids.size()}});
}

void App::handle_stored_response(const http::Request& req, const std::string& id, const Writer& w) {
  if (req.method == "DELETE") {
    if (!responses_->erase(id)) return respond_error(*w, 404, "not_found", str_cat("response '", id, "' is not stored here"));
    return respond_json(*w, 200, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
  }
  if (req.query.find("stream=true") != std::string::npos)
    return respond_error(*w, 400, "invalid_request_error", "'stream' is not supported when retrieving a stored response");
  auto entry = responses_->get(id);
  if (!entry) return respond_error(*w, 404, "not_found", str_cat("response '", id, "' is not stored here"));
  w->respond(200, {{"Content-Type", "application/json"}}, openai::dump_json(entry->response));
}

}  // namespace splash::app
