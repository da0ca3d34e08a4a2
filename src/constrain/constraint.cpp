#include "constrain/constraint.h"

#include <thread>

#include "constrain/gbnf.h"
#include "constrain/regex.h"

namespace splash::constrain {

namespace {

// The grammar of the whole output: the reasoning block the spec allows, then the constrained part.
Result<Grammar> build(const ConstraintSpec& spec) {
  GrammarBuilder b;
  GrammarBuilder::ExprId body;
  if (spec.kind == ConstraintSpec::Kind::kJsonSchema) {
    const auto schema = nlohmann::ordered_json::parse(spec.text, nullptr, false);
    if (schema.is_discarded()) return make_error("the schema is not valid JSON");
    JsonSchemaOptions o;
    o.whitespace = spec.whitespace;
    auto rule = add_json_schema(schema, b, o);
    if (!rule) return rule.error();
    body = b.ref(*rule);
  } else if (spec.kind == ConstraintSpec::Kind::kRegex) {
    auto re = compile_regex(spec.text, RegexTarget::kRaw, b);
    if (!re) return re.error();
    body = re->expr;
  } else if (spec.kind == ConstraintSpec::Kind::kToolCalls) {
    const auto list = nlohmann::ordered_json::parse(spec.text, nullptr, false);
    if (!list.is_array()) return make_error("the tool list is not a JSON array");
    std::vector<ToolSpec> tools;
    for (const auto& t : list) tools.push_back({t.value("name", ""), t.value("parameters", nlohmann::ordered_json())});
    auto rule = add_tool_calls(tools, spec.tool_format, spec.parallel_calls, b);
    if (!rule) return rule.error();
    body = b.ref(*rule);
    if (spec.calls_after_text) {
      // Its own rule, so its states' masks are shared by every request (mask_cache.h).
      const int32_t text = b.declare_rule("text");
      b.define_rule(text, b.text_without(kToolCallOpener));
      body = b.seq({b.ref(text), b.optional(body)});
    }
  } else {
    auto rule = add_gbnf(spec.text, b);
    if (!rule) return rule.error();
    body = b.ref(*rule);
  }
  ByteSet ws;
  for (char c : std::string_view(" \t\n\r")) ws.add(static_cast<uint8_t>(c));
  auto gap = b.repeat(b.bytes(ws), 0, kMaxFlexibleWhitespace);
  GrammarBuilder::ExprId root_body = body;
  if (spec.reasoning == ConstraintSpec::Reasoning::kInside) {
    root_body = b.seq({b.until(spec.think_close), gap, body});
  } else if (spec.reasoning == ConstraintSpec::Reasoning::kOptional) {
    root_body = b.seq({b.optional(b.seq({b.literal(spec.think_open), b.until(spec.think_close), gap})), body});
  }
  const int32_t root = b.declare_rule("output");
  b.define_rule(root, root_body);
  auto g = b.build(root);
  if (!g && spec.kind == ConstraintSpec::Kind::kGbnf) return make_error("grammar: ", g.error().message);
  return g;
}

std::string key_of(const ConstraintSpec& s) {
  std::string k;
  k += static_cast<char>('0' + static_cast<int>(s.kind));
  k += static_cast<char>('0' + static_cast<int>(s.whitespace));
  k += static_cast<char>('0' + static_cast<int>(s.reasoning));
  k += static_cast<char>('0' + static_cast<int>(s.tool_format));
  k += s.parallel_calls ? 'p' : 's';
  k += s.calls_after_text ? 'a' : 'f';
  k += s.think_open + '\x1f' + s.think_close + '\x1f' + s.text;
  return k;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> ConstraintCompiler::grammar(const ConstraintSpec& spec) {
  const std::string key = key_of(spec);
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  auto built = build(spec);
  if (!built) return built.error();
  auto g = std::make_shared<const Grammar>(std::move(*built));
  std::lock_guard lock(mu_);
  if (index_.count(key) == 0) {
    lru_.emplace_front(key, g);
    index_[key] = lru_.begin();
    if (lru_.size() > kMaxCachedGrammars) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return g;
}

ConstraintCompiler::~ConstraintCompiler() {
  if (warm_.joinable()) warm_.join();
}

void warm_shared_json_states(MaskCache& cache) {
  // Any value (string, number, literals, object, array) and a length-bounded string.
  const auto schema = nlohmann::ordered_json::parse(
      R"({"type":"array","items":{"anyOf":[true,{"type":"string","maxLength":64}]}})");
  auto g = compile_json_schema(schema);
  SPLASH_CHECK(g.ok());
  const Grammar& grammar = **g;
  const Pda pda(grammar);
  for (int32_t s = 0; s < static_cast<int32_t>(grammar.states.size()); ++s) {
    if (grammar.has_edges(s)) cache.get(pda, s);
  }
  for (const Grammar::Counter& k : grammar.counters) {
    // Every state of the character rule (a token may stop inside a character).
    std::vector<int32_t> stack{grammar.rules[k.item].start};
    std::vector<char> seen(grammar.states.size(), 0);
    seen[stack[0]] = 1;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (grammar.has_edges(s)) cache.get_counted(pda, s, k, 1);
      const Grammar::State& st = grammar.states[s];
      for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) {
        if (!seen[grammar.edges[i].to]) {
          seen[grammar.edges[i].to] = 1;
          stack.push_back(grammar.edges[i].to);
        }
      }
    }
  }
}

std::shared_ptr<MaskCache> ConstraintCompiler::mask_cache() {
  std::lock_guard lock(mu_);
  if (!cache_) {
    cache_ = std::make_shared<MaskCache>(std::make_shared<const Vocabulary>(make_vocabulary_()));
    warm_ = std::thread([cache = cache_] { warm_shared_json_states(*cache); });
  }
  return cache_;
}

Result<std::shared_ptr<Matcher>> ConstraintCompiler::matcher(const ConstraintSpec& spec) {
  auto g = grammar(spec);
  if (!g) return g.error();
  auto m = std::make_shared<Matcher>(*g, mask_cache());
  std::lock_guard lock(mu_);
  m->set_timing(timing_);
  return m;
}

void ConstraintCompiler::set_timing(Matcher::Timing t) {
  std::lock_guard lock(mu_);
  timing_ = t;
}

size_t ConstraintCompiler::cached_grammars() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace splash::constrain
