// Rotary position embedding. Two pairings exist in the wild and both are here:
//   kInterleaved: pairs (2i, 2i+1)        -- GGUF llama (q/k rows permuted at conversion)
//   kNeox:        pairs (i, i + n_rot/2)   -- HF llama/qwen2/qwen3 ("rotate_half"), GGUF qwen*
// Pair i turns by angle pos * inv_freq[i], inv_freq[i] = theta^(-2i / n_rot); only the first n_rot
// dims of a head rotate (partial rotary), the rest pass through.
//
// Angles are computed in double and rounded once into float cos/sin tables, so long positions
// (100K+) lose no accuracy to float products. A table covers a position range [pos_begin, pos_end);
// build one for the model's context at load. Rows are filled lazily, kChunkPositions at a time,
// the first time a position of the chunk is asked for: a model with a 40,960-token window holds
// only the chunks its sequences have reached (128 KiB per chunk at 64 pairs), not 20 MiB up front.
//
// Thread-safety: a RopeTable's values never change after create(); cos_row / sin_row / rope_apply
// may run concurrently (chunk creation is serialized inside, a filled chunk is never moved or freed
// before the table is destroyed).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/result.h"

namespace splash {

enum class RopeStyle : uint8_t { kInterleaved, kNeox };
enum class RopeScaling : uint8_t {
  kNone,
  kLinear,  // positions divided by `factor`
  kLlama3,  // llama 3.1 frequency-dependent scaling (factor, low/high_freq_factor, original_context)
};

struct RopeParams {
  int head_dim = 0;
  int n_rot = 0;  // rotated dims per head; 0 = head_dim. Even, <= head_dim.
  double theta = 10000.0;
  RopeStyle style = RopeStyle::kNeox;
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;
};

class RopeTable {
 public:
  static constexpr int64_t kChunkPositions = 256;

  RopeTable();
  ~RopeTable();
  RopeTable(RopeTable&&) noexcept;
  RopeTable& operator=(RopeTable&&) noexcept;
  RopeTable(const RopeTable&) = delete;
  RopeTable& operator=(const RopeTable&) = delete;

  // Errors name the bad field (odd n_rot, n_rot > head_dim, theta <= 0, empty range ...).
  static Result<RopeTable> create(const RopeParams& params, int64_t pos_begin, int64_t pos_end);

  const RopeParams& params() const { return params_; }
  int n_rot() const { return n_rot_; }
  int64_t pos_begin() const { return pos_begin_; }
  int64_t pos_end() const { return pos_end_; }
  const std::vector<double>& inv_freq() const { return inv_freq_; }  // [n_rot / 2], after scaling
  const float* cos_row(int64_t pos) const;                            // [n_rot / 2]
  const float* sin_row(int64_t pos) const;                            // [n_rot / 2]
  // Bytes of the chunks filled so far (memory accounting).
  int64_t resident_bytes() const;

 private:
  struct Chunks;
  const float* chunk(int64_t pos) const;  // the filled chunk holding pos: [cos rows..., sin rows...]

  RopeParams params_;
  int n_rot_ = 0;
  int64_t pos_begin_ = 0, pos_end_ = 0;
  std::vector<double> inv_freq_;  // [n_rot / 2]
  std::unique_ptr<Chunks> chunks_;
};

// In place. x: [n_tokens, n_head, head_dim] (head_dim = table.params().head_dim); positions:
// [n_tokens], each inside the table's range (a position outside is a caller bug: CHECK).
void rope_apply(float* x, int64_t n_tokens, int64_t n_head, const int32_t* positions, const RopeTable& table);

}  // namespace splash
