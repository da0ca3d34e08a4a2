// How a generation ended: one type for the engine (EngineEvent::kDone), `splash run` (generate())
// and the HTTP layers (which map it to each API's finish_reason / stop_reason).
#pragma once

#include <cstdint>

namespace splash {

enum class FinishReason : uint8_t {
  kStop,       // end-of-generation token or stop string
  kLength,     // max_tokens reached
  kContext,    // the sequence reached the model's context limit
  kCancelled,  // Engine::cancel() or shutdown()
  kTimeout,    // the request's deadline passed
  kError,      // forward or sampling failure, or KV capacity; the event's error says which
};

// "stop", "length", "context", "cancelled", "timeout", "error".
constexpr const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContext:
      return "context";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kTimeout:
      return "timeout";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

}  // namespace splash
