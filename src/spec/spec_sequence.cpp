#include "spec/spec_sequence.h"

#include <algorithm>

namespace splash {

void gather_hidden_rows(const ForwardOutput& out, size_t run, int64_t first, int64_t n, std::vector<float>& rows) {
  const int64_t n_embd = out.n_embd;
  const int64_t n_total = out.token_offset.back();
  const int64_t n_layers = n_total > 0 && n_embd > 0 ? static_cast<int64_t>(out.hidden.size()) / (n_total * n_embd) : 0;
  rows.resize(static_cast<size_t>(n * n_layers * n_embd));
  const int64_t base = out.token_offset[run] + first;
  SPLASH_CHECK(first >= 0 && base + n <= out.token_offset[run + 1]);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t l = 0; l < n_layers; ++l)
      std::copy_n(out.hidden.data() + (l * n_total + base + r) * n_embd, n_embd,
                  rows.data() + (r * n_layers + l) * n_embd);
}

Status rollback_verify(const Model& model, KvPagePool& kv, ThreadPool& threads, SequenceState& seq,
                       std::span<const int32_t> fed, int64_t n_keep, const std::vector<float>& snapshot) {
  const int64_t n_fed = static_cast<int64_t>(fed.size());
  SPLASH_CHECK(n_keep >= 0 && n_keep <= n_fed && seq.n_tokens() >= n_fed);
  if (n_keep == n_fed) return {};
  const int64_t start = seq.n_tokens() - n_fed;
  if (model.recurrent_state_floats() == 0) {
    truncate_sequence(kv, seq, start + n_keep);
    return {};
  }
  truncate_sequence(kv, seq, start);
  seq.recurrent = snapshot;
  if (n_keep == 0) return {};
  SequenceRun run{&seq, fed.first(static_cast<size_t>(n_keep)), LogitRows::kNone};
  SPLASH_TRY(ForwardOutput replay, model.forward({&run, 1}, kv, threads));
  (void)replay;
  return {};
}

}  // namespace splash
