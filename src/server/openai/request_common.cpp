#include "server/openai/request_common.h"

#include "core/result.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

ApiResult<SamplingFields> parse_sampling(const FieldReader& r) {
  SamplingFields s;
  SPLASH_OAI_TRY(auto temperature, r.number_in("temperature", 0.0, 2.0));
  if (temperature) {
    // Below 0.01 the softmax overflows float precision; 0 itself means greedy (spec 2.4).
    s.temperature = (*temperature > 0.0 && *temperature < 0.01) ? 0.01f : static_cast<float>(*temperature);
  }
  SPLASH_OAI_TRY(auto top_p, r.number_in("top_p", 0.0, 1.0));
  if (top_p) s.top_p = static_cast<float>(*top_p);
  SPLASH_OAI_TRY(auto top_k, r.integer("top_k"));
  if (top_k) {
    if (*top_k < -1) return invalid_request(str_cat(r.name("top_k"), " must be >= -1 (0 or -1 turn it off), got ", *top_k));
    if (*top_k > INT32_MAX) return invalid_request(str_cat(r.name("top_k"), " is too large"));
    s.top_k = *top_k == -1 ? 0 : static_cast<int32_t>(*top_k);
  }
  SPLASH_OAI_TRY(auto min_p, r.number_in("min_p", 0.0, 1.0));
  if (min_p) s.min_p = static_cast<float>(*min_p);
  SPLASH_OAI_TRY(auto presence, r.number_in("presence_penalty", -2.0, 2.0));
  if (presence) s.presence_penalty = static_cast<float>(*presence);
  SPLASH_OAI_TRY(auto frequency, r.number_in("frequency_penalty", -2.0, 2.0));
  if (frequency) s.frequency_penalty = static_cast<float>(*frequency);
  SPLASH_OAI_TRY(auto repetition, r.number("repetition_penalty"));
  if (repetition) {
    if (!(*repetition > 0.0) || *repetition > 1e6) {
      return invalid_request(str_cat(r.name("repetition_penalty"), " must be > 0 (1 turns it off), got ", *repetition));
    }
    s.repetition_penalty = static_cast<float>(*repetition);
  }
  SPLASH_OAI_TRY(auto seed, r.unsigned_integer("seed"));
  s.seed = seed;
  return s;
}

ApiResult<std::vector<std::string>> parse_stop(const FieldReader& r) {
  std::vector<std::string> stop;
  const ojson* v = r.get("stop");
  if (v == nullptr) return stop;
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) stop.push_back(v->get<std::string>());
    return stop;
  }
  if (!v->is_array()) return invalid_request(str_cat(r.name("stop"), " must be a string or an array of strings"));
  if (v->size() > 4) return invalid_request(str_cat(r.name("stop"), " may hold at most 4 strings, got ", v->size()));
  for (std::size_t i = 0; i < v->size(); ++i) {
    const ojson& s = (*v)[i];
    if (!s.is_string()) return invalid_request(str_cat("'", index_path(r.path("stop"), i), "' must be a string"));
    // An empty stop string would end every request at once: it is dropped, as OpenAI does.
    if (!s.get_ref<const std::string&>().empty()) stop.push_back(s.get<std::string>());
  }
  return stop;
}

}  // namespace

SamplingParams to_sampling_params(const SamplingFields& f) {
  SamplingParams p;
  p.temperature = f.temperature;
  p.top_p = f.top_p;
  p.top_k = f.top_k;
  p.min_p = f.min_p;
  p.presence_penalty = f.presence_penalty;
  p.frequency_penalty = f.frequency_penalty;
  p.repetition_penalty = f.repetition_penalty;
  p.seed = f.seed;
  return p;
}

ApiResult<CommonFields> parse_common_fields(const FieldReader& r) {
  CommonFields c;
  SPLASH_OAI_TRY(c.model, r.string("model"));
  SPLASH_OAI_TRY(auto stream, r.boolean("stream"));
  c.stream = stream.value_or(false);
  if (const ojson* so = r.get("stream_options")) {
    if (!so->is_object()) return invalid_request(str_cat(r.name("stream_options"), " must be an object"));
    FieldReader sor(*so, r.path("stream_options"));
    SPLASH_OAI_TRY(auto include_usage, sor.boolean("include_usage"));
    c.include_usage = include_usage.value_or(false);
  }
  SPLASH_OAI_TRY(auto progress, r.boolean("return_progress"));
  c.return_progress = progress.value_or(false);
  SPLASH_OAI_TRY(c.timeout_s, r.number("timeout"));
  if (c.timeout_s && !(*c.timeout_s > 0.0)) {
    return invalid_request(str_cat(r.name("timeout"), " must be a number of seconds > 0, got ", *c.timeout_s));
  }
  if (c.timeout_s && *c.timeout_s >= kNoDeadlineTimeout) c.timeout_s.reset();
  SPLASH_OAI_TRY(c.stop, parse_stop(r));
  SPLASH_OAI_TRY(auto ignore_eos, r.boolean("ignore_eos"));
  c.ignore_eos = ignore_eos.value_or(false);
  SPLASH_OAI_TRY(auto cache_prompt, r.boolean("cache_prompt"));
  c.cache_prompt = cache_prompt.value_or(true);
  SPLASH_OAI_TRY(auto priority, r.string("priority"));
  if (priority) {
    if (*priority != "foreground" && *priority != "normal" && *priority != "background") {
      return invalid_request(str_cat(r.name("priority"), " must be one of foreground, normal, background"));
    }
    c.priority = *priority;
  }
  SPLASH_OAI_TRY(c.sampling, parse_sampling(r));
  SPLASH_OAI_TRY(c.constraint, parse_output_constraint(r));

  SPLASH_OAI_TRY(auto n, r.integer("n"));
  if (n && *n != 1) return invalid_request(str_cat(r.name("n"), " must be 1: this server returns one choice per request"));
  if (const ojson* bias = r.get("logit_bias")) {
    if (!bias->is_object()) return invalid_request(str_cat(r.name("logit_bias"), " must be an object"));
    if (!bias->empty()) return invalid_request(str_cat(r.name("logit_bias"), " is not supported"));
  }
  // Belt and braces: the sampler's own range checks must agree with the ones above.
  Status valid = to_sampling_params(c.sampling).validate();
  if (!valid.ok()) return invalid_request(valid.error_message());
  return c;
}

ApiResult<ToolChoice> parse_tool_choice_string(const std::string& s, const std::vector<Tool>& tools,
                                               std::string_view object_hint) {
  ToolChoice choice;
  if (s == "auto") return choice;
  if (s == "none") {
    choice.mode = ToolChoice::Mode::kNone;
    return choice;
  }
  if (s == "required") {
    if (tools.empty()) return invalid_request("'tool_choice' \"required\" needs 'tools'");
    choice.mode = ToolChoice::Mode::kRequired;
    return choice;
  }
  return invalid_request(str_cat("'tool_choice' must be \"auto\", \"none\", \"required\" or ", object_hint));
}

}  // namespace splash::openai
