#include "template/jinja.h"

#include "template/interpreter.h"
#include "template/parser.h"

namespace splash {

Result<JinjaTemplate> JinjaTemplate::parse(std::string source) {
  JinjaTemplate t;
  try {
    std::vector<jinja::Token> tokens = jinja::tokenize(source);
    t.program_ = std::make_shared<const std::vector<jinja::NodePtr>>(jinja::parse_tokens(tokens));
  } catch (const jinja::TemplateError& e) {
    return make_error("chat template: ", e.what());
  }
  t.source_ = std::make_shared<const std::string>(std::move(source));
  return t;
}

Result<std::string> JinjaTemplate::render(const nlohmann::ordered_json& context,
                                          const JinjaRenderOptions& options) const {
  if (!context.is_object()) return make_error("chat template context: expected a JSON object");
  try {
    auto now = options.now.value_or(std::chrono::system_clock::now());
    jinja::Environment globals;
    jinja::install_globals(globals, now);
    for (auto it = context.begin(); it != context.end(); ++it) {
      // The reference refuses to redefine its globals (true, none, range, ...).
      if (globals.has_own(it.key())) {
        return make_error("chat template context: variable '", it.key(), "' is already a builtin");
      }
      globals.set(it.key(), jinja::from_json(it.value()));
    }
    jinja::Interpreter interpreter(now);
    return interpreter.render(*program_, globals);
  } catch (const jinja::TemplateError& e) {
    return make_error("chat template: ", e.what());
  } catch (const std::bad_alloc&) {
    return make_error("chat template: out of memory while rendering");
  }
}

}  // namespace splash
