#include "server/app/app.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

#include "server/anthropic/messages_wire.h"
#include "server/http/request_parser.h"
#include "server/http/security.h"
#include "server/web_assets.h"

namespace splash::app {

namespace {

constexpr const char* kJson = "application/json";

std::string utc_now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string random_id() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

std::string os_version() {
  utsname u{};
  if (uname(&u) != 0) return "Linux";
  return str_cat(u.sysname, " ", u.release);
}

bool is_messages_path(std::string_view path) { return path.rfind("/v1/messages", 0) == 0; }

// Adds the CORS headers an admitted cross-origin request needs to whatever the route answers, and
// counts the response's status class. On the Anthropic routes, errors made by shared code (the
// router's 404 / 405) are put in Anthropic's shape.
class DecoratedWriter : public http::ResponseWriter {
 public:
  DecoratedWriter(std::shared_ptr<http::ResponseWriter> inner, std::vector<http::Header> extra, App* app,
                  bool anthropic_errors)
      : inner_(std::move(inner)), extra_(std::move(extra)), app_(app), anthropic_errors_(anthropic_errors) {}
  void respond(int status, std::vector<http::Header> headers, std::string body) override {
    if (anthropic_errors_ && status >= 400) {
      http::SimpleResponse r = anthropic::to_anthropic(http::SimpleResponse{status, std::move(headers), std::move(body)});
      status = r.status;
      headers = std::move(r.headers);
      body = std::move(r.body);
    }
    app_->count_response(status);
    headers.insert(headers.end(), extra_.begin(), extra_.end());
    inner_->respond(status, std::move(headers), std::move(body));
  }
  bool start_stream(int status, std::vector<http::Header> headers) override {
    app_->count_response(status);
    headers.insert(headers.end(), extra_.begin(), extra_.end());
    return inner_->start_stream(status, std::move(headers));
  }
  bool write(std::string_view data) override { return inner_->write(data); }
  void end() override { inner_->end(); }
  bool client_gone() const override { return inner_->client_gone(); }
  void on_disconnect(std::function<void()> fn) override { inner_->on_disconnect(std::move(fn)); }

