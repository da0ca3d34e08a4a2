#include "formats/llama2c.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/byte_reader.h"
#include "formats/tensor_names.h"

namespace splash {

namespace {

constexpr uint64_t kHeaderBytes = 7 * 4;
// Largest dimension we accept from a header: keeps every size product far from overflow.
constexpr int32_t kMaxDim = 1 << 20;

Status validate_header(const Llama2cHeader& h, const std::string& src) {
  auto positive = [&](const char* name, int32_t v) -> Status {
    if (v <= 0 || v > kMaxDim)
      return make_error(src, ": header field ", name, " = ", v, " is out of range (1..", kMaxDim,
                        "); not a llama2.c checkpoint?");
    return {};
  };
  SPLASH_TRY_STATUS(positive("dim", h.dim));
  SPLASH_TRY_STATUS(positive("hidden_dim", h.hidden_dim));
  SPLASH_TRY_STATUS(positive("n_layers", h.n_layers));
  SPLASH_TRY_STATUS(positive("n_heads", h.n_heads));
  SPLASH_TRY_STATUS(positive("n_kv_heads", h.n_kv_heads));
  SPLASH_TRY_STATUS(positive("seq_len", h.seq_len));
  if (h.vocab_size == 0 || h.vocab_size < -kMaxDim || h.vocab_size > kMaxDim)
    return make_error(src, ": header field vocab_size = ", h.vocab_size, " is out of range");
  if (h.dim % h.n_heads != 0)
    return make_error(src, ": dim ", h.dim, " is not a multiple of n_heads ", h.n_heads);
  if (h.n_kv_heads > h.n_heads || h.n_heads % h.n_kv_heads != 0)
    return make_error(src, ": n_kv_heads ", h.n_kv_heads, " does not divide n_heads ", h.n_heads);
  if ((h.dim / h.n_heads) % 2 != 0)
    return make_error(src, ": head size ", h.dim / h.n_heads, " is odd (RoPE needs pairs)");
  return {};
}

}  // namespace

Result<Llama2cModel> Llama2cModel::open(const std::string& path) {
  SPLASH_TRY(auto file, MappedFile::open(path));
  ByteReader r(file.bytes(), path);
  Llama2cHeader h;
  SPLASH_TRY(h.dim, r.read<int32_t>("header dim"));
  SPLASH_TRY(h.hidden_dim, r.read<int32_t>("header hidden_dim"));
  SPLASH_TRY(h.n_layers, r.read<int32_t>("header n_layers"));
  SPLASH_TRY(h.n_heads, r.read<int32_t>("header n_heads"));
  SPLASH_TRY(h.n_kv_heads, r.read<int32_t>("header n_kv_heads"));
  SPLASH_TRY(h.vocab_size, r.read<int32_t>("header vocab_size"));
  SPLASH_TRY(h.seq_len, r.read<int32_t>("header seq_len"));
  SPLASH_TRY_STATUS(validate_header(h, path));

  const bool shared = h.vocab_size > 0;
  const uint64_t dim = static_cast<uint64_t>(h.dim);
  const uint64_t hidden = static_cast<uint64_t>(h.hidden_dim);
  const uint64_t n_layer = static_cast<uint64_t>(h.n_layers);
  const uint64_t vocab = static_cast<uint64_t>(shared ? h.vocab_size : -static_cast<int64_t>(h.vocab_size));
  const uint64_t head_size = dim / static_cast<uint64_t>(h.n_heads);
  const uint64_t kv_dim = head_size * static_cast<uint64_t>(h.n_kv_heads);
  const uint64_t seq = static_cast<uint64_t>(h.seq_len);

  // Every dimension is <= 2^20, so these products stay below 2^62.
  struct Block {
    const char* what;
    std::vector<uint64_t> shape;  // per layer when layered
    bool layered;
    const char* hf;               // name pattern: "%" = layer index; nullptr = skipped
  };
  std::vector<Block> blocks = {
      {"token_embedding", {vocab, dim}, false, "model.embed_tokens.weight"},
      {"rms_att", {dim}, true, "model.layers.%.input_layernorm.weight"},
      {"wq", {dim, dim}, true, "model.layers.%.self_attn.q_proj.weight"},
      {"wk", {kv_dim, dim}, true, "model.layers.%.self_attn.k_proj.weight"},
      {"wv", {kv_dim, dim}, true, "model.layers.%.self_attn.v_proj.weight"},
      {"wo", {dim, dim}, true, "model.layers.%.self_attn.o_proj.weight"},
      {"rms_ffn", {dim}, true, "model.layers.%.post_attention_layernorm.weight"},
      {"w1", {hidden, dim}, true, "model.layers.%.mlp.gate_proj.weight"},
      {"w2", {dim, hidden}, true, "model.layers.%.mlp.down_proj.weight"},
      {"w3", {hidden, dim}, true, "model.layers.%.mlp.up_proj.weight"},
      {"rms_final", {dim}, false, "model.norm.weight"},
      {"freq_cis_real", {seq, head_size / 2}, false, nullptr},
      {"freq_cis_imag", {seq, head_size / 2}, false, nullptr},
  };
  if (!shared) blocks.push_back({"wcls", {vocab, dim}, false, "lm_head.weight"});

  uint64_t total_floats = 0;
  for (const auto& b : blocks) {
    uint64_t n = 1;
    for (uint64_t d : b.shape) n *= d;
    total_floats += b.layered ? n * n_layer : n;
  }
  const uint64_t expected = kHeaderBytes + total_floats * 4;
  if (file.size() != expected)
    return make_error(path, ": file is ", file.size(), " bytes but the header (dim ", h.dim, ", hidden ", h.hidden_dim,
                      ", layers ", h.n_layers, ", heads ", h.n_heads, "/", h.n_kv_heads, ", vocab ", h.vocab_size,
                      ", seq_len ", h.seq_len, ") implies ", expected, file.size() < expected ? " (truncated)" : "");

  Llama2cModel m;
  // The header is 28 bytes into a page-aligned mapping, so the floats are 4-byte aligned.
  const float* p = reinterpret_cast<const float*>(file.data() + kHeaderBytes);
  for (const auto& b : blocks) {
    uint64_t n = 1;
    for (uint64_t d : b.shape) n *= d;
    uint64_t reps = b.layered ? n_layer : 1;
    for (uint64_t il = 0; il < reps; ++il) {
      if (b.hf != nullptr) {
        std::string name = b.hf;
        if (auto at = name.find('%'); at != std::string::npos) name = str_cat(name.substr(0, at), il, name.substr(at + 1));
        m.tensors_.push_back({std::move(name), b.shape, {p, static_cast<size_t>(n)}});
      }
      p += n;
    }
  }
  m.header_ = h;
  m.file_ = std::move(file);
  for (size_t i = 0; i < m.tensors_.size(); ++i) m.by_name_.emplace(m.tensors_[i].name, i);

  ModelConfig& c = m.config_;
  c.architecture = "llama";
  c.n_vocab = static_cast<uint32_t>(vocab);
  c.n_embd = static_cast<uint32_t>(dim);
  c.n_layer = static_cast<uint32_t>(n_layer);
  c.n_head = static_cast<uint32_t>(h.n_heads);
  c.n_head_kv = static_cast<uint32_t>(h.n_kv_heads);
  c.head_dim = static_cast<uint32_t>(head_size);
  c.n_ff = static_cast<uint32_t>(hidden);
  c.max_position = static_cast<uint32_t>(seq);
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.tie_embeddings = shared;
  // llama2.c's SentencePiece vocabulary: <unk> 0, <s> 1, </s> 2.
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return m;
}

const Llama2cTensor* Llama2cModel::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> llama2c_qk_to_rotate_half(const Llama2cTensor& t, uint32_t n_head) {
  SPLASH_CHECK(t.shape.size() == 2 && n_head > 0 && t.shape[0] % n_head == 0);
  std::vector<float> out(t.data.begin(), t.data.end());
  permute_rope_rows(out.data(), t.shape[1] * sizeof(float), static_cast<int>(n_head),
                    static_cast<int>(t.shape[0] / n_head), /*to_interleaved=*/false);
  return out;
}

Result<Llama2cVocab> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, const std::string& source,
                                             uint32_t n_vocab) {
  ByteReader r(bytes, source);
  Llama2cVocab v;
  SPLASH_TRY(int32_t max_len, r.read<int32_t>("max_token_length"));
  if (max_len <= 0 || max_len > (1 << 16))
    return make_error(source, ": max_token_length ", max_len, " is out of range; not a llama2.c tokenizer?");
  v.max_token_length = static_cast<uint32_t>(max_len);
  for (uint32_t i = 0; n_vocab == 0 ? r.remaining() > 0 : i < n_vocab; ++i) {
    SPLASH_TRY(float score, r.read<float>("token score"));
    SPLASH_TRY(int32_t len, r.read<int32_t>("token length"));
    if (!std::isfinite(score)) return make_error(source, ": token ", i, " has a non-finite score");
    if (len < 0 || len > max_len)
      return make_error(source, ": token ", i, " has length ", len, " (max_token_length ", max_len, ")");
    SPLASH_TRY(auto piece, r.read_string(static_cast<uint64_t>(len), "token bytes"));
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
  }
  if (r.remaining() != 0)
    return make_error(source, ": ", r.remaining(), " bytes left after ", n_vocab, " tokens (vocabulary size mismatch?)");
  if (v.pieces.empty()) return make_error(source, ": no tokens");
  return v;
}

