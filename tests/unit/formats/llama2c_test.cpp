#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "formats/llama2c.h"

namespace splash {
namespace {

namespace fs = std::filesystem;

std::string demo_path(const char* file) {
  const char* home = std::getenv("HOME");
  return str_cat(home ? home : "", "/.cache/splash/demo/", file);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

class TmpFile {
 public:
  explicit TmpFile(const char* tag) : path_(fs::temp_directory_path() / str_cat("splash_l2c_", getpid(), "_", tag)) {}
  ~TmpFile() { fs::remove(path_); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// A tiny llama2.c file built from the format description: header, then every float equals its
// index in the float section, so a view's first element tells where it starts.
std::vector<uint8_t> tiny_model(int32_t vocab_field, int extra_floats = 0) {
  const int32_t dim = 8, hidden = 12, layers = 2, heads = 2, kv = 1, seq = 4;
  const int32_t hdr[7] = {dim, hidden, layers, heads, kv, vocab_field, seq};
  const int64_t vocab = std::abs(vocab_field), kv_dim = dim * kv / heads, hs = dim / heads;
  int64_t n = vocab * dim + layers * (dim + dim * dim + 2 * kv_dim * dim + dim * dim + dim + 3 * hidden * dim) + dim +
              2 * seq * hs / 2 + (vocab_field < 0 ? vocab * dim : 0) + extra_floats;
  std::vector<uint8_t> b(28 + static_cast<size_t>(n) * 4);
  std::memcpy(b.data(), hdr, 28);
  for (int64_t i = 0; i < n; ++i) {
    float f = static_cast<float>(i);
    std::memcpy(b.data() + 28 + i * 4, &f, 4);
  }
  return b;
}

TEST(Llama2c, TinyModelLayoutAndNames) {
  TmpFile f("tiny");
  write_bytes(f.str(), tiny_model(-10));
  auto m = Llama2cModel::open(f.str());
  ASSERT_TRUE(m.ok()) << m.error_message();
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_vocab, 10u);
  EXPECT_EQ(c.n_head_kv, 1u);
  EXPECT_EQ(c.head_dim, 4u);
  EXPECT_EQ(c.max_position, 4u);
  EXPECT_FALSE(c.tie_embeddings);
  // Offsets (in floats) per the llama2.c order: emb 80; rms_att 2*8; wq 2*64; wk 2*32; wv 2*32;
  // wo 2*64; rms_ffn 2*8; w1 2*96; w2 2*96; w3 2*96; rms_final 8; freqs 2*8; wcls 80.
  auto first = [&](const char* name) {
    const Llama2cTensor* t = m->find(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->data[0] : -1.0f;
  };
  EXPECT_EQ(first("model.embed_tokens.weight"), 0.0f);
  EXPECT_EQ(first("model.layers.0.input_layernorm.weight"), 80.0f);
  EXPECT_EQ(first("model.layers.1.input_layernorm.weight"), 88.0f);
  EXPECT_EQ(first("model.layers.0.self_attn.q_proj.weight"), 96.0f);
  EXPECT_EQ(first("model.layers.1.self_attn.q_proj.weight"), 160.0f);
  EXPECT_EQ(first("model.layers.0.self_attn.k_proj.weight"), 224.0f);
  EXPECT_EQ(first("model.layers.1.self_attn.k_proj.weight"), 256.0f);
  EXPECT_EQ(first("model.layers.0.self_attn.v_proj.weight"), 288.0f);
  EXPECT_EQ(first("model.layers.0.self_attn.o_proj.weight"), 352.0f);
  EXPECT_EQ(first("model.layers.0.post_attention_layernorm.weight"), 480.0f);
  EXPECT_EQ(first("model.layers.0.mlp.gate_proj.weight"), 496.0f);
  EXPECT_EQ(first("model.layers.0.mlp.down_proj.weight"), 688.0f);
  EXPECT_EQ(first("model.layers.1.mlp.up_proj.weight"), 880.0f + 96.0f);
  EXPECT_EQ(first("model.norm.weight"), 1072.0f);
  EXPECT_EQ(first("lm_head.weight"), 1072.0f + 8.0f + 16.0f);
  EXPECT_EQ(m->find("model.layers.0.self_attn.k_proj.weight")->shape, (std::vector<uint64_t>{4, 8}));
  EXPECT_EQ(m->find("model.layers.0.mlp.down_proj.weight")->shape, (std::vector<uint64_t>{8, 12}));
  EXPECT_EQ(m->tensors().size(), 1u + 2u * 9u + 1u + 1u);

  // Shared classifier: no lm_head, tie_embeddings.
  TmpFile g("tiny_shared");
  write_bytes(g.str(), tiny_model(10));
  auto s = Llama2cModel::open(g.str());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(s->config().tie_embeddings);
  EXPECT_EQ(s->find("lm_head.weight"), nullptr);
}

TEST(Llama2c, RejectsWrongSizesAndGarbage) {
  TmpFile f("bad");
  auto good = tiny_model(-10);
  auto truncated = good;
  truncated.resize(truncated.size() - 4);
  write_bytes(f.str(), truncated);
  auto r = Llama2cModel::open(f.str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("truncated"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find(f.str()), std::string::npos);

  write_bytes(f.str(), tiny_model(-10, 1));  // one float too many
  r = Llama2cModel::open(f.str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("implies"), std::string::npos);

  write_bytes(f.str(), {1, 2, 3, 4, 5});
  r = Llama2cModel::open(f.str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("truncated while reading header"), std::string::npos) << r.error_message();

  auto garbage = [&](int field, int32_t value) {
    auto b = good;
    std::memcpy(b.data() + field * 4, &value, 4);
    write_bytes(f.str(), b);
    auto res = Llama2cModel::open(f.str());
    return res.ok() ? std::string("<ok>") : res.error_message();
  };
  EXPECT_NE(garbage(0, -5).find("dim = -5"), std::string::npos);
  EXPECT_NE(garbage(3, 0).find("n_heads = 0"), std::string::npos);
  EXPECT_NE(garbage(3, 3).find("not a multiple of n_heads"), std::string::npos);
  EXPECT_NE(garbage(4, 3).find("does not divide"), std::string::npos);
  EXPECT_NE(garbage(5, 0).find("vocab_size = 0"), std::string::npos);
  EXPECT_NE(garbage(1, 0x7fffffff).find("out of range"), std::string::npos);
  EXPECT_NE(garbage(6, 5).find("implies"), std::string::npos);  // plausible header, wrong size
}

TEST(Llama2c, Stories15M) {
  auto m = Llama2cModel::open(demo_path("stories15M.bin"));
  ASSERT_TRUE(m.ok()) << m.error_message();
  const Llama2cHeader& h = m->header();
  EXPECT_EQ(h.dim, 288);
  EXPECT_EQ(h.hidden_dim, 768);
  EXPECT_EQ(h.n_layers, 6);
  EXPECT_EQ(h.n_heads, 6);
  EXPECT_EQ(h.n_kv_heads, 6);
  EXPECT_EQ(h.vocab_size, 32000);
  EXPECT_EQ(h.seq_len, 256);
  const ModelConfig& c = m->config();
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.max_position, 256u);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(m->find("lm_head.weight"), nullptr);
  // Reference values read with numpy (np.fromfile, offset 28) following the llama2.c layout.
  const Llama2cTensor* emb = m->find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<uint64_t>{32000, 288}));
  EXPECT_FLOAT_EQ(emb->data[288 + 0], -0.0170963853597641f);
  EXPECT_FLOAT_EQ(emb->data[288 + 2], 0.006738288328051567f);
  auto sum = [](std::span<const float> v) {
    double s = 0;
    for (float x : v) s += x;
    return s;
  };
  EXPECT_NEAR(sum(m->find("model.norm.weight")->data), 2043.5524580478668, 1e-6);
  const Llama2cTensor* wk3 = m->find("model.layers.3.self_attn.k_proj.weight");
  EXPECT_NEAR(sum(wk3->data), 16.003298551865328, 1e-6);
  EXPECT_FLOAT_EQ(wk3->data[5 * 288 + 7], -0.04445715248584747f);
  const Llama2cTensor* w2 = m->find("model.layers.5.mlp.down_proj.weight");
  EXPECT_EQ(w2->shape, (std::vector<uint64_t>{288, 768}));
  EXPECT_FLOAT_EQ(w2->data.back(), 0.026298290118575096f);
  EXPECT_NEAR(sum(w2->data), -2.134288722409046, 1e-6);
  EXPECT_FLOAT_EQ(m->find("model.layers.0.input_layernorm.weight")->data[0], 0.7982943654060364f);
  EXPECT_FLOAT_EQ(m->find("model.layers.2.post_attention_layernorm.weight")->data[10], 1.1470593214035034f);
}

// The q view is in llama2.c's interleaved RoPE layout: rotating adjacent pairs of W x must equal
// rotating (i, i + half) pairs of W' x, W' = llama2c_qk_to_rotate_half(W), with rows matched up.
TEST(Llama2c, RotateHalfPermutationMatchesRope) {
  auto m = Llama2cModel::open(demo_path("stories15M.bin"));
  ASSERT_TRUE(m.ok()) << m.error_message();
  const Llama2cTensor* wq = m->find("model.layers.0.self_attn.q_proj.weight");
  const Llama2cTensor* emb = m->find("model.embed_tokens.weight");
  const int dim = 288, n_head = 6, hd = 48, half = 24, pos = 7;
  std::vector<float> wrh = llama2c_qk_to_rotate_half(*wq, n_head);
  std::span<const float> x = emb->data.subspan(450 * 288, 288);
  auto matvec = [&](const float* w, std::vector<double>& out) {
    out.assign(dim, 0.0);
    for (int r = 0; r < dim; ++r)
      for (int k = 0; k < dim; ++k) out[r] += static_cast<double>(w[r * dim + k]) * x[k];
  };
  std::vector<double> qi, qr;
  matvec(wq->data.data(), qi);
  matvec(wrh.data(), qr);
  double max_abs = 0;
  for (int h = 0; h < n_head; ++h) {
    for (int i = 0; i < half; ++i) {
      double theta = pos * std::pow(10000.0, -2.0 * i / hd);
      double c = std::cos(theta), s = std::sin(theta);
      // llama2.c: pairs (2i, 2i+1).
      double a0 = qi[h * hd + 2 * i], a1 = qi[h * hd + 2 * i + 1];
      double i0 = a0 * c - a1 * s, i1 = a0 * s + a1 * c;
      // HF rotate-half: pairs (i, i+half).
      double b0 = qr[h * hd + i], b1 = qr[h * hd + i + half];
      double r0 = b0 * c - b1 * s, r1 = b0 * s + b1 * c;
      EXPECT_NEAR(i0, r0, 1e-9);
      EXPECT_NEAR(i1, r1, 1e-9);
      max_abs = std::max(max_abs, std::fabs(i0));
    }
  }
  EXPECT_GT(max_abs, 0.1);  // the projections are not trivially zero
  // And the permutation is not the identity.
  EXPECT_NE(wrh[1 * dim], wq->data[1 * dim]);
}

TEST(Llama2cTokenizer, Stories15MVocabulary) {
  auto v = load_llama2c_tokenizer(demo_path("tokenizer.bin"), 32000);
  ASSERT_TRUE(v.ok()) << v.error_message();
  EXPECT_EQ(v->max_token_length, 27u);
  ASSERT_EQ(v->pieces.size(), 32000u);
  // As stored by llama2.c's exporter (checked with a separate Python reader).
  EXPECT_EQ(v->pieces[0], "<unk>");
  EXPECT_EQ(v->pieces[1], "\n<s>\n");
  EXPECT_EQ(v->pieces[2], "\n</s>\n");
  EXPECT_EQ(v->pieces[3], std::string(1, '\0'));
  EXPECT_EQ(v->pieces[258], "\xC3\xBF");
  EXPECT_EQ(v->pieces[259], "  ");
  EXPECT_EQ(v->pieces[1000], "ied");
  EXPECT_FLOAT_EQ(v->scores[1000], -741.0f);
  EXPECT_FLOAT_EQ(v->scores[259], -1e9f);
  EXPECT_FLOAT_EQ(v->scores[31999], -31740.0f);

  auto spm = llama2c_sentencepiece_pieces(*v);
  EXPECT_EQ(spm[1], "<s>");
  EXPECT_EQ(spm[2], "</s>");
  EXPECT_EQ(spm[3], "<0x00>");
  EXPECT_EQ(spm[3 + 0x0A], "<0x0A>");
  EXPECT_EQ(spm[258], "<0xFF>");
  EXPECT_EQ(spm[259], "\xE2\x96\x81\xE2\x96\x81");
  EXPECT_EQ(spm[1000], "ied");

  // Reading to the end of the file finds the same 32000; a wrong count is an error.
  auto all = load_llama2c_tokenizer(demo_path("tokenizer.bin"), 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->pieces.size(), 32000u);
  EXPECT_FALSE(load_llama2c_tokenizer(demo_path("tokenizer.bin"), 31999).ok());
  EXPECT_FALSE(load_llama2c_tokenizer(demo_path("tokenizer.bin"), 32001).ok());
}

TEST(Llama2cTokenizer, RejectsCorruptFiles) {
  auto make = [](int32_t max_len, std::vector<std::pair<float, std::string>> toks, int32_t len_override = -2) {
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &max_len, 4);
    for (auto& [s, p] : toks) {
      int32_t len = len_override == -2 ? static_cast<int32_t>(p.size()) : len_override;
      size_t o = b.size();
      b.resize(o + 8 + p.size());
      std::memcpy(b.data() + o, &s, 4);
      std::memcpy(b.data() + o + 4, &len, 4);
      std::memcpy(b.data() + o + 8, p.data(), p.size());
    }
    return b;
  };
  auto ok = make(4, {{0.0f, "ab"}, {-1.0f, "abcd"}});
  auto v = parse_llama2c_tokenizer(ok, "t.bin", 2);
  ASSERT_TRUE(v.ok()) << v.error_message();
  EXPECT_EQ(v->pieces[1], "abcd");
  EXPECT_NE(parse_llama2c_tokenizer(make(2, {{0.0f, "abc"}}), "t.bin", 1).error_message().find("length 3"),
            std::string::npos);
  EXPECT_NE(parse_llama2c_tokenizer(make(4, {{0.0f, "ab"}}, -1), "t.bin", 1).error_message().find("length -1"),
            std::string::npos);
  EXPECT_NE(parse_llama2c_tokenizer(make(4, {{NAN, "ab"}}), "t.bin", 1).error_message().find("non-finite"),
            std::string::npos);
  EXPECT_NE(parse_llama2c_tokenizer(make(-3, {}), "t.bin", 0).error_message().find("max_token_length"),
            std::string::npos);
  auto cut = ok;
  cut.resize(cut.size() - 2);
  auto e = parse_llama2c_tokenizer(cut, "t.bin", 2);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error_message().find("t.bin: truncated"), std::string::npos);
  EXPECT_FALSE(parse_llama2c_tokenizer(cut, "t.bin", 0).ok());
}

}  // namespace
}  // namespace splash