 private:
  std::shared_ptr<http::ResponseWriter> inner_;
  std::vector<http::Header> extra_;
  App* app_;
  bool anthropic_errors_;
};

}  // namespace

void respond_json(http::ResponseWriter& w, int status, const nlohmann::json& body) {
  w.respond(status, {{"Content-Type", kJson}}, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void respond_error(http::ResponseWriter& w, int status, std::string_view code, std::string_view message) {
  http::SimpleResponse r = http::error_response(status, code, message);
  w.respond(r.status, std::move(r.headers), std::move(r.body));
}

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

App::App(AppConfig config, AppDeps deps)
    : config_(std::move(config)),
      deps_(deps),
      instance_id_(random_id()),
      started_at_(utc_now_rfc3339()),
      started_(std::chrono::steady_clock::now()) {
  SPLASH_CHECK(deps_.tokenizer != nullptr && deps_.plan != nullptr);
  constraints_ = make_constraint_compiler(*deps_.tokenizer, deps_.n_vocab);
  constraints_->set_timing({config_.options.mask_timeout, config_.options.test_mask_delay});
  max_request_bytes_ =
      config_.options.max_request_bytes.value_or(auto_max_request_bytes(deps_.plan->maximum_context_tokens));
  keepalive_thread_ = std::thread([this] { keepalive_loop(); });
}

App::~App() {
  {
    std::lock_guard lock(keepalive_mu_);
    keepalive_stop_ = true;
  }
  keepalive_cv_.notify_all();
  keepalive_thread_.join();
}

void App::watch_stream(std::weak_ptr<KeepAliveTarget> target) {
  std::lock_guard lock(keepalive_mu_);
  keepalive_targets_.push_back(std::move(target));
}

void App::keepalive_loop() {
  std::unique_lock lock(keepalive_mu_);
  while (!keepalive_stop_) {
    keepalive_cv_.wait_for(lock, std::chrono::seconds(1));
    if (keepalive_stop_) break;
    std::vector<std::shared_ptr<KeepAliveTarget>> live;
    std::erase_if(keepalive_targets_, [&](const std::weak_ptr<KeepAliveTarget>& t) {
      auto p = t.lock();
      if (!p) return true;
      live.push_back(std::move(p));
      return false;
    });
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    for (auto& t : live) t->keepalive_if_idle(now);
    live.clear();
    lock.lock();
  }
}

void App::count_response(int status) {
  if (status >= 500) responses_5xx_.fetch_add(1);
  else if (status >= 400) responses_4xx_.fetch_add(1);
  else if (status >= 200 && status < 300) responses_2xx_.fetch_add(1);
}

std::optional<http::SimpleResponse> App::pre_body_check(const http::Request& head) {
  requests_.fetch_add(1);
  auto refuse = [&](http::SimpleResponse r) {
    if (is_messages_path(head.path)) r = anthropic::to_anthropic(std::move(r));
    count_response(r.status);
    return std::optional<http::SimpleResponse>(std::move(r));
  };
  const std::string_view host = head.header("Host").value_or(std::string_view());
  http::HostPolicy hosts{config_.options.host, config_.options.allowed_hosts};
  if (!http::host_allowed(host, hosts, head.local_addr))
    return refuse(http::error_response(403, "forbidden", http::host_refused_message(host)));
  http::OriginPolicy origins{config_.options.allowed_origins};
  const auto origin = head.header("Origin");
  http::CorsDecision cors = http::check_origin(origin, host, origins);
  if (!cors.allowed()) {
    // A client can send any Origin, as often as it likes: what is logged is bounded in size and rate.
    const std::string shown = http::log_excerpt(*origin);
    if (auto line = refusal_log_.line(
            str_cat("Refused · Origin ", shown, " · restart with --allowed-origin ", shown, " to accept it"),
            std::chrono::steady_clock::now()))
      std::fprintf(stderr, "%s\n", line->c_str());
    return refuse(http::error_response(403, "forbidden", http::origin_refused_message(*origin)));
  }
  if (http::is_preflight(head)) return refuse(http::preflight_response(head, cors));
  if (!http::is_public_path(head.method, head.path)) {
    http::AuthVerdict v = http::check_api_key(head, config_.options.api_key);
    if (v != http::AuthVerdict::kOk) {
      http::SimpleResponse r = http::auth_refusal(v);
      r.headers.insert(r.headers.end(), cors.headers.begin(), cors.headers.end());
      return refuse(std::move(r));
    }
  }
  // The body is refused before it is read: a prompt past what the context can hold would cost the
  // server parsing, rendering and tokenizing it only to refuse it.
  if (auto cl = head.header("Content-Length")) {
    const uint64_t n = http::parse_content_length(*cl).value_or(0);  // the parser refused anything else
    if (n > max_request_bytes_) {
      const std::string why =
          config_.options.max_request_bytes
              ? std::string("--max-request-size")
              : str_cat("--max-request-size auto: ", kAutoRequestBytesPerToken, " bytes per token of the ",
                        deps_.plan->maximum_context_tokens, "-token context, at least ", kAutoRequestBytesMin >> 20,
                        "M");
      http::SimpleResponse r = http::error_response(
          413, "request_too_large",
          str_cat("request body of ", n, " bytes exceeds the limit of ", max_request_bytes_, " bytes (", why, ")"));
      r.headers.insert(r.headers.end(), cors.headers.begin(), cors.headers.end());
      return refuse(std::move(r));
    }
  }
  return std::nullopt;
}

void App::handle(const http::Request& request, std::shared_ptr<http::ResponseWriter> writer) {
  body_bytes_.fetch_add(static_cast<int64_t>(request.body.size()));
  const std::string_view host = request.header("Host").value_or(std::string_view());
  http::CorsDecision cors =
      http::check_origin(request.header("Origin"), host, http::OriginPolicy{config_.options.allowed_origins});
  Writer w = std::make_shared<DecoratedWriter>(std::move(writer), std::move(cors.headers), this,
                                               is_messages_path(request.path));
  route(request, w);
}

void App::route(const http::Request& req, const Writer& w) {
  const std::string& p = req.path;
  const std::string& m = req.method;
  const bool get = m == "GET" || m == "HEAD";
  auto wrong_method = [&](const char* allow) {
    http::SimpleResponse r = http::error_response(405, "method_not_allowed",
                                                  str_cat("method ", m, " is not allowed on ", p, " (use ", allow, ")"));
    r.headers.push_back({"Allow", allow});
    w->respond(r.status, std::move(r.headers), std::move(r.body));
  };

  if (p == "/v1/chat/completions") return m == "POST" ? handle_chat(req, w) : wrong_method("POST");
  if (p == "/v1/completions") return m == "POST" ? handle_completion(req, w) : wrong_method("POST");
  if (p == "/v1/responses") return m == "POST" ? handle_responses(req, w) : wrong_method("POST");
  if (p == "/v1/responses/input_tokens") return m == "POST" ? handle_responses_input_tokens(req, w) : wrong_method("POST");
  if (p.rfind("/v1/responses/", 0) == 0) {
    if (p.find('/', 14) != std::string::npos)  // {id}/input_items, {id}/cancel
      return respond_error(*w, 501, "not_implemented",
                           str_cat(m, " ", p, " is not supported (only GET and DELETE of /v1/responses/{id})"));
    if (!get && m != "DELETE") return wrong_method("GET, DELETE");
    auto id = percent_decode(std::string_view(p).substr(14));
    if (!id) return respond_error(*w, 400, "invalid_request_error", "the response id in the path is not valid percent-encoding");
    return handle_stored_response(req, *id, w);
  }
  if (p == "/v1/messages") return m == "POST" ? handle_messages(req, w) : wrong_method("POST");
  if (p == "/v1/messages/count_tokens") return m == "POST" ? handle_count_tokens(req, w) : wrong_method("POST");
  if (p == "/v1/models") return get ? handle_models(w) : wrong_method("GET");
  if (p.rfind("/v1/models/", 0) == 0) {
    if (!get) return wrong_method("GET");
    auto id = percent_decode(std::string_view(p).substr(11));
    if (!id) return respond_error(*w, 400, "invalid_request_error", "the model id in the path is not valid percent-encoding");
    return handle_model(*id, w);
  }
  if (p == "/tokenize") return m == "POST" ? handle_tokenize(req, w) : wrong_method("POST");
  if (p == "/apply-template") return m == "POST" ? handle_apply_template(req, w) : wrong_method("POST");
  if (p == "/health") return get ? respond_json(*w, 200, {{"status", "ok"}}) : wrong_method("GET");
  if (p == "/ready") {
    if (!get) return wrong_method("GET");
    if (ready()) return respond_json(*w, 200, {{"status", "ready"}});
    return w->respond(503, {{"Content-Type", kJson}, {"Retry-After", "1"}}, R"({"status":"unavailable"})");
  }
  if (p == "/status") {
    if (!get) return wrong_method("GET");
    return respond_json(*w, 200, status_json(snapshot()));
  }
  if (p == "/metrics") {
    if (!get) return wrong_method("GET");
    return w->respond(200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}}, metrics_text(snapshot()));
  }
  if (config_.options.webui && http::is_web_page_path(p)) {
    if (!get) return wrong_method("GET");
    if (const Asset* a = find_web_asset(p)) {
      std::vector<http::Header> h = {{"ETag", std::string(a->etag)}, {"Cache-Control", "no-cache"}};
      if (auto inm = req.header("If-None-Match"); inm && etag_matches(*inm, a->etag)) return w->respond(304, h, "");
      h.push_back({"Content-Type", std::string(a->content_type)});
      return w->respond(200, std::move(h), std::string(a->body));
    }
  }
  respond_error(*w, 404, "not_found", str_cat("no route for ", m, " ", p));
}

StatusSnapshot App::snapshot() const {
  StatusSnapshot s;
  s.ready = ready();
  s.instance_id = instance_id_;
  s.pid = static_cast<int64_t>(getpid());
  s.model_id = config_.reported_id();
  s.host = config_.options.host;
  s.port = config_.options.port;
  s.started_at = started_at_;
  s.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  s.http.requests = requests_.load();
  s.http.request_body_bytes = body_bytes_.load();
  s.http.max_request_bytes = static_cast<int64_t>(max_request_bytes_);
  s.http.max_request_auto = !config_.options.max_request_bytes.has_value();
  s.http.responses_2xx = responses_2xx_.load();
  s.http.responses_4xx = responses_4xx_.load();
  s.http.responses_5xx = responses_5xx_.load();
  if (deps_.transport) s.http.connections = deps_.transport->stats();
  s.plan = *deps_.plan;
  s.device_name = "cpu";
  s.os = os_version();
  s.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  if (deps_.engines) {
    s.engine = deps_.engines->engine_status();
    s.weights = deps_.engines->weights_status();
  }
  s.language_only = config_.options.language_only;
  s.disable_ane = config_.options.disable_ane;
  s.decode_share = config_.options.decode_share;
  s.max_image_pixels = config_.options.max_image_pixels;
  if (deps_.awake) s.sleep_inhibitor = deps_.awake->status();
  else s.sleep_inhibitor.enabled = !config_.options.allow_idle_sleep;
  if (deps_.disk) s.disk = deps_.disk->stats();
  return s;
}

// --- models ---------------------------------------------------------------------------------------

bool App::known_model(const std::string& id) const {
  if (id == config_.model_id) return true;
  for (const std::string& a : config_.aliases)
    if (a == id) return true;
  return false;
}

nlohmann::json App::model_entry(const std::string& id) const {
  nlohmann::json e = {
      {"id", id},
      {"object", "model"},
      {"created", 0},
      {"owned_by", "splash"},
      {"max_model_len", deps_.plan->maximum_context_tokens},
      {"context_length", deps_.plan->maximum_context_tokens},
      {"vision", false},
      {"input_modalities", nlohmann::json::array({"text"})},
      // Whether /v1/chat/completions can render a conversation: without a template (a base model,
      // the demo) the chat page continues the user's text through /v1/completions instead.
      {"chat_template", deps_.chat_template != nullptr},
  };
  if (id != config_.model_id) e["root"] = config_.model_id;
  return e;
}

void App::handle_models(const Writer& w) {
  nlohmann::json data = nlohmann::json::array();
  data.push_back(model_entry(config_.model_id));
  for (const std::string& a : config_.aliases) data.push_back(model_entry(a));
  respond_json(*w, 200, {{"object", "list"}, {"data", data}, {"models", data}});
}

void App::handle_model(const std::string& id, const Writer& w) {
  if (!known_model(id))
    return respond_error(*w, 404, "model_not_found", str_cat("model '", id, "' is not served here (serving '",
                                                             config_.reported_id(), "')"));
  respond_json(*w, 200, model_entry(id));
}

// --- tokenize ---------------------------------------------------------------------------------------

void App::handle_tokenize(const http::Request& req, const Writer& w) {
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object())
    return respond_error(*w, 400, "invalid_request_error", "the body is not a JSON object");
  auto content = body.find("content");
  if (content == body.end() || !content->is_string())
    return respond_error(*w, 400, "invalid_request_error", "'content' must be a string");
  bool add_special = false;
  if (auto a = body.find("add_special"); a != body.end()) {
    if (!a->is_boolean()) return respond_error(*w, 400, "invalid_request_error", "'add_special' must be a boolean");
    add_special = a->get<bool>();
  }
  // Not bounded by the context (spec 2.1: token endpoints may exceed it); --max-request-size bounds
  // the text, and each id stands for at least one byte of it (BOS/EOS aside).
  std::vector<int32_t> ids =
      deps_.tokenizer->encode(content->get_ref<const std::string&>(), add_special, /*parse_special=*/true);
  // Written directly: a JSON array value per id would cost 16 bytes each on top of the text.
  std::string out = "{\"tokens\":[";
  out.reserve(out.size() + ids.size() * 7 + 2);
  char buf[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, ids[i]);
    out.append(buf, end);
  }
  out += "]}";
  w->respond(200, {{"Content-Type", kJson}}, std::move(out));
}

}  // namespace splash::app
