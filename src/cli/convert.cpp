// `splash convert IN OUT`: between llama2.c, GGUF and (MLX) safetensors, with a chosen quantization.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "tokenizer/model_tokenizer.h"
#include "convert/convert.h"
#include "core/sizes.h"

namespace splash::cli {

namespace {

struct ConvertArgs {
  std::string in, out, to = "gguf", type = "F32", dtype, tokenizer, name;
  int bits = 0, group_size = 64;
  bool quiet = false;
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

int run_convert(const ConvertArgs& a) {
  ConvertOptions o;
  if (a.to == "gguf") {
    o.target = ConvertTarget::kGguf;
    auto t = dtype_from_name(a.type);
    if (!t) return fail("unknown --type '" + a.type + "' (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
    o.gguf_type = *t;
    if (a.bits != 0) return fail("--bits applies to --to mlx; use --type for GGUF");
  } else if (a.to == "mlx" || a.to == "safetensors") {
    o.target = ConvertTarget::kSafetensors;
    if (a.to == "mlx") {
      if (a.bits == 0) return fail("--to mlx needs --bits (2, 3, 4, 5, 6 or 8)");
      o.mlx = MlxQuantParams{static_cast<uint32_t>(a.group_size), static_cast<uint32_t>(a.bits)};
      o.float_type = DType::kF16;
    } else if (a.bits != 0) {
      return fail("--bits needs --to mlx");
    }
    if (!a.dtype.empty()) {
      auto t = dtype_from_name(a.dtype);
      if (!t || !(*t == DType::kF32 || *t == DType::kF16 || *t == DType::kBF16))
        return fail("--dtype must be F32, F16 or BF16");
      o.float_type = *t;
    }
  } else {
    return fail("--to must be gguf, mlx or safetensors");
  }
  o.model_name = a.name;
  if (!a.quiet) o.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };

  ModelFilesOptions mo;
  mo.tokenizer_path = a.tokenizer;
  auto model = ModelFiles::open(a.in, mo);
  if (!model.ok()) return fail(model.error().message);
  auto tok = load_model_tokenizer(*model);
  if (!tok.ok()) return fail(tok.error().message);
  if (!*tok) std::fprintf(stderr, "warning: %s has no tokenizer; the output will have none\n", a.in.c_str());

  const auto t0 = std::chrono::steady_clock::now();
  auto report = convert_model(*model, tok->get(), a.out, o);
  if (!report.ok()) return fail(report.error().message);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("converted %s -> %s: %llu tensors, %s -> %s in %.1f s\n", a.in.c_str(), a.out.c_str(),
              static_cast<unsigned long long>(report->n_tensors), format_bytes(report->bytes_in).c_str(),
              format_bytes(report->bytes_out).c_str(), secs);
  return 0;
}

}  // namespace

Runner register_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  app.add_option("input", a->in, "Source: .gguf, llama2.c .bin, or safetensors/MLX directory")->required();
  app.add_option("output", a->out, "Destination: .gguf file, or a new directory for safetensors/MLX")->required();
  app.add_option("--to", a->to, "Output format: gguf, mlx or safetensors")->capture_default_str();
  app.add_option("--type", a->type, "GGUF matrix type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K")
      ->capture_default_str();
  app.add_option("--bits", a->bits, "MLX affine quantization bits: 2, 3, 4, 5, 6 or 8");
  app.add_option("--group-size", a->group_size, "MLX quantization group size: 32, 64 or 128")->capture_default_str();
  app.add_option("--dtype", a->dtype, "Safetensors float type for unquantized tensors and MLX scales: F32, F16, BF16");
  app.add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (default: beside the checkpoint)");
  app.add_option("--name", a->name, "general.name of the output (default: the output's file name)");
  app.add_flag("-q,--quiet", a->quiet, "No per-tensor progress");
  return [a] { return run_convert(*a); };
}

}  // namespace splash::cli
