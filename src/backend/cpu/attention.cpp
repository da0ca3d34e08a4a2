// The attention driver: work decomposition, the per-tile sequence of kernel calls and the split-K
// combine. The inner loops (tile loads, scores, softmax step, weighted sums) are per ISA in
// attention_scalar.cpp and attention_simd_impl.h.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/attention_kernels.h"

namespace splash {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Split-K (see attention()): pages per split, and the most query rows a split call may have.
constexpr int64_t kSplitPages = 16;
constexpr int64_t kSplitMaxRows = 32;
// Prefill tier (calls of more than kSplitMaxRows query tokens, where the ISA has it): rows per query
// tile, so each converted K/V page serves twice the rows of the 32-row tiles.
constexpr int kPrefillRows = 64;
// ... and only from this context on: below it attention is a small part of the forward pass, and the
// row-major kernels give each row the bits a one-row (decode) call gives it.
constexpr int64_t kPrefillMinContext = 256;

int64_t round_up16(int64_t n) { return (n + 15) / 16 * 16; }

// Head h's n int8 per-token scales of a page block copied to scale[0, n), with 1 past n
// (softmax_tile reads all 32; a slot past n may hold any bits).
void head_scales(const KvPageGeometry& geo, const uint8_t* block, int64_t h, int n, float* scale) {
  std::memcpy(scale, block + geo.scales_offset(h), static_cast<size_t>(n) * 4);
  std::fill(scale + n, scale + kKvPageTokens, 1.0f);
}
const int8_t* as_i8(const uint8_t* p) { return reinterpret_cast<const int8_t*>(p); }
const uint16_t* as_b16(const uint8_t* p) { return reinterpret_cast<const uint16_t*>(p); }

// Asks for one KV head's keys and values of a page (and their int8 scales) ahead of use. A decode
// step reads each page once, from memory: without this every tile load waited on DRAM latency
// (load_tile was 7.5% of a Qwen3-0.6B decode step at 128 tokens of context, for ~2% of its bytes).
void prefetch_head(const PagedKvView& kv, int64_t page, int64_t kvh) {
  const int64_t bytes = kv.geo.head_bytes();
  for (const uint8_t* block : {kv.k_block(page), kv.v_block(page)}) {
    const uint8_t* head = block + kvh * bytes;
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(head + off, 0, 3);
    if (kv.geo.format == KvFormat::kInt8)
      __builtin_prefetch(block + kv.geo.scales_offset(kvh), 0, 3);
  }
}

const cpu::AttentionKernels& pick_kernels(IsaLevel requested, int hd) {
  IsaLevel l = clamp_isa_level(requested);
  if (l >= IsaLevel::kAvx512 && hd % 16 == 0) return cpu::attention_kernels_avx512();
  if (l >= IsaLevel::kAvx2 && hd % 8 == 0) return cpu::attention_kernels_avx2();
  return cpu::attention_kernels_scalar();
}

// Everything one work item needs; slices of AttentionScratch::per_thread, one set per pool thread.
struct Tiles {
  float* q;       // [rows, hd] scaled queries
  float* acc;     // [rows, hd]
  float* k;       // [32, hd] key codes as f32
  float* v;       // [32, hd] value codes as f32
  float* s;       // [rows, 32] scores, then probabilities
  float* m;       // [rows] running max
  float* l;       // [rows] running sum
  float* alpha;   // [rows] rescale of acc for the current tile
  float* kscale;  // [32]
  float* vscale;  // [32]
  int32_t* valid; // [rows] keys of the current tile each row sees (prefill tier: position + 1)
};

}  // namespace

