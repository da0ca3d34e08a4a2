// The route layer of `splash serve`: access checks before the body (Host allow-list, Origin / CORS,
// API key), then one handler per endpoint (spec 2.1). Inference routes live in completions.cpp
// (OpenAI) and messages.cpp (Anthropic), both on the generation seam (server/gen/generation.h); the
// rest (models, tokenize, health, ready, status, metrics, 404 / 405) in app.cpp.
//
//   App app(config, deps);                                   // deps borrowed, must outlive app
//   server_options.pre_body_check = [&](auto& h) { return app.pre_body_check(h); };
//   server->set_handler([&](auto& req, auto w) { app.handle(req, std::move(w)); });
//   app.set_ready(true);                                     // once the engine runs
//
// Thread-safety: pre_body_check() and handle() run on the transport's connection threads, many at
// once; the App's own state is atomics and immutable configuration. Handlers return quickly: an
// inference request finishes on the engine's callback thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/memory_plan.h"
#include "engine/scheduler.h"
#include "server/app/engine_host.h"
#include "server/app/serve_options.h"
#include "server/app/sleep_inhibitor.h"
#include "server/app/status.h"
#include "constrain/constraint.h"
#include "server/gen/generation.h"
#include "server/http/message.h"
#include "server/http/security.h"
#include "server/http/server.h"
#include "server/openai/render.h"
#include "server/openai/response_store.h"
#include "server/openai/responses_request.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace splash::app {

struct AppConfig {
  ServeOptions options;
  std::string model_id;               // the real id: the Hub repository, else the file or folder name
  std::vector<std::string> aliases;   // --served-model-name: more names accepted in `model`, listed by
                                      // /v1/models with `root` = model_id
  std::string model_path;
  // The id responses, the Ready line and /status report (spec 2.3): the real id, or the first alias
  // under --announce-served-name.
  const std::string& reported_id() const {
    return options.announce_served_name && !aliases.empty() ? aliases.front() : model_id;
  }
};

// Borrowed; each must outlive the App.
struct AppDeps {
  const Tokenizer* tokenizer = nullptr;         // required
  const ChatTemplate* chat_template = nullptr;  // nullptr: the model has none (chat routes answer 400)
  EngineHost* engines = nullptr;                // the engine (idle release, reload); nullptr only in
                                                // tests of the engine-free routes
  const MemoryPlan* plan = nullptr;             // required
  const BlockStore* disk = nullptr;             // the SSD cache; nullptr when off
  const http::Server* transport = nullptr;      // for /status http.connections; nullptr in tests
  const SleepInhibitor* awake = nullptr;        // for /status sleep_inhibitor; nullptr in tests
  int64_t n_vocab = 0;                          // the model's logits width; 0: the tokenizer's
};

using gen::KeepAliveTarget;

class App {
 public:
  App(AppConfig config, AppDeps deps);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Streams register here; one App thread pokes each live one about once a second.
  void watch_stream(std::weak_ptr<KeepAliveTarget> target);

  // For ServerOptions::pre_body_check: 403 for a Host outside the allow-list or a refused Origin,
  // 204 for an admitted CORS preflight, 401 for a missing or wrong key on a protected path, 413 for
  // a Content-Length over max_request_bytes().
  std::optional<http::SimpleResponse> pre_body_check(const http::Request& head);

  // For Server::set_handler.
  void handle(const http::Request& request, std::shared_ptr<http::ResponseWriter> writer);

  void set_ready(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }

  StatusSnapshot snapshot() const;
  const AppConfig& config() const { return config_; }
  // The effective --max-request-size: the flag's value, or under auto auto_max_request_bytes() of the
  // served context.
  uint64_t max_request_bytes() const { return max_request_bytes_; }

  // Counts one response by status class (the writer decorator calls it).
  void count_response(int status);

