#include "template/chat_template.h"

namespace splash {

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  SPLASH_TRY(JinjaTemplate t, JinjaTemplate::parse(std::move(source)));
  return ChatTemplate(std::move(t));
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context,
                                         const JinjaRenderOptions& options) const {
  if (!context.is_object()) return make_error("chat template context: expected a JSON object");
  if (context.contains("messages") && !context["messages"].is_array()) {
    return make_error("chat template context: 'messages' must be an array");
  }
  return template_.render(context, options);
}

Result<std::string> ChatTemplate::render(const nlohmann::json& context,
                                         const JinjaRenderOptions& options) const {
  return render(nlohmann::ordered_json::parse(context.dump()), options);
}

}  // namespace splash
