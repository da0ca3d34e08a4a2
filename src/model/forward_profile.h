// Opt-in per-op wall-clock timing of Model::forward (`splash bench --profile`). The forward and the
// blocks wrap each op in a ProfileScope; with no profile attached (the default) a scope is one
// null-pointer test and reads no clock.
//
// What it can and cannot see: ops are timed on the calling thread from dispatch to the return of
// the last task, so a parallel op's time includes the pool's dispatch and the wait for the slowest
// thread. The process CPU time over the same forwards (getrusage) is kept beside the wall time: with
// T threads, T x wall - CPU is time no thread did anything (a descheduled or sleeping worker; a
// spinning worker counts as busy, so this is a lower bound on pool waiting).
//
// Thread-safety: a ForwardProfile is written by the thread that calls forward(); one per forward
// caller.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace splash {

enum class ForwardOp : uint8_t {
  kEmbedding,   // token embedding lookup
  kNorm,        // RMSNorm (block inputs, q/k norm)
  kMatmul,      // q/k/v, o, dense gate/up, down projections (biases included)
  kCopy,        // splitting the fused q/k/v output into per-head rows
  kRope,        // rotary embedding of q and k
  kKvStore,     // K/V rows encoded into the KV pages
  kAttention,   // attention over the KV pages
  kActivation,  // SwiGLU
  kResidual,    // residual adds
  kLogits,      // final norm, output projection and the copy into ForwardOutput
  kLinearAttention,  // Gated DeltaNet: conv, q/k norms, gates, delta rule, gated norm (not its matmuls)
  kLinearMatmul,     // Gated DeltaNet input and output projections
  kRouter,           // MoE router product and top-k per row
  kExperts,          // MoE routed experts: rows gathered, gate/up/down, SwiGLU, weighted sum; in
                     // passes of <= kMoeBatchedMaxRows rows the shared expert too (one task set)
  kSharedExpert,     // MoE shared expert in longer passes: gate/up/down, SwiGLU, gated add
  kCount,
};

const char* forward_op_name(ForwardOp op);

struct ForwardProfile {
  std::array<double, static_cast<size_t>(ForwardOp::kCount)> seconds{};  // [op] wall seconds
  std::array<int64_t, static_cast<size_t>(ForwardOp::kCount)> calls{};   // [op]
  double forward_seconds = 0.0;  // wall time inside forward() (includes what no scope covers)
  double cpu_seconds = 0.0;      // process user + system CPU time over the same forwards
  int64_t forwards = 0;
  int64_t tokens = 0;

  void add(ForwardOp op, double s) {
    seconds[static_cast<size_t>(op)] += s;
    ++calls[static_cast<size_t>(op)];
  }
  double op_seconds() const;  // sum over ops
  void reset() { *this = ForwardProfile{}; }

  // A text table: per op ms per forward, share of forward time, calls; then the uncovered rest and
  // the idle-thread estimate for a pool of `threads`.
  std::string table(int threads) const;
};

// Process CPU time (user + system), seconds.
double process_cpu_seconds();

class ProfileScope {
 public:
  ProfileScope(ForwardProfile* profile, ForwardOp op) : profile_(profile), op_(op) {
    if (profile_ != nullptr) t0_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (profile_ != nullptr)
      profile_->add(op_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  ForwardProfile* profile_;
  ForwardOp op_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace splash