 private:
  using Writer = std::shared_ptr<http::ResponseWriter>;
  void route(const http::Request& req, const Writer& w);
  void handle_models(const Writer& w);
  void handle_model(const std::string& id, const Writer& w);
  void handle_tokenize(const http::Request& req, const Writer& w);
  void handle_apply_template(const http::Request& req, const Writer& w);
  void handle_chat(const http::Request& req, const Writer& w);          // completions.cpp
  void handle_completion(const http::Request& req, const Writer& w);    // completions.cpp
  void handle_messages(const http::Request& req, const Writer& w);      // messages.cpp
  void handle_count_tokens(const http::Request& req, const Writer& w);  // messages.cpp
  // responses.cpp: /v1/responses, /v1/responses/input_tokens, GET / DELETE /v1/responses/{id}.
  struct ResponsesPrompt {
    openai::ResponsesRequest request;
    std::vector<openai::ChatMessage> conversation;  // previous turns + this input (what the store keeps)
    std::string prompt;                             // rendered
    openai::ChatOutputOptions output;
    openai::ChatRequest chat;                       // what was rendered
  };
  std::optional<ResponsesPrompt> responses_prompt(const http::Request& req, const Writer& w);
  void handle_responses(const http::Request& req, const Writer& w);
  void handle_responses_input_tokens(const http::Request& req, const Writer& w);
  void handle_stored_response(const http::Request& req, const std::string& id, const Writer& w);
  gen::GenerationContext generation_context();
  openai::TemplateExtras template_extras() const;
  // The matcher for a request's response_format / grammar / regex (constraints.cpp); a 400 naming
  // what cannot be enforced otherwise. `in_reasoning`: the prompt opened a reasoning block.
  openai::ApiResult<std::shared_ptr<constrain::Matcher>> constraint_matcher(const openai::OutputConstraint& c,
                                                                            bool in_reasoning);
  // Structured output of a chat-shaped request (response_format / grammar / regex, a forced
  // tool_choice, or strict tools under tool_choice auto) onto `g`; the error to answer otherwise.
  std::optional<openai::ApiError> apply_constraint(const openai::ChatRequest& r, bool in_reasoning,
                                                   gen::GenerationRequest& g);
  // A forced tool call in the template's syntax: any offered tool, or only `only`. after_text
  // (strict tools under tool_choice auto): free text, then optionally calls, whose arguments follow
  // the schema of tools marked strict (any object for the others) from the call's opener on.
  openai::ApiResult<std::shared_ptr<constrain::Matcher>> tool_call_matcher(const openai::ChatRequest& chat,
                                                                           const std::optional<std::string>& only,
                                                                           bool in_reasoning, bool after_text = false);
  nlohmann::json model_entry(const std::string& id) const;
  bool known_model(const std::string& id) const;

  AppConfig config_;
  AppDeps deps_;
  std::unique_ptr<constrain::ConstraintCompiler> constraints_;  // compiled grammars, the vocabulary's masks
  // Stored /v1/responses results; shared with the requests' writers, which may outlive a route call.
  std::shared_ptr<openai::ResponseStore> responses_ = std::make_shared<openai::ResponseStore>();
  std::string instance_id_;
  std::string started_at_;
  std::chrono::steady_clock::time_point started_;
  std::atomic<bool> ready_{false};
  void keepalive_loop();
  std::mutex keepalive_mu_;
  std::condition_variable keepalive_cv_;
  std::vector<std::weak_ptr<KeepAliveTarget>> keepalive_targets_;
  bool keepalive_stop_ = false;
  std::thread keepalive_thread_;
  uint64_t max_request_bytes_ = 0;
  http::RefusalLog refusal_log_;  // Origin refusals: truncated, at most one line a second
  std::atomic<int64_t> requests_{0}, body_bytes_{0}, responses_2xx_{0}, responses_4xx_{0}, responses_5xx_{0};
};

// Structured output's compiler for this tokenizer: the vocabulary (n_vocab entries, 0 = the
// tokenizer's) is read on the first constrained request; end-of-generation tokens end the output.
// A tool marked "strict": true (its arguments then follow its schema even under tool_choice auto).
bool is_strict(const openai::Tool& t);
std::unique_ptr<constrain::ConstraintCompiler> make_constraint_compiler(const Tokenizer& tokenizer, int64_t n_vocab);
// The fields every OpenAI route maps the same way (completions.cpp).
void apply_common(const openai::CommonFields& c, gen::GenerationRequest& g);

// JSON response helpers shared by the route files.
void respond_json(http::ResponseWriter& w, int status, const nlohmann::json& body);
void respond_error(http::ResponseWriter& w, int status, std::string_view code, std::string_view message);

// "%2F" -> "/" for a path segment; nullopt for a malformed escape or an encoded NUL.
std::optional<std::string> percent_decode(std::string_view s);

}  // namespace splash::app