void attention(const float* q, int64_t n_q, int64_t q_pos0, const PagedKvView& kv, const AttentionParams& p,
               float* out, ThreadPool& pool, AttentionScratch* scratch) {
  if (n_q <= 0) return;
  SPLASH_CHECK(p.n_kv_head > 0 && p.n_head % p.n_kv_head == 0);
  SPLASH_CHECK(p.n_kv_head == kv.geo.n_kv_head && p.head_dim == kv.geo.head_dim);
  SPLASH_CHECK(q_pos0 >= 0 && q_pos0 + n_q <= kv.n_tokens);
  const int hd = p.head_dim;
  const int g = p.n_head / p.n_kv_head;
  const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const cpu::AttentionKernels& K = pick_kernels(p.level, hd);

  // A query tile holds bq tokens x the g heads of one KV group: ~32 rows share every key tile (~64 in
  // the prefill tier). Calls of <= 32 tokens (decode, verify blocks) always take the row-major path.
  const bool transposed = n_q > kSplitMaxRows && q_pos0 + n_q >= kPrefillMinContext &&
                          q_pos0 + n_q < (int64_t{1} << 31) && K.scores_t != nullptr && g <= kPrefillRows;
  // Row-major tier on int8 / bf16 KV: scores and sums read the page's codes in place where the ISA
  // can (the scales stay 1 for bf16).
  const bool int8 = kv.geo.format == KvFormat::kInt8;
  const bool in_place = int8 ? K.scores_i8 != nullptr && K.accumulate_i8 != nullptr
                             : kv.geo.format == KvFormat::kBF16 && K.scores_bf16kv != nullptr &&
                                   K.accumulate_bf16kv != nullptr;
  const bool bf16 = transposed && p.prefill_bf16 && K.scores_bf16 != nullptr && cpu_features().avx512bf16 &&
                    kv.geo.format != KvFormat::kF32;
  const int bq = transposed ? kPrefillRows / g : std::max(1, 32 / g);
  const int rows_max = bq * g;
  // The transposed tiles are padded to whole vectors of 16 rows.
  const int rows_cap = transposed ? static_cast<int>(round_up16(rows_max)) : rows_max;
  const int64_t n_qt = (n_q + bq - 1) / bq;
  const int64_t base_tasks = n_qt * p.n_kv_head;
  const int threads = pool.size();
  const int64_t pages_all = (q_pos0 + n_q + kKvPageTokens - 1) / kKvPageTokens;
  // Split-K for calls with few query rows (decode, speculative verify blocks) when the KV heads alone
  // cannot keep the threads busy. Split s covers the fixed pages [s, s + 1) x kSplitPages, whatever the
  // other rows of the call: a row's pages then meet the same kernels in the same order, and pages
  // past its own position are exact no-ops (masked: alpha 1, nothing added; a split with none of its
  // keys is skipped in the combine, and one split combines to acc x 1 / l, the unsplit result). So a
  // verify block's rows equal, bit for bit, what decoding them one at a time gives, and greedy
  // speculative decoding stays token-for-token plain decoding (a pages-per-thread split made a
  // stories15M Q8_0 DFlash run leave plain greedy after ~100 tokens on a near-tie).
  // Every call of <= kSplitMaxRows rows splits (a row with <= kSplitPages pages has one split, which is
  // the unsplit result): the rule must not depend on anything a decode step and a verify block of the
  // same positions could differ in.
  int64_t n_split = 1;
  if (n_q <= kSplitMaxRows) n_split = std::max<int64_t>(1, (pages_all + kSplitPages - 1) / kSplitPages);
  // Decode (one query token): a task takes a group of KV heads over its pages, heads inner, so each
  // page's keys and values are read as one contiguous run of the group's heads (a page block holds
  // every head of a layer back to back) instead of one head's 4 KiB per page, 1.9 MB apart (Qwen3-
  // 0.6B). The groups are as large as still gives every thread two tasks. Per (row, head) the
  // pages, their order, the kernels and the split combine are the general path's: bit-identical.
  int64_t hpt = 1;
  if (n_q == 1 && !transposed) {
    const int64_t cap = std::min<int64_t>(p.n_kv_head, rows_max / g);
    for (int64_t h = cap; h >= 1; --h)
      if (p.n_kv_head % h == 0 && n_split * (p.n_kv_head / h) >= 2 * threads) {
        hpt = h;
        break;
      }
  }
  const int64_t n_hg = p.n_kv_head / hpt;
  const int64_t n_tasks = n_qt * n_hg * n_split;

  AttentionScratch local;
  AttentionScratch& ws = scratch != nullptr ? *scratch : local;
  const int64_t tile = round_up16(int64_t{kKvPageTokens} * hd);
  const int64_t per_thread = round_up16(int64_t{rows_cap} * hd) * 2 + tile * 2 +
                             round_up16(int64_t{rows_cap} * kKvPageTokens) + round_up16(rows_cap) * 3 + 32 * 2;
  if (static_cast<int64_t>(ws.per_thread.size()) < per_thread * threads)
    ws.per_thread.resize(static_cast<size_t>(per_thread * threads));
  if (static_cast<int64_t>(ws.valid.size()) < int64_t{rows_cap} * threads)
    ws.valid.resize(static_cast<size_t>(rows_cap * threads));
  const int64_t page_elems = int64_t{kKvPageTokens} * hd;
  // K and V as bf16 for every page of the call, per thread (AttentionScratch::bf16_pages_budget).
  const bool bf16_keep = bf16 && pages_all * page_elems * 4 * threads <= ws.bf16_pages_budget;
  const int64_t bf16_pages = bf16_keep ? pages_all : 1;
  const int64_t per_thread_bf16 = int64_t{rows_cap} * hd + 2 * bf16_pages * page_elems;
  if (bf16) {
    if (static_cast<int64_t>(ws.bf16.size()) < per_thread_bf16 * threads)
      ws.bf16.resize(static_cast<size_t>(per_thread_bf16 * threads));
    if (static_cast<int64_t>(ws.bf16_scales.size()) < 2 * bf16_pages * kKvPageTokens * threads)
      ws.bf16_scales.resize(static_cast<size_t>(2 * bf16_pages * kKvPageTokens * threads));
    ws.bf16_held.assign(static_cast<size_t>(2 * threads), -1);  // the pages change between calls
  }
  // Split-K partials: per task, acc [rows, hd], m [rows], l [rows].
  const int64_t part_stride = int64_t{rows_max} * (hd + 2);
  if (n_split > 1 && static_cast<int64_t>(ws.parts.size()) < base_tasks * n_split * part_stride)
    ws.parts.resize(static_cast<size_t>(base_tasks * n_split * part_stride));
  float* const parts = ws.parts.data();

  auto tiles = [&](int thread) {
    float* b = ws.per_thread.data() + per_thread * thread;
    Tiles t;
    auto take = [&](int64_t n) {
      float* r = b;
      b += n;
      return r;
    };
    t.q = take(round_up16(int64_t{rows_cap} * hd));
    t.acc = take(round_up16(int64_t{rows_cap} * hd));
    t.k = take(tile);
    t.v = take(tile);
    t.s = take(round_up16(int64_t{rows_cap} * kKvPageTokens));
    t.m = take(round_up16(rows_cap));
    t.l = take(round_up16(rows_cap));
    t.alpha = take(round_up16(rows_cap));
    t.kscale = take(32);
    t.vscale = take(32);
    t.valid = ws.valid.data() + int64_t{rows_cap} * thread;
    return t;
  };

  pool.parallel_for(n_tasks, [&](int64_t task, int thread) {
    // Longest query tiles (last in the sequence, most keys) first, so the tail of the job is short.
    const int64_t split = task % n_split;
    // The task's first KV head (of hpt; hpt = 1 in the transposed tier). bf16_keep: KV head by KV
    // head (a thread's next tile reads the pages it has converted).
    const int64_t kvh = bf16_keep ? task / n_qt : (task / n_split) % n_hg * hpt;
    const int64_t qt = n_qt - 1 - (bf16_keep ? task % n_qt : task / (n_split * n_hg));
    const int64_t t0 = qt * bq;
    const int nt = static_cast<int>(std::min<int64_t>(bq, n_q - t0));
    const int rows = nt * g;
    Tiles tl = tiles(thread);
    const int64_t kv_end = q_pos0 + t0 + nt;  // keys the last row of the tile sees
    const int64_t np = (kv_end + kKvPageTokens - 1) / kKvPageTokens;

    if (transposed) {
      // n_split is 1 here (n_q > kSplitMaxRows), so page 0 comes first and every row's max is finite
      // from then on. Padding rows: zero queries.
      const int rp = static_cast<int>(round_up16(rows));
      const int64_t token_stride = int64_t{p.n_head} * hd;
      const int64_t first_row = (t0 * p.n_head + kvh * g) * hd;
      uint16_t* qb = bf16 ? ws.bf16.data() + per_thread_bf16 * thread : nullptr;  // words [hd / 2, rp]
      K.load_q_t(q + first_row, token_stride, g, rows, rp, hd, scale, tl.q, qb);
      for (int r = 0; r < rp; ++r) {
        tl.m[r] = kNegInf;
        tl.l[r] = 0.0f;
        // A padding row sees what the last row sees (so key 0 of page 0: its max is finite).
        tl.valid[r] = static_cast<int32_t>(q_pos0 + t0 + std::min(r, rows - 1) / g + 1);
      }
      std::fill(tl.acc, tl.acc + int64_t{rp} * hd, 0.0f);
      if (bf16) {
        uint16_t* kc = qb + int64_t{rows_cap} * hd;   // [bf16_pages, 32, hd]
        uint16_t* vc = kc + bf16_pages * page_elems;  // [bf16_pages] words [16, hd]
        float* ksc = ws.bf16_scales.data() + 2 * bf16_pages * kKvPageTokens * thread;  // [bf16_pages, 32]
        float* vsc = ksc + bf16_pages * kKvPageTokens;
        int64_t* held = ws.bf16_held.data() + 2 * thread;  // pages of head held[0], keys [0, held[1])
        if (held[0] != kvh) {
          held[0] = bf16_keep ? kvh : -1;
          held[1] = 0;
        }
        for (int64_t pg = 0; pg < np; ++pg) {
          const int64_t kbase = pg * kKvPageTokens;
          const int nk = static_cast<int>(std::min<int64_t>(kKvPageTokens, kv_end - kbase));
          const int64_t slot = bf16_keep ? pg : 0;
          uint16_t* kb = kc + slot * page_elems;
          uint16_t* vb = vc + slot * page_elems;
          float* ks = ksc + slot * kKvPageTokens;
          float* vs = vsc + slot * kKvPageTokens;
          // Held keys past this tile's end are real keys the masks drop, so a page converted for a
          // longer tile serves a shorter one.
          if (kbase + nk > held[1]) {
            K.load_tile_bf16(kv.geo, kv.k_block(pg), static_cast<int>(kvh), nk, false, kb, ks);
            K.load_tile_bf16(kv.geo, kv.v_block(pg), static_cast<int>(kvh), nk, true, vb, vs);
            if (bf16_keep) held[1] = kbase + nk;
          }
          K.scores_bf16(qb, rp, kb, nk, hd, tl.s);
          K.softmax_t(tl.s, rp, nk, tl.valid, static_cast<int32_t>(kbase), ks, vs, tl.m, tl.l, tl.alpha);
          K.accumulate_bf16(tl.acc, rp, tl.s, tl.alpha, vb, nk, hd);
        }
      }
      for (int64_t pg = 0; pg < (bf16 ? 0 : np); ++pg) {
        const int64_t kbase = pg * kKvPageTokens;
        const int nk = static_cast<int>(std::min<int64_t>(kKvPageTokens, kv_end - kbase));
        K.load_tile(kv.geo, kv.k_block(pg), static_cast<int>(kvh), nk, tl.k, tl.kscale);
        K.load_tile(kv.geo, kv.v_block(pg), static_cast<int>(kvh), nk, tl.v, tl.vscale);
        const int n4 = (nk + 3) & ~3;  // load_tile zeroed the rows up to n4; the score blocks read to 32
        if (n4 < kKvPageTokens) std::fill(tl.k + int64_t{n4} * hd, tl.k + int64_t{kKvPageTokens} * hd, 0.0f);
        K.scores_t(tl.q, rp, tl.k, nk, hd, tl.s);
        K.softmax_t(tl.s, rp, nk, tl.valid, static_cast<int32_t>(kbase), tl.kscale, tl.vscale, tl.m, tl.l, tl.alpha);
        K.accumulate_t(tl.acc, rp, tl.s, tl.alpha, tl.v, nk, hd);
      }
      K.store_out_t(tl.acc, rp, tl.l, rows, hd, g, token_stride, out + first_row);
      return;
    }

    // Row-major tier: the KV heads [kvh, kvh + hpt) of this task, each with its `rows` rows at
    // j * rows of the tiles (hpt > 1 only for decode, where rows = g).
    for (int64_t j = 0; j < hpt; ++j) {
      const int64_t h = kvh + j;
      for (int r = 0; r < rows; ++r) {
        const int64_t rr = j * rows + r;
        const float* src = q + ((t0 + r / g) * p.n_head + h * g + r % g) * hd;
        for (int d = 0; d < hd; ++d) tl.q[rr * hd + d] = src[d] * scale;
        tl.m[rr] = kNegInf;
        tl.l[rr] = 0.0f;
      }
    }
    std::fill(tl.acc, tl.acc + hpt * rows * hd, 0.0f);

    const int64_t pg0 = std::min(np, split * kSplitPages);
    const int64_t pg1 = n_split == 1 ? np : std::min(np, pg0 + kSplitPages);
    // Loaded tiles (f32 KV, the scalar tier): whole heads prefetched three ahead, spread over the page
    // (a burst of the group's 1,000+ lines at the page start held the core's miss buffers until it
    // had arrived, then computed). In place (int8, bf16): the kernels prefetch the next head a few
    // lines per step while they compute this one (bench_attention decode/int8 at 3,000 tokens:
    // 14-18 -> 25-33 GB/s; two or three heads ahead measured lower).
    constexpr int64_t kAheadHeads = 3;
    constexpr int64_t kPfHeads = 1;
    auto prefetch_at = [&](int64_t idx) {  // idx: (page - pg0) * hpt + head in group
      const int64_t pg = pg0 + idx / hpt;
      if (pg < pg1) prefetch_head(kv, pg, kvh + idx % hpt);
    };
    auto softmax_step = [&](int64_t j, int nk, int64_t kbase) {
      for (int r = 0; r < rows; ++r) {
        const int64_t qpos = q_pos0 + t0 + r / g;
        tl.valid[r] = static_cast<int32_t>(std::clamp<int64_t>(qpos - kbase + 1, 0, nk));
      }
      K.softmax_tile(tl.s, rows, tl.valid, tl.kscale, tl.vscale, tl.m + j * rows, tl.l + j * rows, tl.alpha);
    };
    for (int64_t i = 0; i < (in_place ? kPfHeads : kAheadHeads); ++i) prefetch_at(i);
    if (in_place && !int8) {  // bf16 codes are the values
      std::fill(tl.kscale, tl.kscale + kKvPageTokens, 1.0f);
      std::fill(tl.vscale, tl.vscale + kKvPageTokens, 1.0f);
    }
    for (int64_t pg = pg0; pg < pg1; ++pg) {
      const int64_t kbase = pg * kKvPageTokens;
      const int nk = static_cast<int>(std::min<int64_t>(kKvPageTokens, kv_end - kbase));
      for (int64_t j = 0; j < hpt; ++j) {
        const int64_t h = kvh + j;
        const int64_t r0 = j * rows;
        float* const qj = tl.q + r0 * hd;
        float* const accj = tl.acc + r0 * hd;
        if (in_place) {
          // The head kPfHeads ahead in this task's order, its codes for the kernels to prefetch.
          const int64_t ahead = (pg - pg0) * hpt + j + kPfHeads;
          const int64_t pf_pg = pg0 + ahead / hpt, pf_h = kvh + ahead % hpt;
          const uint8_t* pf_k = nullptr;
          const uint8_t* pf_v = nullptr;
          if (pf_pg < pg1) {
            const uint8_t* kb = kv.k_block(pf_pg);
            const uint8_t* vb = kv.v_block(pf_pg);
            pf_k = kb + pf_h * kv.geo.head_bytes();
            pf_v = vb + pf_h * kv.geo.head_bytes();
            if (int8) {
              __builtin_prefetch(kb + kv.geo.scales_offset(pf_h), 0, 3);
              __builtin_prefetch(vb + kv.geo.scales_offset(pf_h), 0, 3);
            }
          }
          const uint8_t* kb = kv.k_block(pg);
          const uint8_t* vb = kv.v_block(pg);
          const uint8_t* k_codes = kb + h * kv.geo.head_bytes();
          const uint8_t* v_codes = vb + h * kv.geo.head_bytes();
          if (int8) {
            head_scales(kv.geo, kb, h, nk, tl.kscale);
            head_scales(kv.geo, vb, h, nk, tl.vscale);
            K.scores_i8(qj, rows, as_i8(k_codes), nk, hd, tl.s, as_i8(pf_k));
            softmax_step(j, nk, kbase);
            K.accumulate_i8(accj, rows, tl.s, tl.alpha, as_i8(v_codes), nk, hd, as_i8(pf_v));
          } else {
            K.scores_bf16kv(qj, rows, as_b16(k_codes), nk, hd, tl.s, as_b16(pf_k));
            softmax_step(j, nk, kbase);
            K.accumulate_bf16kv(accj, rows, tl.s, tl.alpha, as_b16(v_codes), nk, hd, as_b16(pf_v));
          }
          continue;
        }
        prefetch_at((pg - pg0) * hpt + j + kAheadHeads);
        K.load_tile(kv.geo, kv.k_block(pg), static_cast<int>(h), nk, tl.k, tl.kscale);
        K.load_tile(kv.geo, kv.v_block(pg), static_cast<int>(h), nk, tl.v, tl.vscale);
        K.scores(qj, rows, tl.k, nk, hd, tl.s);
        softmax_step(j, nk, kbase);
        K.accumulate(accj, rows, tl.s, tl.alpha, tl.v, nk, hd);
      }
    }
    for (int64_t j = 0; j < hpt; ++j) {
      const int64_t h = kvh + j;
      const int64_t r0 = j * rows;
      if (n_split == 1) {
        for (int r = 0; r < rows; ++r) {
          float* o = out + ((t0 + r / g) * p.n_head + h * g + r % g) * hd;
          const float inv = 1.0f / tl.l[r0 + r];  // l > 0: key 0 is visible to every query
          for (int d = 0; d < hd; ++d) o[d] = tl.acc[(r0 + r) * hd + d] * inv;
        }
      } else {
        // Laid out as the combine below reads them: item (query tile, KV head), then split.
        float* part = parts + (((n_qt - 1 - qt) * p.n_kv_head + h) * n_split + split) * part_stride;
        std::copy(tl.acc + r0 * hd, tl.acc + (r0 + rows) * hd, part);
        std::copy(tl.m + r0, tl.m + r0 + rows, part + int64_t{rows_max} * hd);
        std::copy(tl.l + r0, tl.l + r0 + rows, part + int64_t{rows_max} * hd + rows_max);
      }
    }
  });

  if (n_split == 1) return;
  // Combine: out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s, M = max_s m_s. A split that saw
  // no key of a row (m_s = -inf) gets weight 0.
  pool.parallel_for(base_tasks, [&](int64_t item, int) {
    const int64_t kvh = item % p.n_kv_head;
    const int64_t qt = n_qt - 1 - item / p.n_kv_head;
    const int64_t t0 = qt * bq;
    const int nt = static_cast<int>(std::min<int64_t>(bq, n_q - t0));
    const int64_t first = item * n_split;  // task ids of this item's splits are contiguous
    for (int r = 0; r < nt * g; ++r) {
      float mx = kNegInf;
      for (int64_t s = 0; s < n_split; ++s) {
        mx = std::max(mx, parts[(first + s) * part_stride + int64_t{rows_max} * hd + r]);
      }
      float* o = out + ((t0 + r / g) * p.n_head + kvh * g + r % g) * hd;
      std::fill(o, o + hd, 0.0f);
      float l = 0.0f;
      for (int64_t s = 0; s < n_split; ++s) {
        const float* part = parts + (first + s) * part_stride;
        const float ms = part[int64_t{rows_max} * hd + r];
        if (ms == kNegInf) continue;
        const float w = std::exp(ms - mx);
        l += w * part[int64_t{rows_max} * hd + rows_max + r];
        for (int d = 0; d < hd; ++d) o[d] += w * part[int64_t{r} * hd + d];
      }
      const float inv = 1.0f / l;
      for (int d = 0; d < hd; ++d) o[d] *= inv;
    }
  });
}

}  // namespace splash
