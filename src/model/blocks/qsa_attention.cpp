#include "model/blocks/qsa_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/norm.h"
#include "core/check.h"
#include "model/blocks/block_util.h"

namespace splash {

namespace {

template <class T>
void append(std::vector<T>& v, const T* src, int64_t n) {
  v.insert(v.end(), src, src + n);
}

// Rows of cache.block_keys for the blocks completed by the tokens now in cache.index_keys.
void complete_blocks(const QsaWeights& w, const QsaShape& s, const RopeTable& index_rope, QsaIndexerCache& cache,
                     IsaLevel isa) {
  const int64_t d = s.index_dim;
  std::vector<float> pooled(static_cast<size_t>(d));
  for (int64_t b = static_cast<int64_t>(cache.block_keys.size()) / d; (b + 1) * s.block <= cache.n_tokens; ++b) {
    std::fill(pooled.begin(), pooled.end(), 0.0f);
    for (int64_t t = b * s.block; t < (b + 1) * s.block; ++t)
      for (int64_t j = 0; j < d; ++j)
        pooled[static_cast<size_t>(j)] += cache.index_keys[static_cast<size_t>(t * d + j)];
    for (float& x : pooled) x /= static_cast<float>(s.block);
    rms_norm(pooled.data(), w.index_k_norm.data(), s.eps, pooled.data(), 1, d, isa);
    const int32_t pos = static_cast<int32_t>(b * s.block);
    rope_apply(pooled.data(), 1, 1, &pos, index_rope);
    append(cache.block_keys, pooled.data(), d);
  }
}

}  // namespace

void qsa_index_scores(const QsaShape& s, const float* index_q, int64_t n, const float* block_keys, int64_t nb,
                      float* scores, std::vector<float>& products, ThreadPool& pool) {
  if (n == 0 || nb == 0) return;
  const int64_t ih = s.index_heads;
  auto keys = pack_weights(DType::kF32, block_keys, nb, s.index_dim);  // a view: f32 is never repacked
  SPLASH_CHECK(keys.ok());
  grow(products, n * ih * nb);
  matmul(keys.value(), index_q, products.data(), n * ih, pool);  // [n, ih, nb]
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.index_dim));
  for (int64_t r = 0; r < n; ++r) {
    float* sr = scores + r * nb;
    std::fill(sr, sr + nb, 0.0f);
    for (int64_t h = 0; h < ih; ++h) {
      const float* ph = products.data() + (r * ih + h) * nb;
      for (int64_t b = 0; b < nb; ++b) sr[b] += std::max(ph[b], 0.0f);
    }
    for (int64_t b = 0; b < nb; ++b) sr[b] *= scale;
  }
}

void qsa_select(const QsaShape& s, const float* scores, int64_t p, std::vector<int32_t>& tokens) {
  const int64_t nb = (p + 1) / s.block, k = s.top_blocks;
  tokens.clear();
  if (nb <= k) {  // every complete block is kept: dense
    tokens.resize(static_cast<size_t>(p + 1));
    std::iota(tokens.begin(), tokens.end(), 0);
    return;
  }
  // The block order first, then the chosen blocks (ascending) expanded in place from the back.
  tokens.resize(static_cast<size_t>(nb));
  std::iota(tokens.begin(), tokens.end(), 0);
  const auto better = [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);  // ties: the lower block (docs/FLASH_NEXT.md)
  };
  std::partial_sort(tokens.begin(), tokens.begin() + k, tokens.end(), better);
  std::sort(tokens.begin(), tokens.begin() + k);
  const int64_t tail = p + 1 - nb * s.block;
  tokens.resize(static_cast<size_t>(k * s.block + tail));
  for (int64_t t = 0; t < tail; ++t)
    tokens[static_cast<size_t>(k * s.block + t)] = static_cast<int32_t>(nb * s.block + t);
  for (int64_t i = k - 1; i >= 0; --i) {
    const int32_t b = tokens[static_cast<size_t>(i)];
    for (int64_t j = s.block - 1; j >= 0; --j)
      tokens[static_cast<size_t>(i * s.block + j)] = static_cast<int32_t>(b * s.block + j);
  }
}

void qsa_truncate(const QsaShape& s, QsaIndexerCache& cache, int64_t n_tokens) {
  if (n_tokens >= cache.n_tokens) return;
  cache.n_tokens = n_tokens;
  cache.index_keys.resize(static_cast<size_t>(n_tokens * s.index_dim));
  cache.block_keys.resize(static_cast<size_t>(n_tokens / s.block * s.index_dim));
}

