// Model::forward: one batch of sequences, split into passes of at most chunk_tokens rows per
// sequence; each pass runs every layer once over all its rows.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "backend/cpu/embedding.h"
#include "backend/cpu/norm.h"
#include "model/architecture.h"
#include "model/model.h"
#include "model/weights.h"
#include "model/blocks/block_util.h"

namespace splash {

namespace {

void size_workspace(Workspace& ws, const ModelConfig& c, int64_t n) {
  const int64_t q_dim = int64_t{c.n_head} * c.head_dim, kv_dim = int64_t{c.n_head_kv} * c.head_dim;
  grow(ws.h, n * c.n_embd);
  grow(ws.qkv, n * ((c.attn_output_gate ? 2 : 1) * q_dim + 2 * kv_dim));  // gated: [q | gate] per head
  grow(ws.q, n * q_dim);
  grow(ws.k, n * kv_dim);
  grow(ws.v, n * kv_dim);
  grow(ws.att, n * q_dim);
  grow(ws.ff, n * 2 * int64_t{c.n_ff});
  grow(ws.act, n * c.n_ff);
  grow(ws.out, n * c.n_embd);
}

}  // namespace

// forward()'s buffers besides the output, kept by ForwardOutput::scratch between calls.
struct ForwardScratch {
  Workspace ws;
  std::vector<float> x, final_rows, final_logits;
  std::vector<int32_t> tokens, positions;
  std::vector<RowRun> runs;
  std::vector<size_t> run_of;
  std::vector<std::pair<int64_t, int64_t>> picks;
  std::vector<int64_t> start_len, done;
};

Result<ForwardOutput> Model::forward(std::span<const SequenceRun> batch, KvPagePool& kv, ThreadPool& threads,
                                     const ForwardOptions& options) const {
  ForwardOutput out;
  SPLASH_TRY_STATUS(forward_into(batch, kv, threads, out, options));
  return out;
}

Status Model::forward_into(std::span<const SequenceRun> batch, KvPagePool& kv, ThreadPool& threads,
                           ForwardOutput& out, const ForwardOptions& options) const {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd, n_vocab = c.n_vocab;

  // --- validation: every error is reported before anything changes
  const KvCacheConfig& kc = kv.config();
  if (kc.n_layer != n_kv_layers_ || kc.n_kv_head != static_cast<int>(c.n_head_kv) ||
      kc.head_dim != static_cast<int>(c.head_dim))
    return make_error("forward: the KV pool has ", kc.n_layer, " layers x ", kc.n_kv_head, " KV heads x head_dim ",
                      kc.head_dim, ", the model needs ", n_kv_layers_, " x ", c.n_head_kv, " x ", c.head_dim);
  ForwardProfile* const prof = options.profile;
  const auto prof_t0 = prof != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const double prof_cpu0 = prof != nullptr ? process_cpu_seconds() : 0.0;
  const int64_t chunk = options.chunk_tokens > 0 ? options.chunk_tokens : options_.chunk_tokens;
  for (int il : options.hidden_layers)
    if (il < 0 || il >= static_cast<int>(c.n_layer))
      return make_error("forward: hidden layer ", il, " is outside [0, ", c.n_layer, ")");
  std::set<const SequenceState*> seen;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceRun& r = batch[i];
    if (r.seq == nullptr) return make_error("forward: run ", i, " has no sequence state");
    if (!seen.insert(r.seq).second) return make_error("forward: run ", i, " repeats a sequence of the batch");
    if (r.tokens.empty()) return make_error("forward: run ", i, " has no tokens");
    if (!r.seq->recurrent.empty() && static_cast<int64_t>(r.seq->recurrent.size()) != recurrent_state_floats_)
      return make_error("forward: run ", i, " carries a recurrent state of ", r.seq->recurrent.size(),
                        " floats, the model's is ", recurrent_state_floats_);
    if (recurrent_state_floats_ > 0 && r.seq->recurrent.empty() && r.seq->n_tokens() > 0)
      return make_error("forward: run ", i, " has ", r.seq->n_tokens(),
                        " tokens of KV but no recurrent state (restore the checkpoint taken with the KV)");
    const int64_t end = r.seq->n_tokens() + static_cast<int64_t>(r.tokens.size());
    if (end > max_context_)
      return make_error("forward: run ", i, " would reach position ", end, ", past the context of ", max_context_,
                        " tokens");
    for (size_t t = 0; t < r.tokens.size(); ++t)
      if (r.tokens[t] < 0 || r.tokens[t] >= n_vocab)
        return make_error("forward: run ", i, " token ", t, " has id ", r.tokens[t], ", outside the vocabulary [0, ",
                          n_vocab, ")");
  }

