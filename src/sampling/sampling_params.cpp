#include "sampling/sampling_params.h"

#include <cmath>

namespace splash {
namespace {

// Written as !(lo <= v && v <= hi) so that NaN fails every check.
Status check_range(const char* field, float v, float lo, float hi) {
  if (!(v >= lo && v <= hi)) {
    return make_error("sampling: ", field, " = ", v, " is outside [", lo, ", ", hi, "]");
  }
  return {};
}

}  // namespace

Status SamplingParams::validate() const {
  // OpenAI accepts temperature in [0, 2], top_p in [0, 1], presence/frequency in [-2, 2].
  SPLASH_TRY_STATUS(check_range("temperature", temperature, 0.0f, 2.0f));
  SPLASH_TRY_STATUS(check_range("top_p", top_p, 0.0f, 1.0f));
  SPLASH_TRY_STATUS(check_range("min_p", min_p, 0.0f, 1.0f));
  SPLASH_TRY_STATUS(check_range("presence_penalty", presence_penalty, -2.0f, 2.0f));
  SPLASH_TRY_STATUS(check_range("frequency_penalty", frequency_penalty, -2.0f, 2.0f));
  if (top_k < 0) {
    return make_error("sampling: top_k = ", top_k, " must be >= 0 (0 turns it off)");
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return make_error("sampling: repetition_penalty = ", repetition_penalty,
                      " must be a finite number > 0 (1 turns it off)");
  }
  if (penalty_last_n < -1) {
    return make_error("sampling: penalty_last_n = ", penalty_last_n,
                      " must be >= -1 (-1 = whole context, 0 = off)");
  }
  return {};
}

}  // namespace splash