void qsa_attention(const QsaWeights& w, const QsaShape& s, const RopeTable& rope, const RopeTable& index_rope,
                   const QsaKv& kv, QsaIndexerCache& cache, const float* x, int64_t n, float* out, QsaScratch& scratch,
                   ThreadPool& pool, IsaLevel isa) {
  const int64_t H = s.n_head, Hkv = s.n_kv_head, hd = s.head_dim, qd = H * hd, kvd = Hkv * hd;
  const int64_t ih = s.index_heads, id = s.index_dim, iqk_rows = (ih + 1) * id;
  SPLASH_CHECK(H % Hkv == 0 && s.block > 0 && s.top_blocks > 0);
  SPLASH_CHECK(w.q.rows() == 2 * qd && w.k.rows() == kvd && w.v.rows() == kvd && w.o.cols() == qd &&
               w.index_qk.rows() == iqk_rows && w.o.rows() == s.n_embd);
  SPLASH_CHECK(rope.params().head_dim == hd && index_rope.params().head_dim == id);
  SPLASH_CHECK(kv.pool != nullptr && kv.table != nullptr);
  const KvPageGeometry& geo = kv.pool->geometry();
  SPLASH_CHECK(geo.n_kv_head == Hkv && geo.head_dim == hd && kv.table->n_tokens >= cache.n_tokens + n);
  if (n == 0) return;
  const int64_t pos0 = cache.n_tokens;
  std::vector<int32_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(pos0));

  grow(scratch.qg, n * 2 * qd);
  grow(scratch.q, n * qd);
  grow(scratch.gate, n * qd);
  grow(scratch.k, n * kvd);
  grow(scratch.v, n * kvd);
  grow(scratch.iqk, n * iqk_rows);
  grow(scratch.iq, n * ih * id);
  grow(scratch.att, n * qd);

  // Queries and gates.
  matmul(w.q, x, scratch.qg.data(), n, pool);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const float* src = scratch.qg.data() + r * 2 * qd + h * 2 * hd;
      std::memcpy(scratch.q.data() + r * qd + h * hd, src, static_cast<size_t>(hd) * sizeof(float));
      std::memcpy(scratch.gate.data() + r * qd + h * hd, src + hd, static_cast<size_t>(hd) * sizeof(float));
    }
  rms_norm_heads(scratch.q.data(), w.q_norm.data(), s.eps, scratch.q.data(), n, H, hd, isa);
  rope_apply(scratch.q.data(), n, H, positions.data(), rope);

  // Keys and values go to the pages before any query of the chunk reads them.
  matmul(w.k, x, scratch.k.data(), n, pool);
  rms_norm_heads(scratch.k.data(), w.k_norm.data(), s.eps, scratch.k.data(), n, Hkv, hd, isa);
  rope_apply(scratch.k.data(), n, Hkv, positions.data(), rope);
  matmul(w.v, x, scratch.v.data(), n, pool);
  kv.pool->write(*kv.table, kv.layer, pos0, n, scratch.k.data(), scratch.v.data());

  // Indexer: query heads per row, raw keys into the cache, the keys of newly completed blocks.
  matmul(w.index_qk, x, scratch.iqk.data(), n, pool);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = scratch.iqk.data() + r * iqk_rows;
    std::memcpy(scratch.iq.data() + r * ih * id, row, static_cast<size_t>(ih * id) * sizeof(float));
    append(cache.index_keys, row + ih * id, id);
  }
  rms_norm_heads(scratch.iq.data(), w.index_q_norm.data(), s.eps, scratch.iq.data(), n, ih, id, isa);
  rope_apply(scratch.iq.data(), n, ih, positions.data(), index_rope);
  cache.n_tokens += n;
  complete_blocks(w, s, index_rope, cache, isa);

  // Rows at positions <= last_dense see at most top_blocks complete blocks: every token, so the
  // paged kernel runs them. The others attend to their selection, one task per row.
  const PagedKvView view = kv.pool->view(*kv.table, kv.layer);
  const int64_t last_dense = (s.top_blocks + 1) * s.block - 2;
  const int64_t n_dense = std::clamp<int64_t>(last_dense - pos0 + 1, 0, n);
  if (n_dense > 0) {
    AttentionParams ap;
    ap.n_head = static_cast<int>(H);
    ap.n_kv_head = static_cast<int>(Hkv);
    ap.head_dim = static_cast<int>(hd);
    ap.level = isa;
    attention(scratch.q.data(), n_dense, pos0, view, ap, scratch.att.data(), pool, &scratch.dense);
  }
  const int threads = pool.size();
  if (static_cast<int>(scratch.scores.size()) < threads) {
    scratch.scores.resize(static_cast<size_t>(threads));
    scratch.kv_rows.resize(static_cast<size_t>(threads));
  }
  // Sparse rows in groups whose block scores ([rows, blocks]) stay within kScoreFloats.
  constexpr int64_t kScoreFloats = int64_t{1} << 20;
  const int64_t nb_max = static_cast<int64_t>(cache.block_keys.size()) / id;
  const int64_t group = std::max<int64_t>(1, kScoreFloats / (ih * std::max<int64_t>(nb_max, 1)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t g0 = n_dense; g0 < n; g0 += group) {
    const int64_t gn = std::min(group, n - g0);
    grow(scratch.block_scores, gn * nb_max);
    qsa_index_scores(s, scratch.iq.data() + g0 * ih * id, gn, cache.block_keys.data(), nb_max,
                     scratch.block_scores.data(), scratch.index_products, pool);
    // The selections first, then one task per (row, KV head, slice of its query heads), so that a
    // decode step spreads over the pool too.
    if (static_cast<int64_t>(scratch.row_tokens.size()) < gn) scratch.row_tokens.resize(static_cast<size_t>(gn));
    pool.parallel_for(gn, [&](int64_t task, int) {
      qsa_select(s, scratch.block_scores.data() + task * nb_max, pos0 + g0 + task,
                 scratch.row_tokens[static_cast<size_t>(task)]);
    });
    const int64_t per_kv = H / Hkv;
    const int64_t slices = std::clamp<int64_t>((threads + gn * Hkv - 1) / (gn * Hkv), 1, per_kv);
    const int64_t per_slice = (per_kv + slices - 1) / slices;
    pool.parallel_for(gn * Hkv * slices, [&](int64_t task, int thread) {
      const int64_t row = task / (Hkv * slices), kvh = task / slices % Hkv, slice = task % slices;
      const int64_t h0 = kvh * per_kv + slice * per_slice, h1 = std::min(h0 + per_slice, (kvh + 1) * per_kv);
      if (h0 >= h1) return;
      const int64_t r = g0 + row;
      const std::vector<int32_t>& sel = scratch.row_tokens[static_cast<size_t>(row)];
      std::vector<float>& sc = scratch.scores[static_cast<size_t>(thread)];
      std::vector<float>& rows = scratch.kv_rows[static_cast<size_t>(thread)];
      const int64_t m = static_cast<int64_t>(sel.size());
      grow(sc, m);
      grow(rows, 2 * m * hd);
      float* ks = rows.data();
      float* vs = rows.data() + m * hd;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t p = sel[static_cast<size_t>(i)];
        const int slot = static_cast<int>(p % kKvPageTokens);
        kv_load_row(geo, view.k_block(p / kKvPageTokens), static_cast<int>(kvh), slot, ks + i * hd);
        kv_load_row(geo, view.v_block(p / kKvPageTokens), static_cast<int>(kvh), slot, vs + i * hd);
      }
      for (int64_t h = h0; h < h1; ++h) {
        const float* qh = scratch.q.data() + r * qd + h * hd;
        float mx = -INFINITY;
        for (int64_t i = 0; i < m; ++i) {
          float dot = 0.0f;
          for (int64_t j = 0; j < hd; ++j) dot += qh[j] * ks[i * hd + j];
          sc[static_cast<size_t>(i)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        float sum = 0.0f;
        for (int64_t i = 0; i < m; ++i) {
          sc[static_cast<size_t>(i)] = std::exp(sc[static_cast<size_t>(i)] - mx);
          sum += sc[static_cast<size_t>(i)];
        }
        float* oh = scratch.att.data() + r * qd + h * hd;
        std::fill(oh, oh + hd, 0.0f);
        for (int64_t i = 0; i < m; ++i) {
          const float pr = sc[static_cast<size_t>(i)] / sum;
          for (int64_t j = 0; j < hd; ++j) oh[j] += pr * vs[i * hd + j];
        }
      }
    });
  }
  for (int64_t i = 0; i < n * qd; ++i)
    scratch.att[static_cast<size_t>(i)] *= 1.0f / (1.0f + std::exp(-scratch.gate[static_cast<size_t>(i)]));
  matmul(w.o, scratch.att.data(), out, n, pool);
}

}  // namespace splash