  // --- output layout (out's vectors keep their capacity: no allocation when a caller reuses it)
  if (!out.scratch) out.scratch = std::make_shared<ForwardScratch>();
  ForwardScratch& sc = *out.scratch;
  out.n_vocab = n_vocab;
  out.n_embd = d;
  out.logits_offset.assign(batch.size() + 1, 0);
  out.token_offset.assign(batch.size() + 1, 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t n = static_cast<int64_t>(batch[i].tokens.size());
    const int64_t rows = batch[i].logits == LogitRows::kAll ? n : batch[i].logits == LogitRows::kLast ? 1 : 0;
    out.logits_offset[i + 1] = out.logits_offset[i] + rows;
    out.token_offset[i + 1] = out.token_offset[i] + n;
  }
  const int64_t n_total = out.token_offset.back();
  out.logits.resize(static_cast<size_t>(out.logits_offset.back() * n_vocab));
  out.hidden.resize(options.hidden_layers.size() * static_cast<size_t>(n_total * d));

  std::vector<int64_t>& start_len = sc.start_len;
  std::vector<int64_t>& done = sc.done;
  start_len.assign(batch.size(), 0);
  done.assign(batch.size(), 0);
  for (size_t i = 0; i < batch.size(); ++i) start_len[i] = batch[i].seq->n_tokens();
  // Recurrent state (hybrid models): a new sequence starts from zeros. When the batch takes more
  // than one pass, a later pass can still run out of KV pages after an earlier one advanced the
  // state, so the states are copied first to put them back on failure (one pass: nothing runs
  // before the pages are reserved).
  std::vector<std::vector<float>> saved_state;
  if (recurrent_state_floats_ > 0) {
    bool multi_pass = false;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].seq->recurrent.empty()) batch[i].seq->recurrent.assign(static_cast<size_t>(recurrent_state_floats_), 0.0f);
      multi_pass |= static_cast<int64_t>(batch[i].tokens.size()) > chunk;
    }
    if (multi_pass)
      for (size_t i = 0; i < batch.size(); ++i) saved_state.push_back(batch[i].seq->recurrent);
  }
  auto roll_back = [&] {
    for (size_t i = 0; i < batch.size(); ++i) kv.truncate(batch[i].seq->kv, start_len[i]);
    for (size_t i = 0; i < saved_state.size(); ++i) batch[i].seq->recurrent = std::move(saved_state[i]);
  };

  Workspace& ws = sc.ws;
  std::vector<float>&x = sc.x, &final_rows = sc.final_rows, &final_logits = sc.final_logits;
  std::vector<int32_t>&tokens = sc.tokens, &positions = sc.positions;
  std::vector<RowRun>& runs = sc.runs;
  std::vector<size_t>& run_of = sc.run_of;  // pass run -> batch index

  for (;;) {
    // --- one pass: the next chunk of every sequence that has tokens left
    runs.clear();
    run_of.clear();
    tokens.clear();
    positions.clear();
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t left = static_cast<int64_t>(batch[i].tokens.size()) - done[i];
      if (left == 0) continue;
      const int64_t m = std::min(left, chunk);
      RowRun rr;
      rr.kv = &batch[i].seq->kv;
      rr.row0 = static_cast<int64_t>(tokens.size());
      rr.n_rows = m;
      rr.pos0 = batch[i].seq->n_tokens();
      rr.recurrent = batch[i].seq->recurrent.empty() ? nullptr : batch[i].seq->recurrent.data();
      if (Status st = kv.append(batch[i].seq->kv, m); !st.ok()) {
        roll_back();
        return make_error("forward: ", st.error_message());
      }
      for (int64_t t = 0; t < m; ++t) {
        tokens.push_back(batch[i].tokens[done[i] + t]);
        positions.push_back(static_cast<int32_t>(rr.pos0 + t));
      }
      runs.push_back(rr);
      run_of.push_back(i);
    }
    if (runs.empty()) break;
    const int64_t n = static_cast<int64_t>(tokens.size());

    grow(x, n * d);
    size_workspace(ws, c, n);
    {
      ProfileScope ps(prof, ForwardOp::kEmbedding);
      SPLASH_CHECK(embedding_lookup(weights_->embed, tokens.data(), n, x.data()).ok());  // ids checked above
    }

    LayerContext ctx;
    ctx.config = &c;
    ctx.rope = &weights_->rope;
    ctx.kv = &kv;
    ctx.threads = &threads;
    ctx.isa = options_.isa;
    ctx.n_rows = n;
    ctx.x = x.data();
    ctx.positions = positions.data();
    ctx.runs = runs;
    ctx.ws = &ws;
    ctx.profile = prof;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
      ctx.il = static_cast<int>(il);
      ctx.kv_layer = kv_layer_[il];
      ctx.recurrent_offset = recurrent_offset_[il];
      arch_->layer_forward(weights_->layers[il], ctx);
      for (size_t h = 0; h < options.hidden_layers.size(); ++h) {
        if (options.hidden_layers[h] != static_cast<int>(il)) continue;
        for (size_t r = 0; r < runs.size(); ++r) {
          const size_t i = run_of[r];
          float* dst = out.hidden.data() + (h * n_total + out.token_offset[i] + done[i]) * d;
          std::memcpy(dst, x.data() + runs[r].row0 * d, runs[r].n_rows * d * sizeof(float));
        }
      }
    }

    // --- logits of the rows asked for, one output matmul for the whole pass
    std::vector<std::pair<int64_t, int64_t>>& picks = sc.picks;  // (pass row, output logits row)
    picks.clear();
    for (size_t r = 0; r < runs.size(); ++r) {
      const size_t i = run_of[r];
      const SequenceRun& br = batch[i];
      if (br.logits == LogitRows::kAll) {
        for (int64_t t = 0; t < runs[r].n_rows; ++t) picks.push_back({runs[r].row0 + t, out.logits_offset[i] + done[i] + t});
      } else if (br.logits == LogitRows::kLast && done[i] + runs[r].n_rows == static_cast<int64_t>(br.tokens.size())) {
        picks.push_back({runs[r].row0 + runs[r].n_rows - 1, out.logits_offset[i]});
      }
    }
    if (!picks.empty()) {
      ProfileScope ps(prof, ForwardOp::kLogits);
      const int64_t np = static_cast<int64_t>(picks.size());
      grow(final_rows, np * d);
      for (int64_t p = 0; p < np; ++p)
        rms_norm(x.data() + picks[p].first * d, weights_->out_norm.data(), c.rms_eps, final_rows.data() + p * d, 1, d,
                 options_.isa);
      // Output rows in a row (every single-pass call): the matmul writes them in place.
      bool in_place = true;
      for (int64_t p = 1; p < np && in_place; ++p) in_place = picks[p].second == picks[0].second + p;
      if (in_place) {
        matmul(weights_->output_matrix(), final_rows.data(), out.logits.data() + picks[0].second * n_vocab, np, threads);
      } else {
        grow(final_logits, np * n_vocab);
        matmul(weights_->output_matrix(), final_rows.data(), final_logits.data(), np, threads);
        for (int64_t p = 0; p < np; ++p)
          std::memcpy(out.logits.data() + picks[p].second * n_vocab, final_logits.data() + p * n_vocab,
                      n_vocab * sizeof(float));
      }
    }
    for (size_t r = 0; r < runs.size(); ++r) done[run_of[r]] += runs[r].n_rows;
  }
  if (prof != nullptr) {
    prof->forward_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - prof_t0).count();
    prof->cpu_seconds += process_cpu_seconds() - prof_cpu0;
    ++prof->forwards;
    prof->tokens += n_total;
  }
  return {};
}

}  // namespace splash
