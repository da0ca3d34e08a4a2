#include "model/forward_profile.h"

#include <sys/resource.h>

#include <cstdio>

namespace splash {

const char* forward_op_name(ForwardOp op) {
  switch (op) {
    case ForwardOp::kEmbedding: return "embedding";
    case ForwardOp::kNorm: return "rms_norm";
    case ForwardOp::kMatmul: return "matmul";
    case ForwardOp::kCopy: return "qkv split copy";
    case ForwardOp::kRope: return "rope";
    case ForwardOp::kKvStore: return "kv store";
    case ForwardOp::kAttention: return "attention";
    case ForwardOp::kActivation: return "swiglu";
    case ForwardOp::kResidual: return "residual add";
    case ForwardOp::kLogits: return "logits (norm + output matmul)";
    case ForwardOp::kLinearAttention: return "gated deltanet (conv, delta rule)";
    case ForwardOp::kLinearMatmul: return "gated deltanet projections";
    case ForwardOp::kRouter: return "moe router + top-k";
    case ForwardOp::kExperts: return "moe experts (decode: + shared)";
    case ForwardOp::kSharedExpert: return "moe shared expert";
    case ForwardOp::kCount: break;
  }
  return "?";
}

double ForwardProfile::op_seconds() const {
  double s = 0.0;
  for (double x : seconds) s += x;
  return s;
}

double process_cpu_seconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

std::string ForwardProfile::table(int threads) const {
  std::string out;
  char line[160];
  const double n = forwards > 0 ? static_cast<double>(forwards) : 1.0;
  const double total = forward_seconds > 0.0 ? forward_seconds : 1e-30;
  std::snprintf(line, sizeof line, "  %-30s %12s %8s %10s\n", "op", "ms/forward", "share", "calls/fwd");
  out += line;
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (calls[i] == 0) continue;
    std::snprintf(line, sizeof line, "  %-30s %12.3f %7.1f%% %10.1f\n", forward_op_name(static_cast<ForwardOp>(i)),
                  seconds[i] * 1e3 / n, 100.0 * seconds[i] / total, static_cast<double>(calls[i]) / n);
    out += line;
  }
  const double rest = forward_seconds - op_seconds();
  std::snprintf(line, sizeof line, "  %-30s %12.3f %7.1f%%\n", "other (outside the scopes)", rest * 1e3 / n,
                100.0 * rest / total);
  out += line;
  std::snprintf(line, sizeof line, "  %-30s %12.3f %7.1f%%   (%lld forwards, %lld tokens)\n", "total",
                forward_seconds * 1e3 / n, 100.0, static_cast<long long>(forwards), static_cast<long long>(tokens));
  out += line;
  const double capacity = forward_seconds * threads;
  if (capacity > 0.0) {
    const double idle = capacity - cpu_seconds;
    std::snprintf(line, sizeof line,
                  "  CPU %.1f%% of %d threads x wall; idle (descheduled or asleep) >= %.3f ms/forward (%.1f%%)\n",
                  100.0 * cpu_seconds / capacity, threads, idle * 1e3 / n, 100.0 * idle / capacity);
    out += line;
  }
  return out;
}

}  // namespace splash
