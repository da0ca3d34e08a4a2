// `splash inspect FILE|DIR`: what a model file holds, without running it.
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "tokenizer/model_tokenizer.h"
#include "core/sizes.h"

namespace splash::cli {

namespace {

struct InspectArgs {
  std::string path;
  std::string tokenizer;
  bool json = false;
  bool tensors = true;
};

std::string shape_str(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string type_str(const ModelTensor& t) {
  if (t.mlx) return str_cat("mlx", t.mlx->bits, "g", t.mlx->group_size);
  return std::string(dtype_name(t.dtype));
}

int run_inspect(const InspectArgs& a) {
  ModelFilesOptions opts;
  opts.tokenizer_path = a.tokenizer;
  auto model = ModelFiles::open(a.path, opts);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.error().message.c_str());
    return 1;
  }
  const ModelConfig& c = model->config();
  auto tok = load_model_tokenizer(*model);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.error().message.c_str());
    return 1;
  }
  const Tokenizer* tokenizer = tok->get();

  std::map<std::string, std::pair<int, uint64_t>> by_type;  // type -> (count, bytes)
  uint64_t total_bytes = 0, total_params = 0;
  for (const auto& t : model->tensors()) {
    auto& e = by_type[type_str(t)];
    e.first++;
    e.second += t.n_bytes();
    total_bytes += t.n_bytes();
    total_params += t.n_elems();
  }
  const std::string& tmpl = model->tokenizer().chat_template.empty() && tokenizer ? tokenizer->chat_template()
                                                                                 : model->tokenizer().chat_template;

  if (a.json) {
    nlohmann::json j;
    j["path"] = a.path;
    j["format"] = model_format_name(model->format());
    j["architecture"] = c.architecture;
    j["config"] = {{"n_vocab", c.n_vocab},   {"n_embd", c.n_embd},         {"n_layer", c.n_layer},
                   {"n_head", c.n_head},     {"n_head_kv", c.n_head_kv},   {"head_dim", c.head_dim},
                   {"n_ff", c.n_ff},         {"max_position", c.max_position}, {"rope_theta", c.rope_theta},
                   {"rms_eps", c.rms_eps},   {"tie_embeddings", c.tie_embeddings}, {"qk_norm", c.qk_norm},
                   {"attention_bias", c.attention_bias}, {"n_expert", c.n_expert}};
    j["parameters"] = total_params;
    j["bytes"] = total_bytes;
    for (const auto& [type, e] : by_type) j["quantization"][type] = {{"tensors", e.first}, {"bytes", e.second}};
    j["tokenizer"] = {{"kind", model->tokenizer().kind},
                      {"n_vocab", tokenizer ? tokenizer->n_vocab() : 0},
                      {"bos_id", tokenizer ? tokenizer->bos_id() : -1},
                      {"eos_id", tokenizer ? tokenizer->eos_id() : -1}};
    j["chat_template"] = !tmpl.empty();
    if (a.tensors) {
      j["tensors"] = nlohmann::json::array();
      for (const auto& t : model->tensors())
        j["tensors"].push_back({{"name", t.name}, {"stored_name", t.stored_name}, {"type", type_str(t)},
                                {"shape", t.shape}, {"bytes", t.n_bytes()}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }

  std::printf("model:        %s (%s)\n", a.path.c_str(), std::string(model_format_name(model->format())).c_str());
  std::printf("architecture: %s\n", c.architecture.c_str());
  std::printf("  layers %u · hidden %u · heads %u (kv %u) · head_dim %u · ffn %u · vocab %u · context %u\n",
              c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab, c.max_position);
  std::printf("  rope theta %g · rms eps %g · tied embeddings %s · q/k norm %s · attention bias %s\n", c.rope_theta,
              c.rms_eps, c.tie_embeddings ? "yes" : "no", c.qk_norm ? "yes" : "no", c.attention_bias ? "yes" : "no");
  if (c.n_expert > 0)
    std::printf("  experts %u (top %u) · expert ffn %u · shared expert ffn %u\n", c.n_expert, c.n_expert_used,
                c.n_ff_expert, c.n_ff_shared_expert);
  if (!c.layer_kinds.empty()) {
    int linear = 0;
    for (auto k : c.layer_kinds) linear += k == LayerKind::kLinearAttention;
    std::printf("  hybrid: %d linear-attention + %d full-attention layers\n", linear,
                static_cast<int>(c.layer_kinds.size()) - linear);
  }
  std::printf("parameters:   %.2f M in %zu tensors, %s\n", static_cast<double>(total_params) / 1e6,
              model->tensors().size(), format_bytes(total_bytes).c_str());
  std::printf("quantization:");
  for (const auto& [type, e] : by_type) std::printf(" %s (%d tensors, %s)", type.c_str(), e.first, format_bytes(e.second).c_str());
  std::printf("\n");
  if (tokenizer)
    std::printf("tokenizer:    %s, %d tokens, bos %d, eos %d\n", model->tokenizer().kind.c_str(), tokenizer->n_vocab(),
                tokenizer->bos_id(), tokenizer->eos_id());
  else
    std::printf("tokenizer:    none\n");
  if (tmpl.empty()) std::printf("chat template: none\n");
  else std::printf("chat template: present (%zu bytes)\n", tmpl.size());
  if (a.tensors) {
    std::printf("tensors:\n");
    for (const auto& t : model->tensors())
      std::printf("  %-48s %-8s %-16s %s\n", t.name.c_str(), type_str(t).c_str(), shape_str(t.shape).c_str(),
                  format_bytes(t.n_bytes()).c_str());
  }
  return 0;
}

}  // namespace

Runner register_inspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  app.add_option("model", a->path, "Model: .gguf file, llama2.c .bin checkpoint, or safetensors/MLX directory")->required();
  app.add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (default: beside the checkpoint)");
  app.add_flag("--json", a->json, "Print JSON instead of text");
  app.add_flag("!--no-tensors", a->tensors, "Leave out the tensor list");
  return [a] { return run_inspect(*a); };
}

}  // namespace splash::cli
