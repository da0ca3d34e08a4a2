// /v1/completions body -> CompletionRequest (spec 2.1: one string or token-id array, max_tokens
// default 16, no template, tools or images).
#include "core/result.h"
#include "server/openai/json_input.h"
#include "server/openai/request_common.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

ApiResult<std::vector<int32_t>> parse_token_ids(const ojson& v, const std::string& path) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const ojson& t = v[i];
    // Token ids are checked against the vocabulary by the caller, which knows its size.
    bool ok = t.is_number_integer() && (t.is_number_unsigned() ? t.get<uint64_t>() <= INT32_MAX
                                                                 : t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX);
    if (!ok) return invalid_request(str_cat("'", index_path(path, i), "' must be a token id (an integer >= 0)"));
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

ApiResult<std::variant<std::string, std::vector<int32_t>>> parse_prompt(const FieldReader& r) {
  using Prompt = std::variant<std::string, std::vector<int32_t>>;
  const ojson* v = r.get("prompt");
  if (v == nullptr) return invalid_request("'prompt' is required");
  if (v->is_string()) return Prompt(v->get<std::string>());
  if (!v->is_array()) return invalid_request("'prompt' must be a string or an array of token ids");
  if (v->empty()) return invalid_request("'prompt' must not be empty");
  const ojson& first = (*v)[0];
  // A batch ([string, ...] or [[ids], ...]) of one is one prompt; more would need n > 1 choices.
  if (first.is_string() || first.is_array()) {
    if (v->size() != 1) return invalid_request("'prompt' holds several prompts; send one per request");
    if (first.is_string()) return Prompt(first.get<std::string>());
    if (first.empty()) return invalid_request("'prompt[0]' must not be empty");
    SPLASH_OAI_TRY(auto ids, parse_token_ids(first, "prompt[0]"));
    return Prompt(std::move(ids));
  }
  SPLASH_OAI_TRY(auto ids, parse_token_ids(*v, "prompt"));
  return Prompt(std::move(ids));
}

}  // namespace

ApiResult<CompletionRequest> parse_completion_request(const nlohmann::ordered_json& body) {
  if (!body.is_object()) return invalid_request("request body must be a JSON object");
  FieldReader r(body, "");
  CompletionRequest req;
  SPLASH_OAI_TRY(req.common, parse_common_fields(r));
  SPLASH_OAI_TRY(req.prompt, parse_prompt(r));
  SPLASH_OAI_TRY(auto echo, r.boolean("echo"));
  req.echo = echo.value_or(false);
  SPLASH_OAI_TRY(auto max_tokens, r.integer("max_tokens"));
  if (max_tokens) {
    if (*max_tokens < 0 || (*max_tokens == 0 && !req.echo))
      return invalid_request("'max_tokens' must be greater than 0 (0 only with 'echo': true)");
    req.max_tokens = *max_tokens;
  }
  // Completions' logprobs is the number of alternatives per token (OpenAI allows up to 5).
  SPLASH_OAI_TRY(auto logprobs, r.integer("logprobs"));
  if (logprobs) {
    if (*logprobs < 0 || *logprobs > 5) return invalid_request("'logprobs' must be an integer from 0 to 5");
    req.common.logprobs = static_cast<int>(*logprobs);
  }
  SPLASH_OAI_TRY(auto best_of, r.integer("best_of"));
  if (best_of && *best_of != 1) return invalid_request("'best_of' must be 1");
  SPLASH_OAI_TRY(auto suffix, r.string("suffix"));
  if (suffix && !suffix->empty()) return invalid_request("'suffix' is not supported");
  return req;
}

ApiResult<CompletionRequest> parse_completion_request(std::string_view body) {
  SPLASH_OAI_TRY(auto json, parse_json(body));
  return parse_completion_request(json);
}

}  // namespace splash::openai
