#include "testmodel/gguf_mix.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <optional>

namespace splash::testmodel {
namespace {

enum class Role : uint8_t { kOutput, kTokenEmbd, kAttnV, kAttnK, kAttnOutput, kFfnDown, kOther };

// llama.cpp's categories, matched on name fragments as it does: attn_qkv and attn_kv_b count as
// attn_v ("more sensitive to quantization"); ffn_down covers ffn_down_exps and ffn_down_shexp.
Role role_of(const std::string& name) {
  if (name == "output.weight") return Role::kOutput;
  if (name == "token_embd.weight") return Role::kTokenEmbd;
  const auto has = [&name](const char* s) { return name.find(s) != std::string::npos; };
  if (has("attn_qkv.weight") || has("attn_kv_b.weight") || has("attn_v.weight")) return Role::kAttnV;
  if (has("attn_k.weight")) return Role::kAttnK;
  if (has("attn_output.weight")) return Role::kAttnOutput;
  if (has("ffn_down")) return Role::kFfnDown;
  return Role::kOther;
}

// "blk.12.ffn_down.weight" -> 12; nullopt for tensors outside the blocks.
std::optional<int> block_of(const std::string& name) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  int il = 0;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  const auto [p, ec] = std::from_chars(first, last, il);
  if (ec != std::errc() || p == last || *p != '.') return std::nullopt;
  return il;
}

// llama.cpp's choice of the layers that get more bits: the first and last eighth, and every third
// layer in between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

DType gguf_mix_base_type(GgufMix mix) {
  switch (mix) {
    case GgufMix::kQ4_K_M: return DType::kQ4_K;
    case GgufMix::kQ5_K_M: return DType::kQ5_K;
    case GgufMix::kPure: break;
  }
  SPLASH_CHECK_MSG(false, "gguf_mix_base_type: a pure spec has no mix");
  return DType::kF32;
}

uint32_t gguf_mix_file_type(GgufMix mix) {
  switch (mix) {
    case GgufMix::kQ4_K_M: return 15;
    case GgufMix::kQ5_K_M: return 17;
    case GgufMix::kPure: break;
  }
  SPLASH_CHECK_MSG(false, "gguf_mix_file_type: a pure spec has no mix");
  return 0;
}

Result<std::vector<DType>> gguf_mix_types(GgufMix mix, std::span<const MixMatrix> matrices, uint32_t n_block,
                                          uint32_t n_expert) {
  const DType base = gguf_mix_base_type(mix);
  const char* mix_name = mix == GgufMix::kQ4_K_M ? "Q4_K_M" : "Q5_K_M";
  // llama-quantize walks the tensors by block number (-1 outside the blocks), then by name; its
  // attn_v and dense ffn_down counters advance in that order.
  std::vector<size_t> order(matrices.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<int> block(matrices.size());
  for (size_t i = 0; i < matrices.size(); ++i) block[i] = block_of(matrices[i].name).value_or(-1);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (block[a] != block[b]) return block[a] < block[b];
    return matrices[a].name < matrices[b].name;
  });

  bool tied = true;
  int n_attn_v = 0;
  for (const MixMatrix& m : matrices) {
    const Role r = role_of(m.name);
    if (r == Role::kOutput) tied = false;
    if (r == Role::kAttnV) ++n_attn_v;
  }
  const int n_layer = static_cast<int>(n_block);
  int i_attn_v = 0, i_ffn_down = 0;
  std::vector<DType> types(matrices.size(), base);
  for (size_t i : order) {
    const MixMatrix& m = matrices[i];
    DType& t = types[i];
    switch (role_of(m.name)) {
      case Role::kOutput:
        t = m.cols % 256 == 0 ? DType::kQ6_K : DType::kQ8_0;
        break;
      case Role::kTokenEmbd:
        if (tied) t = m.cols % 256 == 0 ? DType::kQ6_K : DType::kQ8_0;
        break;
      case Role::kAttnV:
        if (use_more_bits(i_attn_v, n_attn_v)) t = DType::kQ6_K;
        if (n_expert == 8) t = DType::kQ8_0;
        ++i_attn_v;
        break;
      case Role::kAttnK:
        if (n_expert == 8) t = DType::kQ8_0;
        break;
      case Role::kAttnOutput:
        if (n_expert == 8 && mix == GgufMix::kQ4_K_M) t = DType::kQ5_K;
        break;
      case Role::kFfnDown: {
        // MoE files: the block number of the name (experts need not come in layer order).
        int il = i_ffn_down;
        if (n_expert > 1) {
          if (block[i] < 0 || block[i] >= n_layer)
            return make_error("test model: ", mix_name, ": no block number in [0, ", n_layer, ") in '", m.name, "'");
          il = block[i];
        }
        if (use_more_bits(il, n_layer)) t = DType::kQ6_K;
        ++i_ffn_down;
        break;
      }
      case Role::kOther:
        break;
    }
    const uint32_t block_elems = dtype_traits(t).block_elems;
    if (m.cols % block_elems != 0)
      return make_error("test model: ", mix_name, ": '", m.name, "' has rows of ", m.cols, " values, not a multiple of ",
                        block_elems, " for ", dtype_name(t),
                        "; llama-quantize falls back to Q5_0 / Q5_1 / Q8_0 there, which the generator does not do");
  }
  return types;
}

}  // namespace splash::testmodel