Result<Llama2cVocab> load_llama2c_tokenizer(const std::string& path, uint32_t n_vocab) {
  SPLASH_TRY(auto file, MappedFile::open(path));
  return parse_llama2c_tokenizer(file.bytes(), path, n_vocab);
}

std::vector<std::string> llama2c_sentencepiece_pieces(const Llama2cVocab& vocab) {
  std::vector<std::string> out;
  out.reserve(vocab.pieces.size());
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    const std::string& p = vocab.pieces[i];
    if (i == 1 && p == "\n<s>\n") {
      out.emplace_back("<s>");
      continue;
    }
    if (i == 2 && p == "\n</s>\n") {
      out.emplace_back("</s>");
      continue;
    }
    if (i >= 3 && i < 259) {
      unsigned byte = static_cast<unsigned>(i - 3);
      std::string latin1_utf8 = byte < 0x80 ? std::string(1, static_cast<char>(byte))
                                            : std::string{static_cast<char>(0xC0 | (byte >> 6)),
                                                          static_cast<char>(0x80 | (byte & 0x3F))};
      if (p == latin1_utf8) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "<0x%02X>", byte);
        out.emplace_back(buf);
        continue;
      }
    }
    std::string s;
    for (char ch : p) {
      if (ch == ' ') {
        s += "\xE2\x96\x81";
      } else {
        s += ch;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace splash
