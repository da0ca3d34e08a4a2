// The decode prefetch distance, tuned while decoding. On Intel the decode kernels of the interleaved
// layouts prefetch each weight stream some bytes ahead into L1 (PackedWeights::stream_prefetch_bytes),
// and the best distance is not a constant of the layout: on the same kind of host, 0.6B Q4_0 tg128
// was 2.5-3% faster at 2 KiB than at 1 KiB one day, and the next 1.7B Q4_0 was 3-10% faster at 768 B
// than at 2 KiB, the gap moving within the hour with the memory latency and bandwidth the host's
// neighbours leave (docs/PERFORMANCE.md, "Prefetch distance tuned while decoding"). So each layout's
// distance climbs a ladder while tokens are decoded: now and then the next products take the
// current step and its two neighbours in turn, each product is timed, and the fastest step by bytes
// per second (a trimmed mean over its products) becomes current when it beats the current one by a
// margin.
//
// The results never depend on the distance (only the speed does), so the tuner needs no care for
// determinism. Thread-safe: one mutex, taken by begin() for every one-row product of the layout
// and by end() for the timed ones (0.25-64 MB, which take 10 us to 5 ms).
#pragma once

#include <cstdint>
#include <mutex>

namespace splash::cpu {

class PrefetchTuner {
 public:
  // The distances tried, in bytes.
  static constexpr int64_t kLadder[] = {512, 768, 1024, 1536, 2048, 3072};
  static constexpr int kSteps = static_cast<int>(sizeof(kLadder) / sizeof(kLadder[0]));
  // Products timed per trial step, and how many products run on the chosen step before the next
  // trial: few after a move (the climb goes on), more once the current step won, twice as many
  // after each further stay up to kMaxHold (a steady host is checked less and less often, so the
  // trials cost under 1% of its products; any move starts over).
  static constexpr int kSamplesPerStep = 96;
  static constexpr int64_t kHoldAfterMove = 128;
  static constexpr int64_t kHoldAfterStay = 4096;
  static constexpr int64_t kMaxHold = 32768;
  // Only products of this many weight bytes are timed: smaller ones are dominated by the fork and
  // join, and the output matrix (one per token, 80-600 MB) would land in a single trial.
  static constexpr int64_t kMinTimedBytes = int64_t{256} << 10;
  static constexpr int64_t kMaxTimedBytes = int64_t{64} << 20;
  // A neighbour replaces the current step only when faster by more than this share.
  static constexpr double kMoveMargin = 0.02;
  // A step's speed is the mean of its products' bytes per ns without the kTrim fastest and kTrim
  // slowest: a product the OS preempted for a few ms must not decide a round.
  static constexpr int kTrim = kSamplesPerStep / 8;

  // Starts on the ladder step nearest to `start_bytes`.
  explicit PrefetchTuner(int64_t start_bytes);

  // What one product runs with: the distance, and the ticket to hand back to end() with its time.
  struct Ticket {
    int64_t bytes = 0;
    int slot = -1;        // the trial slot, -1: not timed
    uint64_t round = 0;   // the trial round it belongs to (a late report of an older round is dropped)
  };
  // The distance for the next product of `product_bytes` weight bytes.
  Ticket begin(int64_t product_bytes);
  // Reports a product's time; ignored unless the ticket was for the round still under way.
  void end(const Ticket& ticket, int64_t product_bytes, int64_t ns);

  // The distance products outside trials get (the current step).
  int64_t current() const;
  // Trial rounds finished and moves made so far (for reports and tests).
  int64_t rounds() const;
  int64_t moves() const;

 private:
  void start_round();
  void finish_round();

  mutable std::mutex mu_;
  int current_ = 0;            // ladder index
  int64_t hold_ = kHoldAfterMove;  // products left before the next round (the first ones warm up)
  int64_t next_stay_hold_ = kHoldAfterStay;  // the hold after the next stay
  bool trying_ = false;        // a round is under way
  uint64_t round_ = 0;
  int steps_[3] = {0, 0, 0};   // the round's ladder indices
  int n_steps_ = 0;
  int next_ = 0;               // rotation over the round's steps
  int samples_[3] = {0, 0, 0};
  double rates_[3][kSamplesPerStep] = {};  // bytes per ns of each timed product, per step
  int64_t rounds_done_ = 0;
  int64_t moves_ = 0;
};

}  // namespace splash::cpu
